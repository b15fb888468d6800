// compress_weights: bf16 GEMV weights in packed_panel_v1 switch to
// packed_panel_x12_v1 (kernels/gemv/gemv_x12.h), written once at load: 12 bits per
// weight, lossless. Each block of 8 rows x 64 columns keeps a 16-byte table of the
// upper exponent bits it uses; the kernel rebuilds every weight bit for bit in
// registers, so the stage is bit-identical to its parent while decode streams 0.77x
// the weight bytes. A block whose weights need more than 8 table entries stays bf16
// (decided at load, from the weights), so any weights work. Launches switch to the
// x12 variant of their kernel (gemv, rms_gemv, rms_gemv3, rms_gemv_silu_mul,
// gemv_add); a weight stays packed when a launch reading it has no x12 variant or
// reads f32 x (the x12 GEMV takes bf16 x).
#ifndef DK_OPTIMIZATIONS_COMPRESS_WEIGHTS_COMPRESS_WEIGHTS_H_
#define DK_OPTIMIZATIONS_COMPRESS_WEIGHTS_COMPRESS_WEIGHTS_H_

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt::compress_weights {

inline constexpr char kName[] = "compress_weights";

absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target);

}  // namespace dk::opt::compress_weights

#endif  // DK_OPTIMIZATIONS_COMPRESS_WEIGHTS_COMPRESS_WEIGHTS_H_
