#include "optimizations/merge_multi_launch/merge_multi_launch.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "elf/prefill_plan.h"
#include "registry/registry.h"
#include "optimizations/common/program_util.h"
#include "util/status.h"

namespace dk::opt::merge_multi_launch {
namespace {

// The merge a run of groups forms, from its first group's name.
std::string KindOf(const std::vector<const elf::LaunchGroup*>& run) {
  if (run.front()->layer() < 0) return "lm_head";
  // A group an earlier run split at a target limit ("L0.o_gemv_ffn.part0") keeps
  // its kind, so that running the pass again changes nothing.
  const std::string first = MergeName(run.front()->name());
  if (absl::EndsWith(first, "attn_norm") || absl::EndsWith(first, "rms_gemv_rope")) return "rms_gemv_rope";
  if (absl::EndsWith(first, "o_proj") || absl::EndsWith(first, "o_gemv_ffn")) return "o_gemv_ffn";
  return "merged";
}

std::string GroupName(int layer, const std::string& kind) {
  return layer < 0 ? kind : absl::StrCat("L", layer, ".", kind);
}

bool IsGemv(const elf::Launch& l) {
  auto kernel = KernelOf(l);
  return kernel.ok() && ((*kernel)->id() == "gemv" || (*kernel)->id() == "gemv_ksplit");
}

// `l`, a bf16 GEMV, switched to the target's K-split GEMV (a K-split one stays as it
// is); FailedPrecondition with the reason if the target cannot run it so.
absl::Status ToKSplit(elf::Launch& l, const registry::TargetConstraints& target) {
  const registry::Kernel* kernel = nullptr;
  DK_ASSIGN_OR_RETURN(const registry::KernelVariant* variant, registry::FindSymbol(l.kernel_symbol(), &kernel));
  if (kernel->id() == "gemv_ksplit") return absl::OkStatus();
  if (!variant->block_format().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("a GEMV in ", variant->block_format(),
                                                      " blocks has no K-split variant"));
  }
  DK_ASSIGN_OR_RETURN(const registry::GemvPlan plan,
                      registry::CheckKSplitGemv(target, LaunchParam(l, "rows"), LaunchParam(l, "cols")));
  DK_ASSIGN_OR_RETURN(const registry::KernelVariant* ksplit,
                      registry::SelectVariant("gemv_ksplit", variant->layout(), 0));
  l.set_kernel_symbol(ksplit->symbol());
  (*l.mutable_params())["k_chunk"] = plan.k_chunk;
  return absl::OkStatus();
}

// What the merge did, for the lineage record.
struct Report {
  std::vector<std::string> notes;      // merges not made or split, with the reason
  std::set<std::string> skipped;       // kinds not selected by Options::groups
  std::map<std::string, int> merged;   // kind -> launches in its first merged group
  std::string two_k;                   // the first group linking two GEMV symbols
  std::string k_split;     // the GEMV switched to the K-split GEMV with the largest K
  int64_t k_split_cols = 0;  // its K
  int k_split_count = 0;     // how many GEMVs were switched
};

// Counts a GEMV switched to the K-split GEMV; the one with the largest K is the
// lineage's example.
void NoteKSplit(Report& report, const std::string& group, const std::string& why, const elf::Launch& l) {
  ++report.k_split_count;
  if (LaunchParam(l, "cols") <= report.k_split_cols) return;
  report.k_split_cols = LaunchParam(l, "cols");
  const int64_t k_chunk = LaunchParam(l, "k_chunk");
  report.k_split = absl::StrCat(group, " (", why, ") ", LaunchParam(l, "rows"), "x", LaunchParam(l, "cols"), " as ",
                                LaunchParam(l, "cols") / k_chunk, " chunks of K=", k_chunk);
}

// Why a GEMV launch must run alone on `target` ("" if it may be merged). A plain
// GEMV beyond the target's K_max that its K-split GEMV can take is switched to it.
std::string MustRunAlone(elf::Launch& l, const std::string& group,
                         const registry::TargetConstraints& target, Report& report) {
  auto kernel = KernelOf(l);
  if (!kernel.ok()) return "";
  const std::string& id = (*kernel)->id();
  if ((id != "gemv" && id != "gemv_ksplit") || !l.params().count("rows") || !l.params().count("cols")) return "";
  const int64_t rows = LaunchParam(l, "rows"), cols = LaunchParam(l, "cols");
  if (id == "gemv_ksplit") {
    auto plan = registry::CheckKSplitGemv(target, rows, cols);
    return plan.ok() ? "" : absl::StrCat(group, " K-split GEMV: ", plan.status().message(),
                                         "; kept as a separate group");
  }
  auto plan = registry::CheckGemv(target, rows, cols);
  if (plan.ok()) return "";
  const int64_t k_max = target.gemv().k_max();
  if (k_max > 0 && cols > k_max && ToKSplit(l, target).ok()) {
    NoteKSplit(report, group, absl::StrCat("K=", cols, " > K_max ", k_max), l);
    return "";
  }
  return absl::StrCat(group, " GEMV: ", plan.status().message(), "; kept as a separate group");
}

// Consecutive groups of one layer from step `s` on (advanced past them).
std::vector<const elf::LaunchGroup*> NextRun(const elf::Program& p, int& s) {
  std::vector<const elf::LaunchGroup*> run;
  const int layer = p.steps(s).group().layer();
  while (s < p.steps_size() && p.steps(s).has_group() && p.steps(s).group().layer() == layer) {
    run.push_back(&p.steps(s++).group());
  }
  return run;
}

// The launches of one merged group; `name` is set for a launch kept alone, which
// keeps its group's name.
struct Chunk {
  std::vector<elf::Launch> launches;
  std::string name;
};

// A launch of the run with the name of the group it came from.
struct Item {
  elf::Launch launch;
  std::string group;
};

// On a target whose O + FFN merge runs the O and down projections (the run's first
// and last GEMV) as K-split GEMVs: switches both, or neither and returns why not.
std::string KSplitOAndDown(std::vector<Item>& items, const registry::TargetConstraints& target,
                           Report& report) {
  std::vector<size_t> gemvs;
  for (size_t i = 0; i < items.size(); ++i) {
    if (IsGemv(items[i].launch)) gemvs.push_back(i);
  }
  if (gemvs.size() < 2) return "";
  std::vector<elf::Launch> switched;
  for (const size_t i : {gemvs.front(), gemvs.back()}) {
    elf::Launch l = items[i].launch;
    if (absl::Status st = ToKSplit(l, target); !st.ok()) {
      return absl::StrCat(i == gemvs.front() ? "O" : "down", " GEMV (", items[i].group, "): ", st.message());
    }
    switched.push_back(std::move(l));
  }
  for (const size_t i : {gemvs.front(), gemvs.back()}) {
    elf::Launch& l = switched[i == gemvs.front() ? 0 : 1];
    if (l.kernel_symbol() != items[i].launch.kernel_symbol()) NoteKSplit(report, items[i].group, "O + FFN merge", l);
    items[i].launch = std::move(l);
  }
  return "";
}

// A launch's body: its symbol and integer parameters (launches with the same body
// are one kernel stitched several times).
std::string Body(const elf::Launch& l) {
  const std::map<std::string, int64_t> params(l.params().begin(), l.params().end());
  std::string body = l.kernel_symbol();
  for (const auto& [k, v] : params) absl::StrAppend(&body, " ", k, "=", v);
  return body;
}

// The launches of `run` in chunks within the target's limits: a GEMV the target
// cannot merge alone, at most max_launches_per_group distinct launch bodies per
// chunk, and on a target whose O + FFN merge needs the K-split GEMV, its O and down
// GEMVs K-split, or else one chunk per GEMV (elementwise launches with the GEMV
// before them).
std::vector<Chunk> SplitAtTargetLimits(const std::vector<const elf::LaunchGroup*>& run, int layer,
                                       const std::string& kind, const registry::TargetConstraints& target,
                                       Report& report) {
  std::vector<Item> items;
  for (const auto* g : run) {
    for (const auto& l : g->launches()) items.push_back({l, g->name()});
  }
  bool per_gemv = false;
  if (kind == "o_gemv_ffn" && target.o_ffn_merge_needs_k_split()) {
    const std::string why = KSplitOAndDown(items, target, report);
    if (!why.empty()) {
      report.notes.push_back(absl::StrCat(GroupName(layer, kind), ": ", target.name(),
                                          " merges O + FFN through K-split GEMVs, but the ", why,
                                          "; one group per GEMV"));
      per_gemv = true;
    }
  }
  std::vector<Chunk> chunks(1);
  std::set<std::string> bodies;  // of chunks.back()
  bool chunk_has_gemv = false;
  auto next_chunk = [&] {
    if (!chunks.back().launches.empty()) chunks.emplace_back();
    bodies.clear();
    chunk_has_gemv = false;
  };
  for (Item& item : items) {
    elf::Launch& l = item.launch;
    const std::string alone = MustRunAlone(l, item.group, target, report);
    if (!alone.empty()) {
      report.notes.push_back(alone);
      next_chunk();
      chunks.back().launches.push_back(l);
      chunks.back().name = item.group;
      chunks.emplace_back();
      continue;
    }
    const bool gemv = IsGemv(l);
    if (per_gemv && gemv && chunk_has_gemv) next_chunk();
    const int limit = target.max_launches_per_group();
    const std::string body = Body(l);
    if (limit > 0 && !bodies.count(body) && static_cast<int>(bodies.size()) >= limit) {
      report.notes.push_back(absl::StrCat(GroupName(layer, kind), ": more than ", limit,
                                          " distinct launch bodies exceed ", target.name(),
                                          "'s limit per group; split"));
      next_chunk();
    }
    bodies.insert(body);
    chunk_has_gemv |= gemv;
    chunks.back().launches.push_back(std::move(l));
  }
  if (chunks.back().launches.empty()) chunks.pop_back();
  return chunks;
}

// Appends one group per chunk to `out`, named after the merge (numbered parts
// when there are several, or when a launch kept alone already has the merged
// name: the LM head GEMV of group "lm_head" on npu2).
void AddMergedGroups(std::vector<Chunk> chunks, int layer, const std::string& kind,
                     google::protobuf::RepeatedPtrField<elf::Step>& out, Report& report) {
  const int unnamed = static_cast<int>(std::count_if(
      chunks.begin(), chunks.end(), [](const Chunk& c) { return c.name.empty(); }));
  bool numbered = unnamed > 1;
  for (const Chunk& chunk : chunks) numbered |= chunk.name == GroupName(layer, kind);
  int part = 0;
  for (Chunk& chunk : chunks) {
    auto* g = out.Add()->mutable_group();
    g->set_layer(layer);
    if (!chunk.name.empty()) {
      g->set_name(chunk.name);
    } else {
      g->set_name(numbered ? absl::StrCat(GroupName(layer, kind), ".part", part++)
                           : GroupName(layer, kind));
    }
    g->set_entry_symbol(absl::StrReplaceAll(g->name(), {{".", "_"}}));
    std::set<std::string> gemv_symbols;
    for (auto& l : chunk.launches) {
      if (IsGemv(l)) gemv_symbols.insert(l.kernel_symbol());
      *g->add_launches() = std::move(l);
    }
    if (gemv_symbols.size() > 1 && report.two_k.empty()) {
      report.two_k = absl::StrCat(g->name(), " links ", absl::StrJoin(gemv_symbols, " and "));
    }
    if (report.merged.count(kind) == 0 && g->launches_size() > 1) report.merged[kind] = g->launches_size();
  }
}

// The program's steps with every run of groups of one layer merged (the kinds
// `options` selects), host steps where they were.
google::protobuf::RepeatedPtrField<elf::Step> MergeRuns(const elf::Program& p,
                                                        const registry::TargetConstraints& target,
                                                        const Options& options, Report& report) {
  google::protobuf::RepeatedPtrField<elf::Step> out;
  int s = 0;
  while (s < p.steps_size()) {
    if (!p.steps(s).has_group()) {
      *out.Add() = p.steps(s++);
      continue;
    }
    const int layer = p.steps(s).group().layer();
    const std::vector<const elf::LaunchGroup*> run = NextRun(p, s);
    const std::string kind = KindOf(run);
    if (run.size() == 1 || (!options.groups.empty() && !options.groups.count(kind))) {
      if (run.size() > 1 && report.skipped.insert(kind).second) {
        report.notes.push_back(absl::StrCat(kind, " not selected by `groups`"));
      }
      for (const auto* g : run) *out.Add()->mutable_group() = *g;
      continue;
    }
    AddMergedGroups(SplitAtTargetLimits(run, layer, kind, target, report), layer, kind, out, report);
  }
  return out;
}

// The groups' names and launch counts: a merge, a split or a rename changes them.
std::vector<std::pair<std::string, int>> GroupShapes(const google::protobuf::RepeatedPtrField<elf::Step>& steps) {
  std::vector<std::pair<std::string, int>> groups;
  for (const auto& step : steps) {
    if (step.has_group()) groups.emplace_back(step.group().name(), step.group().launches_size());
  }
  return groups;
}

// Inside a group, consumers read the producer's BO directly. Whether a binding
// changed.
absl::StatusOr<bool> BindToProducers(elf::Program& p) {
  bool rebound = false;
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p.bos()) bos[b.name()] = &b;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    std::map<std::tuple<std::string, int64_t, int64_t>, std::string> produced;  // mirror -> BO
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(l));
      const std::set<std::string> outs(kernel->outputs().begin(), kernel->outputs().end());
      for (auto& b : *l.mutable_bindings()) {
        const elf::BufferObject* bo = bos.at(b.bo());
        if (bo->host_value().empty()) continue;
        const auto key = std::make_tuple(bo->host_value(), bo->host_offset(), bo->size_bytes());
        if (outs.count(b.param())) {
          produced[key] = b.bo();
        } else if (auto it = produced.find(key); it != produced.end() && it->second != b.bo()) {
          b.set_bo(it->second);
          rebound = true;
        }
      }
    }
  }
  return rebound;
}

// Produced values nobody reads from the host any more (no host step, no other
// group through the host copy) stay on the device: INTERMEDIATE. Returns how many.
absl::StatusOr<int> KeepOnDevice(elf::Program& p) {
  DK_ASSIGN_OR_RETURN(const Dataflow flow, ComputeDataflow(p));
  int intermediates = 0;
  for (auto& b : *p.mutable_bos()) {
    if (b.category() != elf::OUTPUT || b.host_value().empty()) continue;
    bool host_copy_needed = HostReads(p, flow, b.host_value());
    for (const auto& other : p.bos()) {
      if (&other != &b && other.host_value() == b.host_value() && other.category() == elf::WRITE) {
        host_copy_needed = true;  // another group reads the host copy
      }
    }
    if (!host_copy_needed) {
      b.set_category(elf::INTERMEDIATE);
      b.clear_host_value();
      b.clear_host_offset();
      ++intermediates;
    }
  }
  return intermediates;
}

std::string AppliedReason(const Report& report, int runs_before, int runs_after, int intermediates) {
  std::vector<std::string> kinds;
  for (const auto& [kind, n] : report.merged) kinds.push_back(absl::StrCat(kind, " (", n, " launches)"));
  std::string reason = absl::StrCat(runs_before, " -> ", runs_after, " device runs per token; groups ",
                                    absl::StrJoin(kinds, ", "), "; ", intermediates,
                                    " values stay on the device");
  if (!report.two_k.empty()) absl::StrAppend(&reason, "; 2-K rename: ", report.two_k);
  if (report.k_split_count > 0) {
    absl::StrAppend(&reason, "; ", report.k_split_count, " GEMVs K-split, e.g. ", report.k_split);
  }
  if (!report.notes.empty()) {
    absl::StrAppend(&reason, "; skipped: ", report.notes[0],
                    report.notes.size() > 1 ? absl::StrCat(" (+", report.notes.size() - 1, " more)") : "");
  }
  return reason;
}

}  // namespace

absl::StatusOr<PassResult> Run(elf::Program& p, const registry::TargetConstraints& target,
                               const Options& options) {
  const int runs_before = RunsPerToken(p);
  Report report;
  google::protobuf::RepeatedPtrField<elf::Step> merged_steps = MergeRuns(p, target, options, report);
  const bool merged = GroupShapes(merged_steps) != GroupShapes(p.steps()) || report.k_split_count > 0;
  p.mutable_steps()->Swap(&merged_steps);
  DK_ASSIGN_OR_RETURN(const bool rebound, BindToProducers(p));
  RemoveUnusedBos(p);
  DK_ASSIGN_OR_RETURN(const int intermediates, KeepOnDevice(p));

  if (!merged && !rebound && intermediates == 0) {
    return Unchanged(report.notes.empty() ? "nothing to merge: no two consecutive groups of one layer"
                                          : absl::StrCat("nothing merged: ", absl::StrJoin(report.notes, "; ")));
  }
  std::string reason = AppliedReason(report, runs_before, RunsPerToken(p), intermediates);
  if (target.has_prefill()) {
    // The decode plan stands on its own; a prompt the target cannot run as planned
    // here is said in the lineage (the CPU device still runs it through the groups).
    auto prefill = elf::PlanPrefill(p, target, elf::kDefaultPrefillRows, /*merged=*/true);
    if (!prefill.ok()) {
      absl::StrAppend(&reason, "; prefill not planned: ", prefill.status().message());
    } else {
      absl::StrAppend(&reason, "; prefill ", elf::DescribePrefill(*prefill, p.model().n_layers()));
      if (!prefill->notes.empty()) {
        absl::StrAppend(&reason, " (", prefill->notes[0],
                        prefill->notes.size() > 1 ? absl::StrCat("; +", prefill->notes.size() - 1, " more") : "",
                        ")");
      }
    }
  }
  return Changed(reason);
}

}  // namespace dk::opt::merge_multi_launch
