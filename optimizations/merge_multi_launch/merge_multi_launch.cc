#include "optimizations/merge_multi_launch/merge_multi_launch.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "registry/registry.h"
#include "optimizations/common/program_util.h"

namespace dk::opt::merge_multi_launch {
namespace {

// The merge a run of groups forms, from its first group's name.
std::string KindOf(const std::vector<const elf::LaunchGroup*>& run) {
  if (run.front()->layer() < 0) return "lm_head";
  absl::string_view first = run.front()->name();
  // A group an earlier run split at a target limit ("L0.o_gemv_ffn.part0") keeps
  // its kind, so that running the pass again changes nothing.
  if (const size_t dot = first.rfind(".part"); dot != absl::string_view::npos &&
                                              dot + 5 < first.size() &&
                                              absl::c_all_of(first.substr(dot + 5), absl::ascii_isdigit)) {
    first = first.substr(0, dot);
  }
  if (absl::EndsWith(first, "attn_norm") || absl::EndsWith(first, "rms_gemv_rope")) return "rms_gemv_rope";
  if (absl::EndsWith(first, "o_proj") || absl::EndsWith(first, "o_gemv_ffn")) return "o_gemv_ffn";
  return "merged";
}

std::string GroupName(int layer, const std::string& kind) {
  return layer < 0 ? kind : absl::StrCat("L", layer, ".", kind);
}

// Why a GEMV launch must run alone on `target` ("" if it may be merged).
std::string MustRunAlone(const elf::Launch& l, const std::string& group,
                         const registry::TargetConstraints& target) {
  auto kernel = KernelOf(l);
  if (!kernel.ok() || (*kernel)->id() != "gemv") return "";
  const auto rows = l.params().find("rows"), cols = l.params().find("cols");
  if (rows == l.params().end() || cols == l.params().end()) return "";
  auto plan = registry::CheckGemv(target, rows->second, cols->second);
  if (plan.ok()) return "";
  return absl::StrCat(group, " GEMV: ", plan.status().message(), "; kept as a separate group");
}

}  // namespace

absl::StatusOr<bool> Run(elf::Program& p, const registry::TargetConstraints& target,
                         const Options& options) {
  const int runs_before = RunsPerToken(p);
  std::vector<std::string> notes;
  std::map<std::string, int> merged_kinds;  // kind -> launches in the first such group
  std::vector<std::string> two_k;

  google::protobuf::RepeatedPtrField<elf::Step> out;
  int s = 0;
  while (s < p.steps_size()) {
    if (!p.steps(s).has_group()) {
      *out.Add() = p.steps(s++);
      continue;
    }
    // A run: consecutive groups of one layer.
    std::vector<const elf::LaunchGroup*> run;
    const int layer = p.steps(s).group().layer();
    while (s < p.steps_size() && p.steps(s).has_group() && p.steps(s).group().layer() == layer) {
      run.push_back(&p.steps(s++).group());
    }
    const std::string kind = KindOf(run);
    if (run.size() == 1 || (!options.groups.empty() && !options.groups.count(kind))) {
      if (run.size() > 1 && merged_kinds.count("skip:" + kind) == 0) {
        merged_kinds["skip:" + kind] = 1;
        notes.push_back(absl::StrCat(kind, " not selected by `groups`"));
      }
      for (const auto* g : run) *out.Add()->mutable_group() = *g;
      continue;
    }
    // Chunks within the target's limits. A launch that must run alone keeps its
    // group's name.
    struct Chunk {
      std::vector<elf::Launch> launches;
      std::string name;  // set for a launch kept alone
    };
    std::vector<Chunk> chunks(1);
    for (const auto* g : run) {
      for (const auto& l : g->launches()) {
        const std::string alone = MustRunAlone(l, g->name(), target);
        if (!alone.empty()) {
          notes.push_back(alone);
          if (!chunks.back().launches.empty()) chunks.emplace_back();
          chunks.back().launches.push_back(l);
          chunks.back().name = g->name();
          chunks.emplace_back();
          continue;
        }
        const int limit = target.max_launches_per_group();
        if (limit > 0 && static_cast<int>(chunks.back().launches.size()) >= limit) {
          notes.push_back(absl::StrCat(GroupName(layer, kind), ": more than ", limit,
                                       " launches exceed ", target.name(), "'s limit per group; split"));
          chunks.emplace_back();
        }
        chunks.back().launches.push_back(l);
      }
    }
    if (chunks.back().launches.empty()) chunks.pop_back();
    const int unnamed = static_cast<int>(std::count_if(
        chunks.begin(), chunks.end(), [](const Chunk& c) { return c.name.empty(); }));
    // Numbered parts when there are several, or when a launch kept alone already
    // has the merged name (the LM head GEMV of group "lm_head" on npu2).
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
        auto kernel = KernelOf(l);
        if (kernel.ok() && (*kernel)->id() == "gemv") gemv_symbols.insert(l.kernel_symbol());
        *g->add_launches() = std::move(l);
      }
      if (gemv_symbols.size() > 1 && two_k.empty()) {
        two_k.push_back(absl::StrCat(g->name(), " links ", absl::StrJoin(gemv_symbols, " and ")));
      }
      if (merged_kinds.count(kind) == 0 && g->launches_size() > 1) merged_kinds[kind] = g->launches_size();
    }
  }
  // Changed if the groups (names, launches) differ: a rename alone is a change too.
  auto shape_of = [](const google::protobuf::RepeatedPtrField<elf::Step>& steps) {
    std::vector<std::pair<std::string, int>> groups;
    for (const auto& step : steps) {
      if (step.has_group()) groups.emplace_back(step.group().name(), step.group().launches_size());
    }
    return groups;
  };
  const bool merged = shape_of(out) != shape_of(p.steps());
  p.mutable_steps()->Swap(&out);

  // Inside a group, consumers read the producer's BO directly.
  bool rebound = false;
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p.bos()) bos[b.name()] = &b;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    std::map<std::tuple<std::string, int64_t, int64_t>, std::string> produced;  // mirror -> BO
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      auto kernel = KernelOf(l);
      if (!kernel.ok()) return kernel.status();
      std::set<std::string> outs((*kernel)->outputs().begin(), (*kernel)->outputs().end());
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
  RemoveUnusedBos(p);
  // Produced values nobody reads from the host any more stay on the device.
  auto flow = ComputeDataflow(p);
  if (!flow.ok()) return flow.status();
  int intermediates = 0;
  for (auto& b : *p.mutable_bos()) {
    if (b.category() != elf::OUTPUT || b.host_value().empty()) continue;
    bool host_copy_needed = HostReads(p, *flow, b.host_value());
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

  if (!merged && !rebound && intermediates == 0) {
    Record(p, kName, target.name(), false,
           notes.empty() ? "nothing to merge: no two consecutive groups of one layer"
                         : absl::StrCat("nothing merged: ", absl::StrJoin(notes, "; ")));
    return false;
  }
  std::vector<std::string> kinds;
  for (const auto& [kind, n] : merged_kinds) {
    if (!absl::StartsWith(kind, "skip:")) kinds.push_back(absl::StrCat(kind, " (", n, " launches)"));
  }
  std::string reason = absl::StrCat(runs_before, " -> ", RunsPerToken(p), " device runs per token; groups ",
                                    absl::StrJoin(kinds, ", "), "; ", intermediates,
                                    " values stay on the device");
  if (!two_k.empty()) absl::StrAppend(&reason, "; 2-K rename: ", two_k[0]);
  if (!notes.empty()) absl::StrAppend(&reason, "; skipped: ", notes[0], notes.size() > 1 ? absl::StrCat(" (+", notes.size() - 1, " more)") : "");
  Record(p, kName, target.name(), true, reason);
  return true;
}

}  // namespace dk::opt::merge_multi_launch
