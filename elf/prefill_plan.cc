#include "elf/prefill_plan.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "elf/stats.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::elf {
namespace {

using Groups = std::vector<const LaunchGroup*>;

// The reference's names for the prefill ELFs of a decode merge.
std::string RunName(const std::string& base) {
  return absl::StrReplaceAll(base, {{"rms_gemv_rope", "rms_gemms_rope"}, {"o_gemv_ffn", "o_ffn"}});
}

// A launch's body as a prefill run stitches it: its kernel (a K-split GEMV is the
// plain GEMM there) and integer parameters but the K-split chunk.
std::string GemmBody(const Launch& l) {
  auto kernel = KernelOf(l);
  std::string body = kernel.ok() ? ((*kernel)->id() == "gemv_ksplit" ? "gemv" : (*kernel)->id()) : l.kernel_symbol();
  const std::map<std::string, int64_t> params(l.params().begin(), l.params().end());
  for (const auto& [k, v] : params) {
    if (k != "k_chunk") absl::StrAppend(&body, " ", k, "=", v);
  }
  return body;
}

// The groups of `run` in pieces of at most the target's launch bodies each.
std::vector<Groups> SplitAtBodies(const Groups& run, const registry::TargetConstraints& target) {
  std::vector<Groups> pieces(1);
  std::set<std::string> bodies;
  for (const LaunchGroup* g : run) {
    std::set<std::string> with = bodies;
    for (const Launch& l : g->launches()) with.insert(GemmBody(l));
    const int limit = target.max_launches_per_group();
    if (limit > 0 && static_cast<int>(with.size()) > limit && !pieces.back().empty()) {
      pieces.emplace_back();
      with.clear();
      for (const Launch& l : g->launches()) with.insert(GemmBody(l));
    }
    bodies = std::move(with);
    pieces.back().push_back(g);
  }
  return pieces;
}

// Where `run` (an O + FFN merge) must split so that its down projection leads a run:
// the index of the group it leads, or run.size() when it may stay inside.
absl::StatusOr<size_t> DownSplit(const Groups& run, const registry::TargetConstraints& target, std::string* note) {
  const int64_t multiple = target.prefill().down_k_multiple();
  const std::string first = MergeName(run.front()->name());  // as merge_multi_launch names the O + FFN run
  if (multiple <= 0 || !(absl::EndsWith(first, "o_gemv_ffn") || absl::EndsWith(first, "o_proj"))) return run.size();
  for (size_t g = run.size(); g-- > 0;) {
    const auto& launches = run[g]->launches();
    for (int i = launches.size() - 1; i >= 0; --i) {
      const int64_t k = LaunchParam(launches[i], "cols");
      if (k == 0) continue;
      if (k % multiple == 0) return run.size();
      if (i != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            run[g]->name(), ": its down GEMM (K=", k, ", no multiple of ", multiple, ") must lead a ",
            target.name(), " prefill run but comes after ", i, " launches of its decode group"));
      }
      if (g == 0) return run.size();  // it leads the whole run already
      *note = absl::StrCat("the down GEMM's K=", k, " is no multiple of ", multiple, ": it leads a run of its own");
      return g;
    }
  }
  return run.size();
}

// Appends the runs of `run` (consecutive groups of one layer from one decode merge).
absl::Status AddRuns(const Groups& run, const registry::TargetConstraints& target, PrefillPlan& plan) {
  const int layer = run.front()->layer();
  if (!target.has_prefill() || layer < 0) {  // the LM head: the chunk's last row, as in decode
    for (const LaunchGroup* g : run) plan.runs.push_back({g->name(), layer, {g->name()}});
    return absl::OkStatus();
  }
  for (const LaunchGroup* g : run) {
    for (const Launch& l : g->launches()) {
      if (const int64_t k = LaunchParam(l, "cols"); k > 0) {
        if (absl::Status st = registry::CheckPrefillGemm(target, k); !st.ok()) {
          return absl::FailedPreconditionError(absl::StrCat(g->name(), ": ", st.message()));
        }
      }
    }
  }
  const std::string base = RunName(MergeName(run.front()->name()));
  std::string down_note;
  DK_ASSIGN_OR_RETURN(const size_t down, DownSplit(run, target, &down_note));
  std::vector<std::pair<std::string, Groups>> halves = {{base, Groups(run.begin(), run.begin() + down)}};
  if (down < run.size()) {
    halves[0].first = absl::StrCat(base, "_head");
    halves.push_back({absl::StrCat("L", layer, ".down_add"), Groups(run.begin() + down, run.end())});
  }
  for (const auto& [name, groups] : halves) {
    if (groups.empty()) continue;
    const std::vector<Groups> pieces = SplitAtBodies(groups, target);
    for (size_t i = 0; i < pieces.size(); ++i) {
      PrefillRun r{pieces.size() > 1 ? absl::StrCat(name, ".part", i) : name, layer, {}};
      for (const LaunchGroup* g : pieces[i]) r.groups.push_back(g->name());
      if (r.groups.size() > 1 && layer <= 0) {  // every layer is planned alike: layer 0 tells
        plan.notes.push_back(absl::StrCat(r.name, " runs ", r.groups.front(), " .. ", r.groups.back(),
                                          " as one (a GEMM needs no K-split)"));
      }
      plan.runs.push_back(std::move(r));
    }
  }
  if (down < run.size() && layer <= 0) plan.notes.push_back(absl::StrCat(halves[1].first, ": ", down_note));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const registry::TargetConstraints*> ProgramTarget(const Program& program) {
  for (int i = program.lineage_size() - 1; i >= 0; --i) {
    if (!program.lineage(i).target().empty()) return registry::FindTarget(program.lineage(i).target());
  }
  return registry::FindTarget("cpu");
}

bool DecodeMerged(const Program& program) {
  for (const LineageEntry& e : program.lineage()) {
    if (e.pass() == "merge_multi_launch" && e.applied()) return true;
  }
  return false;
}

absl::StatusOr<PrefillPlan> PlanPrefill(const Program& program, const registry::TargetConstraints& target,
                                        int64_t rows, bool merged) {
  PrefillPlan plan;
  plan.target = target.name();
  plan.rows = rows;
  DK_ASSIGN_OR_RETURN(plan.herd, registry::CheckPrefillRows(target, rows));
  plan.row_tile = target.prefill().row_tile();
  int s = 0;
  while (s < program.steps_size()) {
    if (!program.steps(s).has_group()) {
      ++s;
      continue;
    }
    // The consecutive groups of one layer that the decode merge formed from one run of
    // launches (split where the target's GEMV limits demanded); the LM head's groups
    // run for a chunk's last row as in decode.
    const LaunchGroup& first = program.steps(s).group();
    Groups run = {&program.steps(s++).group()};
    while (merged && first.layer() >= 0 && s < program.steps_size() && program.steps(s).has_group() &&
           program.steps(s).group().layer() == first.layer()) {
      run.push_back(&program.steps(s++).group());
    }
    DK_RETURN_IF_ERROR(AddRuns(run, target, plan));
  }
  return plan;
}

std::map<int, int> PrefillRunsPerLayer(const PrefillPlan& plan, int n_layers) {
  std::map<int, int> runs;
  for (int i = 0; i < n_layers; ++i) runs[i] = 0;
  runs[-1] = 0;
  for (const PrefillRun& r : plan.runs) ++runs[r.layer < 0 ? -1 : r.layer];
  return runs;
}

std::string DescribePrefill(const PrefillPlan& plan, int n_layers) {
  const std::string how =
      plan.herd > 0 ? absl::StrCat(" as GEMMs in herds of ", plan.herd, " x ", plan.row_tile, " rows")
                    : std::string(" through the decode groups");
  return absl::StrCat(plan.target, ", chunks of ", plan.rows, " rows", how, ": ",
                      DescribeRuns(PrefillRunsPerLayer(plan, n_layers), "chunk"));
}

absl::StatusOr<int64_t> PrefillRowsFor(const Program& program, int64_t requested, int64_t fallback) {
  DK_ASSIGN_OR_RETURN(const registry::TargetConstraints* target, ProgramTarget(program));
  if (!target->has_prefill()) return requested > 0 ? requested : fallback;
  if (requested == 1) return 1;  // token by token: the decode runs themselves
  if (requested > 0) {
    DK_RETURN_IF_ERROR(registry::CheckPrefillRows(*target, requested).status());
    return requested;
  }
  // Whole row tiles; a context shorter than one tile is one chunk, padded to the tile
  // on the device like a prompt's last chunk.
  const int64_t tile = target->prefill().row_tile();
  return tile > 0 && fallback >= tile ? fallback - fallback % tile : fallback;
}

}  // namespace dk::elf
