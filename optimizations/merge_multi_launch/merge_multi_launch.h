// merge_multi_launch: consecutive launch groups of one layer that no host step
// separates become one launch group (one device run): per layer `rms_gemv_rope`
// (RMSNorm, Q/K/V GEMV, RoPE Q, RoPE K) and `o_gemv_ffn` (O GEMV, add, RMSNorm,
// gate, up, SiLU*mul, down, add), and the LM head (final RMSNorm and its vocab
// partitions). Values produced and consumed inside a merged group stay on the
// device (INTERMEDIATE) unless the host needs them. A group that needs two
// specializations of a kernel (GEMV K=2048 and K=8192) links both symbols.
// Target limits (distinct launch bodies per group, GEMV shapes) split groups; each
// split is recorded with its reason. On npu2 a GEMV beyond K_max runs as the K-split
// GEMV (gemv_ksplit, K in chunks of 512) where K allows, and O + FFN merges only
// through K-split O and down GEMVs, as the reference deploys it (Llama-3.2-1B,
// Qwen3-0.6B: 2 runs per layer); where their K forbids (Qwen2.5-0.5B: K 896, 4864)
// it becomes one group per GEMV (5 runs per layer). docs/architecture.md s.5.
#ifndef DK_OPTIMIZATIONS_MERGE_MULTI_LAUNCH_MERGE_MULTI_LAUNCH_H_
#define DK_OPTIMIZATIONS_MERGE_MULTI_LAUNCH_MERGE_MULTI_LAUNCH_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt::merge_multi_launch {

inline constexpr char kName[] = "merge_multi_launch";

struct Options {
  // Which merges to make: "rms_gemv_rope", "o_gemv_ffn", "lm_head"; empty = all.
  std::set<std::string> groups;
};

absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target,
                               const Options& options = {});

}  // namespace dk::opt::merge_multi_launch

#endif  // DK_OPTIMIZATIONS_MERGE_MULTI_LAUNCH_MERGE_MULTI_LAUNCH_H_
