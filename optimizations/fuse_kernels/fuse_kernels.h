// fuse_kernels: inside each launch group, a GEMV and the elementwise launches next
// to it become one launch of a fused kernel (kernels/gemv/gemv_fused.h), which runs
// them in one parallel pass over the weights' rows:
//  * rms_gemv / rms_gemv3: an RMSNorm and the 1 or 3 GEMVs that are its only
//    readers (per layer the q/k/v projections; the LM head's final norm and its
//    partitions when there are 1 or 3);
//  * rms_gemv_silu_mul: an RMSNorm, the gate and up GEMVs that read it and the
//    SiLU*mul that is their only reader;
//  * gemv_add: a GEMV and the residual add that is its only reader (O, down).
// A value the fusion removes must stay inside its group (INTERMEDIATE, no host
// mirror, no reader outside the fused launches), so run merge_multi_launch and
// buffer_object_reuse first; the fused launch takes the place of the first launch
// it replaces. The fused kernels round where the unfused ones do, so the stage is
// bit-identical to its parent (verify checks identical tokens). Every weight of a
// fused launch must have one layout and block format (the variant's). A norm with 2
// or more than 3 GEMV readers, or readers that are not all GEMVs, is left as it is,
// and the lineage says why.
#ifndef DK_OPTIMIZATIONS_FUSE_KERNELS_FUSE_KERNELS_H_
#define DK_OPTIMIZATIONS_FUSE_KERNELS_FUSE_KERNELS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt::fuse_kernels {

inline constexpr char kName[] = "fuse_kernels";

// The fusions, named by their kernel ("rms_gemv" covers rms_gemv3).
std::vector<std::string> Fusions();

struct Options {
  std::set<std::string> fusions;  // which to make; empty = all
};

absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target,
                               const Options& options = {});

}  // namespace dk::opt::fuse_kernels

#endif  // DK_OPTIMIZATIONS_FUSE_KERNELS_FUSE_KERNELS_H_
