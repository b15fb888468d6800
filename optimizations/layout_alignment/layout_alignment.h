// layout_alignment: GEMV weights are packed once, at load, into the layout the
// packed GEMV variant reads (packed_panel_v1: 8-row panels of 64-byte column
// chunks, one sequential stream per thread), and the launches switch to that
// variant; the LM head is split into vocab partitions of at most
// `lm_head_partition_rows` rows (a multiple of the 8-row panel, so partitions need
// no padding but the last). No per-call host conversion remains. docs/architecture.md s.5.
#ifndef DK_OPTIMIZATIONS_LAYOUT_ALIGNMENT_LAYOUT_ALIGNMENT_H_
#define DK_OPTIMIZATIONS_LAYOUT_ALIGNMENT_LAYOUT_ALIGNMENT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt::layout_alignment {

inline constexpr char kName[] = "layout_alignment";

struct Options {
  // 0: never split the LM head. The target's GEMV row limit caps it too.
  int64_t lm_head_partition_rows = 16384;
};

absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target,
                               const Options& options = {});

}  // namespace dk::opt::layout_alignment

#endif  // DK_OPTIMIZATIONS_LAYOUT_ALIGNMENT_LAYOUT_ALIGNMENT_H_
