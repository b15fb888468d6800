#include "tools/profile/render.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace dk::profile {
namespace {

using Rows = std::vector<std::vector<std::string>>;

// ", in 4 interleaved rounds" (nothing for a single round).
std::string RoundsNote(const ProfileRecord& r) {
  return r.rounds > 1 ? absl::StrCat(", in ", r.rounds, " interleaved rounds") : std::string();
}

std::string TextTable(const Rows& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r].size(); ++c) {
      absl::StrAppend(&out, c ? "  " : "", rows[r][c], std::string(width[c] - rows[r][c].size(), ' '));
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
    if (r == 0) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      out += std::string(total - 2, '-') + '\n';
    }
  }
  return out;
}

std::string MdTable(const Rows& rows) {
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    absl::StrAppend(&out, "| ", absl::StrJoin(rows[r], " | "), " |\n");
    if (r == 0) {
      std::vector<std::string> sep(rows[r].size(), "---");
      absl::StrAppend(&out, "| ", absl::StrJoin(sep, " | "), " |\n");
    }
  }
  return out;
}

std::string Esc(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string GateCell(const StageRecord& s) {
  if (!s.error.empty()) return "ERROR";
  if (!s.gate_ran) return "-";
  if (!s.gate_passed) return "FAIL";
  if (s.same_as_parent) return "PASS";
  return s.changes_numerics ? "PASS (changes numerics: tokens differ from parent, reported)"
                            : "FAIL (tokens differ from parent)";
}

// The numeric check beside the gate: "PASS (32% of tol)"; informational for the
// revert decision, which reads the gate.
std::string NumericCell(const StageRecord& s) {
  if (!s.error.empty() || !s.numeric_ran) return "-";
  return absl::StrFormat("%s (max |diff| %.3g, %.0f%% of tol)", s.numeric_passed ? "PASS" : "FAIL",
                         s.numeric_max_abs_diff, s.numeric_pct_of_tol);
}

// KL divergence against the bf16 baseline over real text: "0.00506 (p99 0.0348), top-1
// 95.9%, PPL x0.999"; "-" where none ran.
std::string KldCell(const StageRecord& s) {
  if (!s.kld_error.empty()) return "ERROR";
  if (!s.kld_ran) return "-";
  return absl::StrFormat("%.3g (p99 %.3g), top-1 %.1f%%, PPL x%.4f", s.kld_mean, s.kld_p99, 100 * s.kld_top1,
                         s.kld_ppl_ratio);
}

Rows StageRows(const ProfileRecord& r) {
  Rows rows = {{"stage", "status", "ms/token median (min-max)", "drift", "delta vs parent",
                "vs parent at equal bandwidth", "delta vs baseline", "runs/token", "BO bytes written/token",
                "x floor", "gate", "numeric"}};
  if (!r.kld_text.empty()) rows[0].push_back(absl::StrCat("KLD vs :", r.kld_reference));
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const StageRecord& s = r.stages[i];
    rows.push_back({
        absl::StrCat(":", s.name),
        s.status,
        absl::StrFormat("%.2f (%.2f-%.2f)", s.median_ms, s.min_ms, s.max_ms),
        absl::StrFormat("%+.1f%%", s.drift_pct),
        i == 0 ? "-" : SignedDelta(s.delta_parent_ms, s.delta_parent_pct),
        s.parent < 0 ? "-" : absl::StrFormat("x%.3f (noise +-%.1f%%)", s.vs_parent.ratio, 100 * s.vs_parent.noise),
        i == 0 ? "-" : SignedDelta(s.delta_baseline_ms, s.delta_baseline_pct),
        absl::StrCat(s.device_runs_per_token),
        HumanBytes(s.bytes_written_per_token),
        absl::StrFormat("%.2fx", s.x_floor),
        GateCell(s),
        NumericCell(s),
    });
    if (!r.kld_text.empty()) rows.back().push_back(KldCell(s));
  }
  return rows;
}

std::string FinalLine(const ProfileRecord& r) {
  if (r.best_stage < 0) return "final: no stage passed the verify gate";
  const StageRecord& b = r.stages[r.best_stage];
  std::string out = absl::StrFormat(
      "best: :%s %.2f ms/token (%.2f at equal bandwidth) vs baseline :%s %.2f (%.2f): %.2fx speedup at "
      "equal bandwidth",
      b.name, b.median_ms, b.norm_median_ms, r.stages[0].name, r.stages[0].median_ms, r.stages[0].norm_median_ms,
      r.speedup);
  if (r.final_stage >= 0 && r.final_stage != r.best_stage) {
    const StageRecord& f = r.stages[r.final_stage];
    absl::StrAppend(&out, absl::StrFormat("\nchain end: :%s %.2f ms/token (%.2f at equal bandwidth), %.2fx the "
                                          "baseline: slower than :%s",
                                          f.name, f.median_ms, f.norm_median_ms, r.final_speedup, b.name));
  }
  absl::StrAppend(&out, absl::StrFormat("\nchain end strictly faster than baseline: %s",
                                        r.final_faster ? "YES" : "NO"));
  return out;
}

// Per stage and round: the round's median, the bandwidth paired with its tokens and
// the mode it names.
Rows RoundRows(const ProfileRecord& r) {
  Rows rows = {{"stage"}};
  for (int k = 0; k < r.rounds; ++k) rows[0].push_back(absl::StrCat("round ", k + 1));
  for (const StageRecord& s : r.stages) {
    std::vector<std::string> row = {absl::StrCat(":", s.name)};
    for (int k = 0; k < r.rounds; ++k) {
      std::string cell = "-";
      for (const RoundStat& x : s.rounds) {
        if (x.round != k) continue;
        cell = x.gbps > 0 ? absl::StrFormat("%.2f ms, %.1f GB/s %s", x.median_ms, x.gbps, x.mode)
                          : absl::StrFormat("%.2f ms", x.median_ms);
      }
      row.push_back(cell);
    }
    rows.push_back(row);
  }
  return rows;
}

Rows SplitRows(const StageRecord& s, int n_layers) {
  Rows rows = {{"component", "where", "steps/token", "BO write ms", "run ms", "BO read ms",
                "ms/token", "ms per layer"}};
  for (const Component& c : s.components) {
    rows.push_back({
        absl::StrCat(c.host ? "host: " : "group: ", c.key),
        c.per_layer ? "layers" : (c.host ? "model" : "LM head"),
        absl::StrCat(c.count),
        absl::StrFormat("%.3f", c.write_ms),
        absl::StrFormat("%.3f", c.run_ms),
        absl::StrFormat("%.3f", c.read_ms),
        absl::StrFormat("%.3f", c.total_ms()),
        c.per_layer && n_layers > 0 ? absl::StrFormat("%.3f", c.total_ms() / n_layers) : "-",
    });
  }
  rows.push_back({"total of the steps", "", "", absl::StrFormat("%.3f", s.write_ms),
                  absl::StrFormat("%.3f", s.run_ms + s.host_ms), absl::StrFormat("%.3f", s.read_ms),
                  absl::StrFormat("%.3f", s.write_ms + s.run_ms + s.read_ms + s.host_ms), ""});
  return rows;
}

int Layers(const ProfileRecord& r) {
  // Per-layer components occur once per layer: the largest count of one is n_layers.
  int n = 0;
  for (const StageRecord& s : r.stages) {
    for (const Component& c : s.components) {
      if (c.per_layer) n = std::max(n, c.count);
    }
  }
  return n;
}

std::string SkillHeading(const StageRecord& s) {
  return s.pass.empty() ? s.kind : s.pass;
}

}  // namespace

Rows ContextRows(const ProfileRecord& r) {
  Rows rows = {{"context", "ms/token (median)", "attention ms/token", "attention share", "bandwidth GB/s",
                "x floor"}};
  for (const ContextPoint& c : r.contexts) {
    rows.push_back({absl::StrCat(c.context), absl::StrFormat("%.2f", c.median_ms),
                    absl::StrFormat("%.2f", c.attention_ms), absl::StrFormat("%.1f%%", 100 * c.attention_share()),
                    absl::StrFormat("%.1f", c.bandwidth_gbps), absl::StrFormat("%.2fx", c.x_floor)});
  }
  return rows;
}

std::string FormatTable(const ProfileRecord& r) {
  std::string out = absl::StrFormat(
      "profile %s: prompt \"%s\" (%d tokens), %d warm-up + %d measured tokens%s; read bandwidth "
      "%.2f GB/s (%d threads)\n",
      r.model, r.prompt, r.prompt_tokens, r.warmup, r.new_tokens, RoundsNote(r), r.bandwidth_gbps, r.threads);
  absl::StrAppend(&out, TextTable(StageRows(r)), FinalLine(r), "\n");
  if (r.ref_gbps > 0) {
    absl::StrAppend(&out, absl::StrFormat("\nrounds (median ms/token, read bandwidth paired with the tokens, "
                                          "mode; equal bandwidth = %.1f GB/s, %s):\n",
                                          r.ref_gbps,
                                          r.mode_split_gbps > 0 ? absl::StrFormat("fast >= %.1f GB/s", r.mode_split_gbps)
                                                                : std::string("one mode in this run")),
                    TextTable(RoundRows(r)));
  }
  if (!r.contexts.empty()) {
    absl::StrAppend(&out, "\ncontext scaling (final stage, ", r.contexts[0].tokens, " tokens per point):\n",
                    TextTable(ContextRows(r)));
  }
  for (int i : r.reverted) {
    absl::StrAppend(&out, "\nREVERTED :", r.stages[i].name, ": ", r.stages[i].reason, "\n",
                    r.stages[i].build_edit, "\n");
  }
  return out;
}

std::string Markdown(const ProfileRecord& r, const std::string& command) {
  std::string md = absl::StrCat("# Phase 5: decode optimization record, ", r.model, "\n\n");
  absl::StrAppend(&md, "Generated by `", command, "` on ", r.date,
                  ". Every figure below is measured by that run; re-running overwrites this "
                  "file (do not edit it by hand).\n\n");
  absl::StrAppend(
      &md, "- Prompt: \"", r.prompt, "\" (", r.prompt_tokens, " tokens, fed one at a time), then ",
      r.warmup, " warm-up and ", r.new_tokens, " measured greedy decode tokens per stage",
      r.rounds > 1 ? absl::StrCat(", measured in ", r.rounds,
                                  " rounds interleaved across the stages (stage after stage, then again; each "
                                  "round reopens the stage and feeds the prompt and the warm-up again, so a swing "
                                  "of the host's bandwidth reaches every stage alike)")
                   : std::string(),
      "; ms/token is the median over the measured tokens, drift = (median of the last quarter - median of "
      "the first quarter) / median.\n",
      "- Weights: ", r.weights_source, " (", r.weights_digest, "), loaded once and shared by every stage.\n",
      absl::StrFormat("- Machine: %s, %d threads (runtime options: %s); memory read bandwidth %.2f GB/s "
                      "measured at the start of this run. %s\n",
                      r.device, r.threads, r.runtime_options, r.bandwidth_gbps,
                      r.ref_gbps > 0 ? "Each measured token is bracketed by a streaming read pass just before and "
                                       "just after it; the floor is the token's weight bytes read at that pair's "
                                       "bandwidth, and x floor the median of token time / floor."
                                     : "The floor = weight bytes read per token / that bandwidth."),
      "- Verify gate per stage: ", r.gate_prompts, " prompts x ", r.gate_tokens, " tokens against `",
      r.goldens, "` (reference: ", r.goldens_reference.empty() ? "none" : r.goldens_reference, ") (top-5 agreement at the first divergence) and the same tokens as the parent stage; a stage that fails is **reverted**. "
      "Beside it, the numeric check (teacher-forced logits at HF's top-5 ids within a bf16 tolerance, "
      "verify/numeric.h): required by the verify tests, shown here, not part of the revert decision.\n",
      r.kld_text.empty()
          ? std::string()
          : absl::StrFormat("- KLD vs `:%s` (tools/perplexity, docs/perplexity.md): over `%s` (%d tokens), %d "
                            "windows of %d tokens, positions %d..%d of each scored (%d per stage), as "
                            "`llama-perplexity --kl-divergence` does: mean KL(baseline || stage) (p99), top-1 "
                            "agreement, and the stage's perplexity over the baseline's (%.4f). Reported, not part "
                            "of the revert decision.\n",
                            r.kld_reference, r.kld_text, r.kld_text_tokens, r.kld_windows, r.kld_window,
                            r.kld_score_from, r.kld_window - 2, r.kld_positions, r.kld_reference_ppl),
      "\n");
  if (r.stages.empty()) return md;
  const StageRecord& b = r.stages[0];
  const int n_layers = Layers(r);
  absl::StrAppend(&md, "## Baseline: `:", b.name, "` (", b.kind, ")\n\n",
                  absl::StrFormat("- **%.2f ms/token** (min %.2f, max %.2f, drift %+.1f%%)\n", b.median_ms,
                                  b.min_ms, b.max_ms, b.drift_pct),
                  absl::StrFormat("- %d device runs per token; BO writes %s/token, BO reads %s/token\n",
                                  b.device_runs_per_token, HumanBytes(b.bytes_written_per_token),
                                  HumanBytes(b.bytes_read_per_token)),
                  absl::StrFormat("- split per token: BO write %.2f ms, device run %.2f ms, BO read %.2f "
                                  "ms, host steps %.2f ms; LM head groups (write + run + read) %.2f ms\n",
                                  b.write_ms, b.run_ms, b.read_ms, b.host_ms, b.lm_head_ms),
                  absl::StrFormat("- weights read per token %s; bandwidth floor %.2f ms; %.2fx the floor\n",
                                  HumanBytes(b.weight_bytes_per_token), b.floor_ms, b.x_floor),
                  "- ", b.reason, "\n", "- verify gate: ", GateCell(b), "\n", "- numeric check: ", NumericCell(b), "\n\n");
  for (size_t i = 1; i < r.stages.size(); ++i) {
    const StageRecord& s = r.stages[i];
    const StageRecord& p = r.stages[s.parent >= 0 ? s.parent : 0];
    absl::StrAppend(&md, "## ", i, ". ", SkillHeading(s), ": ", s.status == "reverted" ? "**reverted**" : (s.slower_than_parent ? absl::StrCat("**", s.status, "**") : s.status),
                    "\n\n", "Stage `:", s.name, "` = `", s.kind, "(src = \"", s.src, "\")`, target ", s.target, ".\n\n",
                    absl::StrFormat("- Latency: %.2f -> **%.2f ms/token**, %s vs `:%s`, %s vs baseline\n",
                                    p.median_ms, s.median_ms, SignedDelta(s.delta_parent_ms, s.delta_parent_pct),
                                    p.name, SignedDelta(s.delta_baseline_ms, s.delta_baseline_pct)),
                    absl::StrFormat("- Device runs/token %d -> %d; BO writes/token %s -> %s; %.2fx the floor\n",
                                    p.device_runs_per_token, s.device_runs_per_token,
                                    HumanBytes(p.bytes_written_per_token), HumanBytes(s.bytes_written_per_token),
                                    s.x_floor),
                    "- Reason: ", s.reason, "\n", "- Verify gate: ", GateCell(s), "\n", "- Numeric check: ", NumericCell(s), "\n");
    if (!r.kld_text.empty()) absl::StrAppend(&md, "- KLD vs `:", r.kld_reference, "`: ", KldCell(s), "\n");
    if (s.spec_checks > 0) {
      absl::StrAppend(&md, absl::StrFormat("- Speculative: %d draft checks, %d of %d drafts accepted (%.0f%%), %.2f tokens "
                                           "per check on the profile's prompt\n",
                                           s.spec_checks, s.spec_accepted, s.spec_drafted,
                                           s.spec_drafted > 0 ? 100.0 * s.spec_accepted / s.spec_drafted : 0.0,
                                           static_cast<double>(s.spec_accepted + s.spec_checks) / s.spec_checks));
    }
    if (s.status == "reverted") {
      absl::StrAppend(&md, "\nGate report:\n\n```\n", s.error.empty() ? s.gate_report : s.error,
                      "\n```\n\nThe BUILD edit that removes it from the chain:\n\n```diff\n", s.build_edit,
                      "\n```\n");
    }
    absl::StrAppend(&md, "\n");
  }
  absl::StrAppend(&md, "## Final\n\n");
  if (r.best_stage >= 0) {
    const StageRecord& f = r.stages[r.best_stage];
    absl::StrAppend(&md, absl::StrFormat(
        "Fastest stage that passes the gate: **`:%s`, %.2f ms/token** (%.2f at equal bandwidth), **%.2fx** "
        "the baseline's %.2f ms/token (%.2f) at equal bandwidth.\n\n",
        f.name, f.median_ms, f.norm_median_ms, r.speedup, b.median_ms, b.norm_median_ms));
    if (r.final_stage >= 0 && r.final_stage != r.best_stage) {
      const StageRecord& e = r.stages[r.final_stage];
      absl::StrAppend(&md, absl::StrFormat(
          "The chain's end, `:%s`, is slower than that: %.2f ms/token (%.2f at equal bandwidth), %.2fx the "
          "baseline.\n\n",
          e.name, e.median_ms, e.norm_median_ms, r.final_speedup));
    }
    absl::StrAppend(&md, absl::StrFormat("Chain's end strictly faster than the baseline (the hard gate): **%s**.\n\n",
                                         r.final_faster ? "yes" : "NO"));
  } else {
    absl::StrAppend(&md, "No stage passed the verify gate.\n\n");
  }
  if (!r.reverted.empty()) {
    std::vector<std::string> names;
    for (int i : r.reverted) names.push_back(absl::StrCat("`:", r.stages[i].name, "`"));
    absl::StrAppend(&md, "Reverted (excluded from the final figures): ", absl::StrJoin(names, ", "), ".\n\n");
  }
  Rows table = StageRows(r);
  absl::StrAppend(&md, "## All stages\n\n", MdTable(table), "\n");
  if (r.ref_gbps > 0) {
    absl::StrAppend(&md, "## Rounds\n\n",
                    absl::StrFormat("Each round's median ms/token per stage, with the read bandwidth paired with its "
                                    "tokens and the mode that names (%s). \"At equal bandwidth\" moves every token "
                                    "to %.1f GB/s, the median over all tokens of this run: its floor (its weight "
                                    "bytes read at its own bandwidth) is replaced by the floor at %.1f GB/s, the rest "
                                    "of its time kept. A stage is compared with its parent round by round, and is "
                                    "\"slower than its parent\" when the median of those ratios exceeds 1 by more "
                                    "than the noise (the larger of %.0f%% and half their range).\n\n",
                                    r.mode_split_gbps > 0
                                        ? absl::StrFormat("fast: >= %.1f GB/s, split from this run's bandwidths",
                                                          r.mode_split_gbps)
                                        : std::string("one mode in this run"),
                                    r.ref_gbps, r.ref_gbps, 100 * kMinNoise),
                    MdTable(RoundRows(r)), "\n");
  }
  if (!r.contexts.empty() && r.final_stage >= 0) {
    absl::StrAppend(&md, "## Context scaling\n\n`:", r.stages[r.final_stage].name, "` decoding ",
                    r.contexts[0].tokens, " tokens ending at each context (the KV cache filled by real decode "
                    "steps); attention is the host-side decode attention over the cache, all layers.\n\n",
                    MdTable(ContextRows(r)), "\n");
  }
  if (!r.plans.empty()) {
    absl::StrAppend(&md, "## Device plans by target\n\n",
                    "The device runs of these stages' ELFs (read, not timed: a target without a device "
                    "here is planned, not run) and their merge's reason from the lineage.\n\n");
    Rows plans = {{"stage", "target", "device runs", "merge_multi_launch"}};
    for (const PlanRecord& pl : r.plans) {
      plans.push_back({absl::StrCat("`:", pl.name, "`"), pl.target.empty() ? "-" : pl.target, elf::DescribeRuns(pl.runs),
                       pl.merge_reason.empty() ? "-" : pl.merge_reason});
    }
    absl::StrAppend(&md, MdTable(plans), "\n");
  }
  absl::StrAppend(&md, "## Where one token's time goes, per stage\n\n",
                  "Averages over the measured tokens; per-layer components summed over the ", n_layers,
                  " layers (the last column is the average per layer).\n\n");
  for (const StageRecord& s : r.stages) {
    absl::StrAppend(&md, "### `:", s.name, "`\n\n", MdTable(SplitRows(s, n_layers)), "\n");
  }
  return md;
}

// ---------------------------------------------------------------- HTML / SVG

namespace {

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                          "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#8c564b",
                          "#17becf", "#bcbd22", "#7f7f7f", "#d62728"};

std::string F(double v) { return absl::StrFormat("%.1f", v); }

// One chart: its SVG element and its size in px (the viewBox equals the size, so one
// SVG unit is one pixel wherever the chart is drawn).
struct Chart {
  std::string svg;
  double w = 0, h = 0;
};

// The opening tag of a chart's <svg>; `at` places it inside another SVG (the chart
// document, ChartSvg), empty inside the HTML report.
std::string Open(const char* id, double w, double h, const std::string& at, const std::string& title) {
  return absl::StrFormat("<svg id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\"%s width=\"%s\" height=\"%s\" "
                         "viewBox=\"0 0 %s %s\" role=\"img\"><title>%s</title>\n",
                         id, at, F(w), F(h), F(w), F(h), title);
}

Chart Waterfall(const ProfileRecord& r, const std::string& at = "") {
  const int n = static_cast<int>(r.stages.size()) + (r.best_stage >= 0 ? 1 : 0);
  const double w = std::max(560, 120 * n + 80), h = 340, left = 64, bottom = 70, top = 30;
  double max_ms = 0;
  for (const StageRecord& s : r.stages) max_ms = std::max(max_ms, s.median_ms);
  if (max_ms <= 0) max_ms = 1;
  const double plot_h = h - bottom - top, slot = (w - left - 16) / n, bar = slot * 0.55;
  auto y = [&](double ms) { return top + plot_h * (1 - ms / (max_ms * 1.1)); };
  std::string svg = Open("waterfall", w, h, at, "ms/token across stages (waterfall)");
  // Round tick steps (1, 2 or 5 x 10^k).
  double step = std::pow(10, std::floor(std::log10(max_ms * 1.1 / 4)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (step * m * 4 >= max_ms * 1.1) {
      step *= m;
      break;
    }
  }
  for (int t = 0; t * step <= max_ms * 1.1; ++t) {
    const double ms = t * step;
    absl::StrAppend(&svg, absl::StrFormat(
        "<line x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\" stroke=\"#ddd\"/><text x=\"%s\" y=\"%s\" "
        "font-size=\"11\" text-anchor=\"end\">%g</text>\n",
        F(left), F(w - 8), F(y(ms)), F(y(ms)), F(left - 6), F(y(ms) + 4), ms));
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"14\" y=\"%s\" font-size=\"12\" transform=\"rotate(-90 14 %s)\" "
                                        "text-anchor=\"middle\">ms/token</text>\n",
                                        F(top + plot_h / 2), F(top + plot_h / 2)));
  auto bar_at = [&](int k, double from, double to, const std::string& fill, const std::string& extra,
                    const std::string& label, const std::string& value, const std::string& cls) {
    const double x = left + slot * k + (slot - bar) / 2;
    const double y0 = y(std::max(from, to)), y1 = y(std::min(from, to));
    absl::StrAppend(&svg, absl::StrFormat(
        "<rect class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\" %s><title>%s: %s</title></rect>\n",
        cls, F(x), F(y0), F(bar), F(std::max(1.0, y1 - y0)), fill, extra, Esc(label), Esc(value)));
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
                                          F(x + bar / 2), F(y0 - 5), Esc(value)));
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
                                          F(x + bar / 2), F(h - bottom + 16), Esc(label)));
  };
  for (int i = 0; i < static_cast<int>(r.stages.size()); ++i) {
    const StageRecord& s = r.stages[i];
    if (i == 0) {
      bar_at(i, 0, s.median_ms, "#4e79a7", "", ":" + s.name, absl::StrFormat("%.2f ms", s.median_ms), "bar baseline");
      continue;
    }
    const double from = r.stages[s.parent >= 0 ? s.parent : 0].median_ms;
    const bool reverted = s.status == "reverted";
    // Colored by the verdict at equal bandwidth (red: slower than its parent beyond the
    // noise, gray-green: within it), not by the raw delta, which the bandwidth mode of
    // each stage's rounds can turn either way.
    const std::string fill = reverted                  ? "#bbbbbb"
                             : s.vs_parent.slower      ? "#e15759"
                             : s.vs_parent.faster      ? "#59a14f"
                                                       : "#a3b18a";
    bar_at(i, from, s.median_ms, fill, reverted ? "stroke=\"#555\" stroke-dasharray=\"4 3\"" : "",
           ":" + s.name, absl::StrFormat("%.2f (%+.1f%%)", s.median_ms, s.delta_parent_pct),
           reverted ? "bar reverted" : "bar step");
    if (reverted) {
      const double x = left + slot * i + slot / 2;
      absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"11\" fill=\"#b00\" "
                                            "text-anchor=\"middle\">reverted</text>\n",
                                            F(x), F(h - bottom + 30)));
    }
    // Connector from the parent's level.
    const double x_prev = left + slot * (i - 1) + (slot + bar) / 2, x_this = left + slot * i + (slot - bar) / 2;
    absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\" stroke=\"#888\" "
                                          "stroke-dasharray=\"3 3\"/>\n",
                                          F(x_prev), F(x_this), F(y(from)), F(y(from))));
  }
  if (r.best_stage >= 0) {
    const StageRecord& f = r.stages[r.best_stage];
    bar_at(n - 1, 0, f.median_ms, "#f28e2b", "", "best (:" + f.name + ")",
           absl::StrFormat("%.2f ms, %.2fx", f.median_ms, r.speedup), "bar final");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return {svg, w, h};
}

struct Segment {
  std::string key;
  double ms;
};

std::vector<Segment> Segments(const StageRecord& s) {
  std::vector<Segment> out;
  double write = 0, read = 0;
  for (const Component& c : s.components) {
    write += c.write_ms;
    read += c.read_ms;
    if (c.host) {
      out.push_back({absl::StrCat("host: ", c.key), c.run_ms});
    } else if (c.per_layer) {
      out.push_back({absl::StrCat("run: ", c.key), c.run_ms});
    }
  }
  double lm = 0;
  for (const Component& c : s.components) {
    if (!c.host && !c.per_layer) lm += c.run_ms;
  }
  out.push_back({"run: LM head", lm});
  out.push_back({"BO write", write});
  out.push_back({"BO read", read});
  return out;
}

Chart Breakdown(const ProfileRecord& r, const std::string& at = "") {
  std::vector<std::pair<std::string, const StageRecord*>> bars;
  if (!r.stages.empty()) bars.push_back({"baseline :" + r.stages[0].name, &r.stages[0]});
  if (r.best_stage > 0) bars.push_back({"best :" + r.stages[r.best_stage].name, &r.stages[r.best_stage]});
  std::map<std::string, std::string> color;
  std::vector<std::string> legend;
  for (const auto& [label, s] : bars) {
    for (const Segment& seg : Segments(*s)) {
      if (color.count(seg.key)) continue;
      // Distinct hues for any number of components (golden-angle steps); BO traffic gray.
      const size_t i = color.size();
      color[seg.key] = seg.key == "BO write" ? "#555555"
                       : seg.key == "BO read" ? "#aaaaaa"
                                              : absl::StrFormat("hsl(%.0f,60%%,%d%%)", std::fmod(i * 137.508, 360.0),
                                                                i % 2 ? 62 : 48);
      legend.push_back(seg.key);
    }
  }
  const double w = 820, left = 170, right = 110, bar_h = 34, gap = 22, top = 20;
  const int legend_rows = (static_cast<int>(legend.size()) + 3) / 4;
  const double h = top + bars.size() * (bar_h + gap) + 18 + legend_rows * 18 + 10;
  std::string svg =
      Open("breakdown", w, h, at, "Where one token's time goes: baseline vs final stage (share of the steps' time)");
  for (size_t b = 0; b < bars.size(); ++b) {
    const StageRecord& s = *bars[b].second;
    const std::vector<Segment> segs = Segments(s);
    double total = 0;
    for (const Segment& seg : segs) total += seg.ms;
    const double y0 = top + b * (bar_h + gap);
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"12\" text-anchor=\"end\">%s</text>\n",
                                          F(left - 8), F(y0 + bar_h / 2 + 4), Esc(bars[b].first)));
    double x = left;
    for (const Segment& seg : segs) {
      if (total <= 0 || seg.ms <= 0) continue;
      const double sw = (w - left - right) * seg.ms / total;
      absl::StrAppend(&svg, absl::StrFormat(
          "<rect class=\"seg\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\"><title>%s: %.3f ms (%.1f%%)</title></rect>\n",
          F(x), F(y0), F(std::max(sw, 0.5)), F(bar_h), color[seg.key], Esc(seg.key), seg.ms, seg.ms / total * 100));
      if (sw > 44) {
        absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"10\" fill=\"#fff\" text-anchor=\"middle\">%.0f%%</text>\n",
                                              F(x + sw / 2), F(y0 + bar_h / 2 + 4), seg.ms / total * 100));
      }
      x += sw;
    }
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"12\">%.2f ms</text>\n",
                                          F(w - right + 8), F(y0 + bar_h / 2 + 4), total));
  }
  const double ly = top + bars.size() * (bar_h + gap) + 6;
  for (size_t i = 0; i < legend.size(); ++i) {
    const double lx = 20 + (i % 4) * 200, lyy = ly + (i / 4) * 18;
    absl::StrAppend(&svg, absl::StrFormat(
        "<rect x=\"%s\" y=\"%s\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%s\" y=\"%s\" font-size=\"11\">%s</text>\n",
        F(lx), F(lyy), color[legend[i]], F(lx + 16), F(lyy + 10), Esc(legend[i])));
  }
  absl::StrAppend(&svg, "</svg>\n");
  return {svg, w, h};
}

Chart Trend(const ProfileRecord& r, const std::string& at = "") {
  const double w = 820, h = 320, left = 64, right = 170, top = 20, bottom = 40;
  size_t n = 1;
  double lo = 1e300, hi = 0;
  for (const StageRecord& s : r.stages) {
    n = std::max(n, s.token_ms.size());
    for (double v : s.token_ms) {
      if (v > 0) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  if (hi <= 0) lo = 0.1, hi = 1;
  const double llo = std::floor(std::log10(lo)), lhi = std::ceil(std::log10(hi) + 1e-9);
  const double span = std::max(lhi - llo, 1.0);
  const double pw = w - left - right, ph = h - top - bottom;
  auto x = [&](size_t i) { return left + (n > 1 ? pw * i / (n - 1) : pw / 2); };
  auto y = [&](double v) { return top + ph * (1 - (std::log10(std::max(v, 1e-9)) - llo) / span); };
  std::string svg = Open("trend", w, h, at, "ms of every decode token per stage (log scale; warm-up shaded)");
  const int warm = r.stages.empty() ? 0 : r.stages[0].warmup;
  if (warm > 0 && n > 1) {
    absl::StrAppend(&svg, absl::StrFormat("<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"#f3f3f3\"/>"
                                          "<text x=\"%s\" y=\"%s\" font-size=\"10\" fill=\"#888\">warm-up</text>\n",
                                          F(left), F(top), F(x(warm - 0.5 < 0 ? 0 : warm) - left), F(ph),
                                          F(left + 3), F(top + 12)));
  }
  for (double d = llo; d <= lhi + 1e-9; d += 1) {
    const double v = std::pow(10, d);
    absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\" stroke=\"#ddd\"/>"
                                          "<text x=\"%s\" y=\"%s\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
                                          F(left), F(left + pw), F(y(v)), F(y(v)), F(left - 6), F(y(v) + 4), v));
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"12\" text-anchor=\"middle\">decode token</text>\n"
                                        "<text x=\"14\" y=\"%s\" font-size=\"12\" transform=\"rotate(-90 14 %s)\" "
                                        "text-anchor=\"middle\">ms (log)</text>\n",
                                        F(left + pw / 2), F(h - 8), F(top + ph / 2), F(top + ph / 2)));
  for (size_t si = 0; si < r.stages.size(); ++si) {
    const StageRecord& s = r.stages[si];
    const char* c = kPalette[si % (sizeof(kPalette) / sizeof(kPalette[0]))];
    std::vector<std::string> pts;
    for (size_t i = 0; i < s.token_ms.size(); ++i) pts.push_back(absl::StrCat(F(x(i)), ",", F(y(s.token_ms[i]))));
    absl::StrAppend(&svg, absl::StrFormat("<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" %s "
                                          "points=\"%s\"><title>:%s</title></polyline>\n",
                                          c, s.status == "reverted" ? "stroke-dasharray=\"5 3\"" : "",
                                          absl::StrJoin(pts, " "), Esc(s.name)));
    const double ly = top + 10 + si * 18;
    absl::StrAppend(&svg, absl::StrFormat("<rect x=\"%s\" y=\"%s\" width=\"12\" height=\"3\" fill=\"%s\"/>"
                                          "<text x=\"%s\" y=\"%s\" font-size=\"11\">:%s%s</text>\n",
                                          F(w - right + 12), F(ly), c, F(w - right + 28), F(ly + 5), Esc(s.name),
                                          s.status == "reverted" ? " (reverted)" : ""));
  }
  absl::StrAppend(&svg, "</svg>\n");
  return {svg, w, h};
}

std::string HtmlTable(const Rows& rows) {
  std::string out = "<table>\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    out += "<tr>";
    for (const std::string& cell : rows[r]) {
      absl::StrAppend(&out, r == 0 ? "<th>" : "<td>", Esc(cell), r == 0 ? "</th>" : "</td>");
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace

std::string Html(const ProfileRecord& r, const std::string& command) {
  std::string h = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>Phase 5 decode profile: ",
      Esc(r.model), "</title>\n<style>\n",
      "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1100px}\n",
      "table{border-collapse:collapse;font-size:12px;margin:8px 0 16px}\n",
      "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}th{background:#f0f0f0}\n",
      "pre{background:#f7f7f7;border:1px solid #ddd;padding:8px;font-size:11px;overflow-x:auto}\n",
      "h1{font-size:22px}h2{font-size:17px;margin-top:22px}.chart{margin:6px 0 18px}\n",
      ".reverted{color:#b00;font-weight:bold}.final{font-size:15px}\n</style></head><body>\n");
  absl::StrAppend(&h, "<h1>Phase 5 decode profile: ", Esc(r.model), "</h1>\n<p>Generated by <code>", Esc(command),
                  "</code> on ", Esc(r.date), absl::StrFormat(
                      ". Prompt &quot;%s&quot; (%d tokens), %d warm-up + %d measured tokens per stage%s; "
                      "read bandwidth %.2f GB/s (%d threads, measured at the start of the run); weights %s.</p>\n",
                      Esc(r.prompt), r.prompt_tokens, r.warmup, r.new_tokens, RoundsNote(r), r.bandwidth_gbps, r.threads,
                      Esc(r.weights_source)));
  absl::StrAppend(&h, "<p class=\"final\">", absl::StrReplaceAll(Esc(FinalLine(r)), {{"\n", "<br>"}}), "</p>\n");
  absl::StrAppend(&h, "<h2>ms/token across stages</h2>\n<div class=\"chart\">", Waterfall(r).svg, "</div>\n");
  absl::StrAppend(&h, "<h2>Where one token's time goes: baseline vs final</h2>\n<div class=\"chart\">", Breakdown(r).svg,
                  "</div>\n");
  absl::StrAppend(&h, "<h2>Every decode token</h2>\n<div class=\"chart\">", Trend(r).svg, "</div>\n");
  absl::StrAppend(&h, "<h2>Stages</h2>\n", HtmlTable(StageRows(r)));
  for (size_t i = 1; i < r.stages.size(); ++i) {
    const StageRecord& s = r.stages[i];
    absl::StrAppend(&h, "<h2>", i, ". ", Esc(SkillHeading(s)), ": <span class=\"", s.status == "reverted" ? "reverted" : "",
                    "\">", Esc(s.status), "</span></h2>\n<p>", Esc(s.reason), "</p>\n");
    if (s.status == "reverted") {
      absl::StrAppend(&h, "<pre>", Esc(s.error.empty() ? s.gate_report : s.error), "</pre>\n<pre>", Esc(s.build_edit),
                      "</pre>\n");
    }
  }
  const int n_layers = Layers(r);
  absl::StrAppend(&h, "<h2>Per-stage split (ms per token; last column: per layer)</h2>\n");
  for (const StageRecord& s : r.stages) {
    absl::StrAppend(&h, "<h3>:", Esc(s.name), "</h3>\n", HtmlTable(SplitRows(s, n_layers)));
  }
  absl::StrAppend(&h, "</body></html>\n");
  return h;
}

std::string ChartSvg(const ProfileRecord& r) {
  const double margin = 16, heading = 30, caption = 24;
  const Chart parts[] = {Waterfall(r), Breakdown(r), Trend(r)};  // their sizes, for the layout
  const char* captions[] = {"ms/token across stages", "Where one token's time goes: baseline vs final",
                            "Every decode token"};
  double w = 0, h = margin + heading;
  for (const Chart& c : parts) {
    w = std::max(w, c.w);
    h += caption + c.h;
  }
  w += 2 * margin;
  h += margin;
  // A white page of its own (a PNG has no page behind it) in the HTML report's font.
  std::string svg = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" "
      "height=\"%s\" viewBox=\"0 0 %s %s\" font-family=\"DejaVu Sans, sans-serif\" fill=\"#222\">\n"
      "<rect x=\"0\" y=\"0\" width=\"%s\" height=\"%s\" fill=\"#fff\"/>\n"
      "<text x=\"%s\" y=\"%s\" font-size=\"18\" font-weight=\"bold\">Phase 5 decode profile: %s</text>\n",
      F(w), F(h), F(w), F(h), F(w), F(h), F(margin), F(margin + 18), Esc(r.model));
  double y = margin + heading;
  for (int i = 0; i < 3; ++i) {
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%s\" y=\"%s\" font-size=\"14\" font-weight=\"bold\">%s</text>\n",
                                          F(margin), F(y + 16), Esc(captions[i])));
    y += caption;
    const std::string at = absl::StrFormat(" x=\"%s\" y=\"%s\"", F(margin), F(y));
    const Chart c = i == 0 ? Waterfall(r, at) : i == 1 ? Breakdown(r, at) : Trend(r, at);
    absl::StrAppend(&svg, c.svg);
    y += c.h;
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace dk::profile
