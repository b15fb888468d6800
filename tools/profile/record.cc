#include "elf/elf.h"
#include "tools/profile/record.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "elf/stats.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace dk::profile {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double DriftPercent(const std::vector<double>& ms) {
  if (ms.size() < 2) return 0;
  const size_t q = std::max<size_t>(1, ms.size() / 4);
  const double first = Median(std::vector<double>(ms.begin(), ms.begin() + q));
  const double last = Median(std::vector<double>(ms.end() - q, ms.end()));
  const double all = Median(ms);
  return all > 0 ? (last - first) / all * 100 : 0;
}

namespace {

// Interquartile range / median: the spread of one stage's tokens, relative.
double RelativeIqr(std::vector<double> v) {
  if (v.size() < 2) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double iqr = Median(std::vector<double>(v.begin() + n / 2 + n % 2, v.end())) -
                     Median(std::vector<double>(v.begin(), v.begin() + n / 2));
  const double m = Median(v);
  return m > 0 ? iqr / m : 0;
}

}  // namespace

double ModeSplit(std::vector<double> gbps) {
  if (gbps.size() < 2) return 0;
  std::sort(gbps.begin(), gbps.end());
  const double lo = gbps[gbps.size() / 10], hi = gbps[gbps.size() - 1 - gbps.size() / 10];
  return lo > 0 && hi / lo >= kTwoModesRatio ? std::sqrt(lo * hi) : 0;
}

ParentComparison CompareWithParent(const std::vector<RoundStat>& stage, const std::vector<RoundStat>& parent,
                                   const std::vector<double>& stage_norm, const std::vector<double>& parent_norm) {
  ParentComparison c;
  for (const RoundStat& s : stage) {
    for (const RoundStat& p : parent) {
      if (p.round == s.round && p.norm_median_ms > 0 && s.norm_median_ms > 0) {
        c.round_ratios.push_back(s.norm_median_ms / p.norm_median_ms);
      }
    }
  }
  if (c.round_ratios.size() >= 2) {
    const auto [lo, hi] = std::minmax_element(c.round_ratios.begin(), c.round_ratios.end());
    c.ratio = Median(c.round_ratios);
    c.noise = std::max(kMinNoise, (*hi - *lo) / 2);
  } else {
    const double parent_median = Median(parent_norm);
    c.ratio = parent_median > 0 ? Median(stage_norm) / parent_median : 1;
    c.noise = std::max({kMinNoise, RelativeIqr(stage_norm), RelativeIqr(parent_norm)});
  }
  c.slower = c.ratio - 1 > c.noise;
  c.faster = 1 - c.ratio > c.noise;
  return c;
}

namespace {

// "L12.rms_gemv_rope" -> "rms_gemv_rope"; other names unchanged.
std::string StripLayer(const std::string& name) {
  if (name.size() > 2 && name[0] == 'L' && std::isdigit(static_cast<unsigned char>(name[1]))) {
    const size_t dot = name.find('.');
    if (dot != std::string::npos) return name.substr(dot + 1);
  }
  return name;
}

// LM-head partitions ("lm_head.part3") count as one component, "lm_head".
std::string ModelWideKey(const std::string& name) {
  const size_t part = name.find(".part");
  return part == std::string::npos ? name : name.substr(0, part);
}

}  // namespace

StepMap MapSteps(const elf::Program& program) {
  StepMap map;
  std::map<std::string, int> index;
  for (const elf::Step& step : program.steps()) {
    Component c;
    if (step.has_host()) {
      c.host = true;
      c.per_layer = step.host().layer() >= 0;
      c.key = elf::HostStepName(step.host().kind());
    } else {
      const elf::LaunchGroup& g = step.group();
      c.per_layer = g.layer() >= 0;
      c.key = c.per_layer ? StripLayer(g.name()) : ModelWideKey(g.name());
      ++map.device_runs;
    }
    const std::string id = absl::StrCat(c.host ? "h:" : "g:", c.per_layer ? "L:" : "M:", c.key);
    auto [it, inserted] = index.emplace(id, static_cast<int>(map.components.size()));
    if (inserted) map.components.push_back(c);
    ++map.components[it->second].count;
    map.component_of_step.push_back(it->second);
  }
  map.weight_bytes = elf::WeightBytesPerToken(program);
  return map;
}

void BreakdownAccumulator::Add(const std::vector<runtime::StepTiming>& timings) {
  for (size_t s = 0; s < timings.size() && s < map_.component_of_step.size(); ++s) {
    Component& c = sum_[map_.component_of_step[s]];
    c.write_ms += timings[s].write_ns * 1e-6;
    c.run_ms += timings[s].run_ns * 1e-6;
    c.read_ms += timings[s].read_ns * 1e-6;
    bytes_written_ += timings[s].bytes_written;
    bytes_read_ += timings[s].bytes_read;
  }
  ++tokens_;
}

std::vector<Component> BreakdownAccumulator::Components() const {
  std::vector<Component> out = sum_;
  if (tokens_ == 0) return out;
  for (Component& c : out) {
    c.write_ms /= tokens_;
    c.run_ms /= tokens_;
    c.read_ms /= tokens_;
  }
  return out;
}

size_t StageRecord::first_steady() const { return std::min<size_t>(std::max(warmup, 0), token_ms.size()); }

std::vector<double> StageRecord::steady_ms() const {
  return std::vector<double>(token_ms.begin() + first_steady(), token_ms.end());
}

std::string SignedDelta(double ms, double pct) {
  return absl::StrFormat("%+.2f ms (%+.1f%%)", ms, pct);
}

namespace {

// A steady token's time at the reference bandwidth: its floor (the stage's weight
// bytes read at the bandwidth paired with the token) swapped for the floor at the
// reference bandwidth, the rest of its time kept. A bandwidth-bound token moves with
// the bandwidth in full, a token far above its floor (the unoptimized baseline) barely:
// scaling all of a 5x-floor token by the bandwidth would invent swings it does not
// have. Unchanged when either bandwidth or the byte count is unknown.
double NormalizedMs(const StageRecord& s, size_t k, double ref_gbps) {
  const double gbps = k < s.token_gbps.size() ? s.token_gbps[k] : 0;
  if (ref_gbps <= 0 || gbps <= 0 || s.weight_bytes_per_token <= 0) return s.token_ms[k];
  const double bytes = static_cast<double>(s.weight_bytes_per_token);
  return s.token_ms[k] + bytes / (ref_gbps * 1e6) - bytes / (gbps * 1e6);
}

std::vector<double> NormalizedSteady(const StageRecord& s, double ref_gbps) {
  std::vector<double> out;
  for (size_t k = s.first_steady(); k < s.token_ms.size(); ++k) {
    out.push_back(NormalizedMs(s, k, ref_gbps));
  }
  return out;
}

// Per steady token: its time over the read time of the stage's weight bytes at the
// bandwidth paired with it; empty when none was paired.
std::vector<double> PairedXFloor(const StageRecord& s) {
  std::vector<double> out;
  if (s.weight_bytes_per_token <= 0) return out;
  for (size_t k = s.first_steady();
       k < s.token_ms.size() && k < s.token_gbps.size(); ++k) {
    if (s.token_gbps[k] > 0) out.push_back(s.token_ms[k] / (s.weight_bytes_per_token / (s.token_gbps[k] * 1e9) * 1e3));
  }
  return out;
}

// The steady tokens grouped by round (all in round 0 when rounds were not recorded);
// a round is "fast" or "slow" against `mode_split_gbps` (0: one mode, "-").
std::vector<RoundStat> RoundStats(const StageRecord& s, double ref_gbps, double mode_split_gbps) {
  std::map<int, std::vector<size_t>> by_round;
  for (size_t k = s.first_steady(); k < s.token_ms.size(); ++k) {
    by_round[k < s.token_round.size() ? s.token_round[k] : 0].push_back(k);
  }
  std::vector<RoundStat> out;
  for (const auto& [round, ks] : by_round) {
    RoundStat st;
    st.round = round;
    st.tokens = static_cast<int>(ks.size());
    std::vector<double> ms, norm, gbps;
    for (size_t k : ks) {
      ms.push_back(s.token_ms[k]);
      norm.push_back(NormalizedMs(s, k, ref_gbps));
      if (k < s.token_gbps.size() && s.token_gbps[k] > 0) gbps.push_back(s.token_gbps[k]);
    }
    st.median_ms = Median(ms);
    st.norm_median_ms = Median(norm);
    st.gbps = Median(gbps);
    st.mode = st.gbps <= 0 || mode_split_gbps <= 0 ? "-" : (st.gbps >= mode_split_gbps ? "fast" : "slow");
    out.push_back(st);
  }
  return out;
}

// "x1.239 of its parent (4 rounds: 1.220-1.260; noise +-5.0%)".
std::string RatioWords(const ParentComparison& c) {
  std::string out = absl::StrFormat("x%.3f of its parent", c.ratio);
  if (c.round_ratios.size() >= 2) {
    const auto [lo, hi] = std::minmax_element(c.round_ratios.begin(), c.round_ratios.end());
    absl::StrAppend(&out, absl::StrFormat(" (%zu rounds: %.3f-%.3f", c.round_ratios.size(), *lo, *hi));
  } else {
    absl::StrAppend(&out, " (");
  }
  absl::StrAppend(&out, absl::StrFormat("%snoise +-%.1f%%)", c.round_ratios.size() >= 2 ? "; " : "", 100 * c.noise));
  return out;
}

std::string FirstFailure(const StageRecord& s) {
  if (!s.error.empty()) return s.error;
  for (absl::string_view line : absl::StrSplit(s.gate_report, '\n')) {
    if (absl::StrContains(line, "FAIL") || absl::StrContains(line, "DIFFERENT") ||
        absl::StrContains(line, "differ")) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return s.same_as_parent ? "verify gate FAIL" : "tokens differ from the parent stage";
}

}  // namespace

std::string BuildEdit(const ProfileRecord& record, int stage, const std::string& build_text) {
  const StageRecord& s = record.stages[stage];
  const std::string build = absl::StrCat(record.package, "/BUILD");
  const std::string self = absl::StrCat(":", s.name);
  const std::string full = absl::StrCat("//", record.package, ":", s.name);
  if (s.src.empty()) {
    return absl::StrCat("in ", build, ": ", self,
                        " is the baseline; it cannot be removed from the chain (fix ", s.kind,
                        " or the runtime instead)");
  }
  const std::string parent = s.src;
  std::string child;
  for (const StageRecord& t : record.stages) {
    if (t.src == self || t.src == full) child = t.name;
  }
  std::string words = absl::StrCat("in ", build, ": delete ", s.kind, "(name = \"", s.name,
                                    "\", src = \"", parent, "\", ...) and ");
  if (!child.empty()) {
    absl::StrAppend(&words, "point the next stage's src (:", child, ") at \"", parent, "\"");
  } else {
    absl::StrAppend(&words, "point what named \"", self,
                    "\" (the `final` of verify_chain and decode_profile, decode_generate's elf) at \"",
                    parent, "\"");
  }
  if (build_text.empty()) return words;

  std::vector<std::string> lines = absl::StrSplit(build_text, '\n');
  // The rule's block: from a line starting "kind(" to the line that closes its
  // parenthesis (one line for `kind(name = "N", ...)  # comment`), holding
  // 'name = "N"'. Parentheses in strings and comments do not count.
  int begin = -1, end = -1;
  for (int i = 0; i < static_cast<int>(lines.size()) && begin < 0; ++i) {
    if (!absl::StartsWith(lines[i], absl::StrCat(s.kind, "("))) continue;
    int depth = 0, close = -1;
    bool named = false;
    for (int j = i; j < static_cast<int>(lines.size()) && close < 0; ++j) {
      named = named || absl::StrContains(lines[j], absl::StrCat("name = \"", s.name, "\""));
      bool in_string = false;
      for (char c : lines[j]) {
        if (c == '"') in_string = !in_string;
        if (in_string) continue;
        if (c == '#') break;
        if (c == '(') ++depth;
        if (c == ')' && --depth == 0) {
          close = j;
          break;
        }
      }
    }
    if (named && close >= 0) {
      begin = i;
      end = close;
    }
  }
  if (begin < 0 || end < 0) return words;
  std::string diff = absl::StrCat(words, "\n--- a/", build, "\n+++ b/", build, "\n");
  const int removed_end = end + 1 < static_cast<int>(lines.size()) && lines[end + 1].empty() ? end + 1 : end;
  absl::StrAppend(&diff, absl::StrFormat("@@ -%d,%d +%d,0 @@\n", begin + 1, removed_end - begin + 1, begin));
  for (int i = begin; i <= removed_end; ++i) absl::StrAppend(&diff, "-", lines[i], "\n");
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    if (i >= begin && i <= removed_end) continue;
    const std::string& line = lines[i];
    const std::string q_self = absl::StrCat("\"", self, "\""), q_full = absl::StrCat("\"", full, "\"");
    if (!absl::StrContains(line, q_self) && !absl::StrContains(line, q_full)) continue;
    const std::string trimmed(absl::StripAsciiWhitespace(line));
    if (trimmed == absl::StrCat(q_self, ",") || trimmed == absl::StrCat(q_full, ",")) {
      absl::StrAppend(&diff, absl::StrFormat("@@ -%d,1 +%d,0 @@\n-%s\n", i + 1, i, line));
    } else {
      std::string replaced = line;
      absl::StrReplaceAll({{q_self, absl::StrCat("\"", parent, "\"")},
                           {q_full, absl::StrCat("\"", parent, "\"")}},
                          &replaced);
      absl::StrAppend(&diff, absl::StrFormat("@@ -%d,1 +%d,1 @@\n-%s\n+%s\n", i + 1, i + 1, line, replaced));
    }
  }
  return diff;
}

void Finalize(ProfileRecord& r, const std::string& build_text) {
  std::map<std::string, int> by_ref;
  for (int i = 0; i < static_cast<int>(r.stages.size()); ++i) {
    by_ref[absl::StrCat(":", r.stages[i].name)] = i;
    by_ref[r.stages[i].label] = i;
  }
  r.reverted.clear();
  std::vector<double> all_gbps;
  for (const StageRecord& s : r.stages) {
    for (size_t k = std::min(s.first_steady(), s.token_gbps.size()); k < s.token_gbps.size(); ++k) {
      if (s.token_gbps[k] > 0) all_gbps.push_back(s.token_gbps[k]);
    }
  }
  r.ref_gbps = Median(all_gbps);
  r.mode_split_gbps = ModeSplit(all_gbps);
  for (int i = 0; i < static_cast<int>(r.stages.size()); ++i) {
    StageRecord& s = r.stages[i];
    auto it = by_ref.find(s.src);
    s.parent = s.src.empty() ? -1 : (it != by_ref.end() ? it->second : i - 1);
    const std::vector<double> steady = s.steady_ms();
    s.median_ms = Median(steady);
    s.rounds = RoundStats(s, r.ref_gbps, r.mode_split_gbps);
    s.norm_median_ms = Median(NormalizedSteady(s, r.ref_gbps));
    s.min_ms = steady.empty() ? 0 : *std::min_element(steady.begin(), steady.end());
    s.max_ms = steady.empty() ? 0 : *std::max_element(steady.begin(), steady.end());
    s.drift_pct = DriftPercent(steady);
    const double gbps = s.bandwidth_gbps > 0 ? s.bandwidth_gbps : r.bandwidth_gbps;
    s.floor_ms = gbps > 0 ? s.weight_bytes_per_token / (gbps * 1e9) * 1e3 : 0;
    s.x_floor = s.floor_ms > 0 ? s.median_ms / s.floor_ms : 0;
    if (const std::vector<double> paired = PairedXFloor(s); !paired.empty()) s.x_floor = Median(paired);
    s.write_ms = s.run_ms = s.read_ms = s.host_ms = s.lm_head_ms = 0;
    for (const Component& c : s.components) {
      if (c.host) {
        s.host_ms += c.total_ms();
        continue;
      }
      s.write_ms += c.write_ms;
      s.run_ms += c.run_ms;
      s.read_ms += c.read_ms;
      if (!c.per_layer) s.lm_head_ms += c.total_ms();
    }
    if (i == 0) {
      s.status = "baseline";
    } else if (!s.passed()) {
      s.status = "reverted";
      r.reverted.push_back(i);
    } else {
      s.status = s.pass_applied ? "applied" : "skipped";
    }
  }
  r.final_stage = -1;
  for (int i = 0; i < static_cast<int>(r.stages.size()); ++i) {
    if (r.stages[i].passed()) r.final_stage = i;
  }
  const double base = r.stages.empty() ? 0 : r.stages[0].median_ms;
  for (int i = 0; i < static_cast<int>(r.stages.size()); ++i) {
    StageRecord& s = r.stages[i];
    const double parent = s.parent >= 0 ? r.stages[s.parent].median_ms : s.median_ms;
    s.delta_parent_ms = s.median_ms - parent;
    s.delta_parent_pct = parent > 0 ? s.delta_parent_ms / parent * 100 : 0;
    s.delta_baseline_ms = s.median_ms - base;
    s.delta_baseline_pct = base > 0 ? s.delta_baseline_ms / base * 100 : 0;
    std::string measured = absl::StrFormat("measured %.2f ms/token", s.median_ms);
    if (s.parent >= 0) {
      const StageRecord& p = r.stages[s.parent];
      measured = absl::StrCat(
          "measured ", SignedDelta(s.delta_parent_ms, s.delta_parent_pct), " per token vs :", p.name,
          absl::StrFormat(", runs/token %d -> %d, BO writes/token %s -> %s", p.device_runs_per_token,
                          s.device_runs_per_token, HumanBytes(p.bytes_written_per_token),
                          HumanBytes(s.bytes_written_per_token)));
    } else {
      absl::StrAppend(&measured, absl::StrFormat(", %d runs/token, BO writes/token %s",
                                                 s.device_runs_per_token,
                                                 HumanBytes(s.bytes_written_per_token)));
    }
    s.slower_than_parent = false;
    s.vs_parent = ParentComparison{};
    if (s.parent >= 0) {
      const StageRecord& p = r.stages[s.parent];
      s.vs_parent = CompareWithParent(s.rounds, p.rounds, NormalizedSteady(s, r.ref_gbps),
                                      NormalizedSteady(p, r.ref_gbps));
      absl::StrAppend(&measured, "; at equal bandwidth ", RatioWords(s.vs_parent));
      if (s.status == "applied" && s.vs_parent.slower) {
        s.slower_than_parent = true;
        s.status = kSlowerThanParent;
        absl::StrAppend(&measured, ": slower than its parent beyond the noise");
      }
    }
    if (s.status == "reverted") {
      s.reason = absl::StrCat("verify gate failed (", FirstFailure(s), "); the pass said: ",
                              s.pass_reason, "; ", measured);
      s.build_edit = BuildEdit(r, i, build_text);
    } else {
      s.reason = absl::StrCat(s.pass_reason, "; ", measured);
      s.build_edit.clear();
    }
  }
  r.best_stage = -1;
  for (int i = 0; i < static_cast<int>(r.stages.size()); ++i) {
    const StageRecord& s = r.stages[i];
    if (s.passed() && (r.best_stage < 0 || s.norm_median_ms < r.stages[r.best_stage].norm_median_ms)) {
      r.best_stage = i;
    }
  }
  const double base_norm = r.stages.empty() ? 0 : r.stages[0].norm_median_ms;
  r.speedup = r.final_speedup = 0;
  r.final_faster = false;
  if (r.best_stage >= 0 && base_norm > 0 && r.stages[r.best_stage].norm_median_ms > 0) {
    r.speedup = base_norm / r.stages[r.best_stage].norm_median_ms;
  }
  if (r.final_stage >= 0 && base_norm > 0) {
    const double fin = r.stages[r.final_stage].norm_median_ms;
    r.final_speedup = fin > 0 ? base_norm / fin : 0;
    r.final_faster = r.final_stage > 0 && fin < base_norm;
  }
}

std::string ToJson(const ProfileRecord& r) {
  using nlohmann::json;
  json j;
  j["schema"] = "decodekit.profile.v1";
  j["model"] = r.model;
  j["package"] = r.package;
  j["profile_label"] = r.profile_label;
  j["date"] = r.date;
  j["prompt"] = r.prompt;
  j["prompt_tokens"] = r.prompt_tokens;
  j["warmup"] = r.warmup;
  j["new_tokens"] = r.new_tokens;
  j["rounds"] = r.rounds;
  j["gate"] = {{"prompts", r.gate_prompts}, {"tokens", r.gate_tokens}, {"goldens", r.goldens},
               {"reference", r.goldens_reference}};
  j["weights"] = {{"source", r.weights_source}, {"digest", r.weights_digest}};
  j["machine"] = {{"device", r.device}, {"threads", r.threads}, {"runtime_options", r.runtime_options},
                  {"read_bandwidth_gbps", r.bandwidth_gbps},
                  {"reference_gbps", r.ref_gbps}, {"mode_split_gbps", r.mode_split_gbps}};
  json stages = json::array();
  for (const StageRecord& s : r.stages) {
    json c = json::array();
    for (const Component& x : s.components) {
      c.push_back({{"key", x.key},
                   {"host", x.host},
                   {"per_layer", x.per_layer},
                   {"count", x.count},
                   {"write_ms", x.write_ms},
                   {"run_ms", x.run_ms},
                   {"read_ms", x.read_ms},
                   {"total_ms", x.total_ms()}});
    }
    json rounds = json::array();
    for (const RoundStat& x : s.rounds) {
      rounds.push_back({{"round", x.round}, {"tokens", x.tokens}, {"median_ms", x.median_ms},
                        {"normalized_median_ms", x.norm_median_ms}, {"gbps", x.gbps}, {"mode", x.mode}});
    }
    stages.push_back({
        {"name", s.name},
        {"label", s.label},
        {"rule", s.kind},
        {"src", s.src},
        {"parent", s.parent >= 0 ? json(r.stages[s.parent].name) : json(nullptr)},
        {"lineage", s.lineage},
        {"pass", {{"name", s.pass}, {"target", s.target}, {"applied", s.pass_applied}, {"reason", s.pass_reason}}},
        {"status", s.status},
        {"slower_than_parent", {{"slower", s.slower_than_parent},
                                {"ratio_at_equal_bandwidth", s.vs_parent.ratio},
                                {"round_ratios", s.vs_parent.round_ratios},
                                {"noise", s.vs_parent.noise}}},
        {"ms_per_token", {{"median", s.median_ms}, {"min", s.min_ms}, {"max", s.max_ms}, {"drift_pct", s.drift_pct},
                          {"normalized_median", s.norm_median_ms}}},
        {"rounds", rounds},
        {"token_ms", s.token_ms},
        {"token_gbps", s.token_gbps},
        {"token_round", s.token_round},
        {"warmup_tokens", s.warmup},
        {"delta_vs_parent", {{"ms", s.delta_parent_ms}, {"pct", s.delta_parent_pct}}},
        {"delta_vs_baseline", {{"ms", s.delta_baseline_ms}, {"pct", s.delta_baseline_pct}}},
        {"device_runs_per_token", s.device_runs_per_token},
        {"bo_bytes_written_per_token", s.bytes_written_per_token},
        {"bo_bytes_read_per_token", s.bytes_read_per_token},
        {"weight_bytes_read_per_token", s.weight_bytes_per_token},
        {"bandwidth_gbps", s.bandwidth_gbps},
        {"bandwidth_floor_ms", s.floor_ms},
        {"x_floor", s.x_floor},
        {"split_ms", {{"bo_write", s.write_ms}, {"device_run", s.run_ms}, {"bo_read", s.read_ms},
                      {"host", s.host_ms}, {"lm_head", s.lm_head_ms}}},
        {"components", c},
        {"changes_numerics", s.changes_numerics},
        {"gate", {{"ran", s.gate_ran}, {"passed", s.gate_passed}, {"same_as_parent", s.same_as_parent},
                  {"report", s.gate_report}, {"error", s.error}}},
        {"numeric", {{"ran", s.numeric_ran}, {"passed", s.numeric_passed},
                     {"max_abs_diff", s.numeric_max_abs_diff}, {"pct_of_tolerance", s.numeric_pct_of_tol}}},
        {"speculative", {{"checks", s.spec_checks}, {"drafted", s.spec_drafted}, {"accepted", s.spec_accepted}}},
        {"kld", {{"ran", s.kld_ran}, {"mean", s.kld_mean}, {"p99", s.kld_p99}, {"top1", s.kld_top1},
                 {"ppl", s.kld_ppl}, {"ppl_ratio", s.kld_ppl_ratio}, {"error", s.kld_error}}},
        {"reason", s.reason},
        {"build_edit", s.build_edit},
    });
  }
  j["stages"] = stages;
  j["kld"] = {{"text", r.kld_text},           {"reference", r.kld_reference},   {"text_tokens", r.kld_text_tokens},
              {"window", r.kld_window},       {"windows", r.kld_windows},       {"score_from", r.kld_score_from},
              {"positions", r.kld_positions}, {"reference_ppl", r.kld_reference_ppl}};
  json contexts = json::array();
  for (const ContextPoint& c : r.contexts) {
    contexts.push_back({{"context", c.context},
                        {"tokens", c.tokens},
                        {"ms_per_token", c.median_ms},
                        {"attention_ms", c.attention_ms},
                        {"attention_share", c.attention_share()},
                        {"bandwidth_gbps", c.bandwidth_gbps},
                        {"x_floor", c.x_floor}});
  }
  j["context_scaling"] = contexts;
  json plans = json::array();
  for (const PlanRecord& pl : r.plans) {
    json per_layer = json::object();
    for (const auto& [layer, n] : pl.runs) per_layer[layer < 0 ? "model_wide" : absl::StrCat("L", layer)] = n;
    plans.push_back({{"name", pl.name},
                     {"label", pl.label},
                     {"target", pl.target},
                     {"device_runs", elf::DescribeRuns(pl.runs)},
                     {"runs_by_layer", per_layer},
                     {"merge_reason", pl.merge_reason}});
  }
  j["plans"] = plans;
  json reverted = json::array();
  for (int i : r.reverted) reverted.push_back(r.stages[i].name);
  j["reverted"] = reverted;
  if (r.best_stage >= 0) {
    const StageRecord& b = r.stages[r.best_stage];
    j["best"] = {{"stage", b.name},
                 {"ms_per_token", b.median_ms},
                 {"normalized_ms_per_token", b.norm_median_ms},
                 {"baseline_normalized_ms_per_token", r.stages[0].norm_median_ms},
                 {"speedup", r.speedup}};
  } else {
    j["best"] = nullptr;
  }
  if (r.final_stage >= 0) {
    j["final"] = {{"stage", r.stages[r.final_stage].name},
                  {"ms_per_token", r.stages[r.final_stage].median_ms},
                  {"normalized_ms_per_token", r.stages[r.final_stage].norm_median_ms},
                  {"baseline_ms_per_token", r.stages[0].median_ms},
                  {"speedup", r.final_speedup},
                  {"faster_than_baseline", r.final_faster}};
  } else {
    j["final"] = nullptr;
  }
  return j.dump(1);
}

}  // namespace dk::profile
