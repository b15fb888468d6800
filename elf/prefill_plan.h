// The prefill plan: the device runs with which a program's target processes a
// prompt chunk of token rows (docs/architecture.md s.4, "Token rows"). On the CPU
// device a chunk runs through the decode groups as they are. A target with prefill
// limits (npu2) runs each GEMV as a GEMM over the chunk's rows, so the GEMV's K
// limits no longer apply: the groups its decode merge split for them (the K-split
// GEMV's chunk, K_max) run as one again, within the target's own prefill rules (the
// chunk a whole number of row tiles, launch bodies per run, the FFN down projection
// whose K is no multiple of down_k_multiple first in a run of its own).
//
// The plan names the decode groups each run takes its launches from, so a device
// backend runs the same launches and BOs with more rows; the CPU device computes each
// row as the decode step does (the GEMM's f32 sums and one rounding, up to their order).
// Thread-safety: stateless functions.
#ifndef DK_ELF_PREFILL_PLAN_H_
#define DK_ELF_PREFILL_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "registry/registry.pb.h"

namespace dk::elf {

// The prompt chunk when none is given: large enough that the weights are read once
// per many tokens, small enough that a chunk's activations stay a few MiB (the
// runtime takes fewer rows where they would not).
inline constexpr int kDefaultPrefillRows = 512;

struct PrefillRun {
  std::string name;                 // e.g. "L0.o_ffn" (a decode group's own name when it runs alone)
  int layer = -1;                   // -1: model-wide (the LM head: the chunk's last row only)
  std::vector<std::string> groups;  // the decode groups whose launches it runs, in order
};

struct PrefillPlan {
  std::string target;
  int64_t rows = 0;  // token rows per chunk
  int64_t herd = 0;  // row tiles per GEMM run (0: the target has no prefill limits)
  int64_t row_tile = 0;
  std::vector<PrefillRun> runs;
  std::vector<std::string> notes;  // runs joined or split, and why (for the lineage)
};

// The target a program was planned for: the target of its last lineage entry ("cpu"
// for a program without one). NotFound for a target the registry does not know.
absl::StatusOr<const registry::TargetConstraints*> ProgramTarget(const Program& program);

// Whether merge_multi_launch has planned the program's device runs (its lineage).
bool DecodeMerged(const Program& program);

// The plan for chunks of `rows` token rows. `merged`: the program's groups are the
// decode merge's (DecodeMerged; the merge itself passes true), so the consecutive
// groups of one layer came from one run of launches, which a target with prefill
// limits runs as one again where its rules allow; otherwise each group runs alone.
// FailedPrecondition when the target cannot run such chunks (rows no multiple of its
// row tile) or a GEMM of the program (its K, a down projection inside a decode group
// it must lead).
absl::StatusOr<PrefillPlan> PlanPrefill(const Program& program, const registry::TargetConstraints& target,
                                        int64_t rows, bool merged);

// Runs per chunk by layer, as RunsPerLayer (stats.h) counts decode runs.
std::map<int, int> PrefillRunsPerLayer(const PrefillPlan& plan, int n_layers);

// "npu2, chunks of 512 rows as GEMMs in herds of 8 x 64 rows: 3 per layer (all 24
// layers) + 1 model-wide = 73 per chunk".
std::string DescribePrefill(const PrefillPlan& plan, int n_layers);

// The prompt chunk a program runs with: `requested` rows (0: `fallback`, at most the
// context), checked against the program's target: FailedPrecondition naming its rule
// for a requested chunk of no whole row tiles (1, token by token through the decode
// runs, is always taken); a fallback is rounded down to whole
// tiles (a fallback under one tile stays: one chunk, padded to the tile on the device).
absl::StatusOr<int64_t> PrefillRowsFor(const Program& program, int64_t requested, int64_t fallback);

}  // namespace dk::elf

#endif  // DK_ELF_PREFILL_PLAN_H_
