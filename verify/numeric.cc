#include "verify/numeric.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dk::verify {
namespace {

constexpr double kUnitRoundoff = 1.0 / 256;  // bf16: 8 significant bits, u = 2^-8

// The spacing of bf16 values at |z| (7 explicit mantissa bits).
double Bf16Ulp(double z) {
  const double a = std::max(std::fabs(z), 1e-30);
  return std::ldexp(1.0, std::ilogb(a) - 7);
}

}  // namespace

double NumericTolerance(double z, double top1, int n_layers) {
  const double rounding_points = 2.0 * std::max(n_layers, 0) + 2.0;
  return Bf16Ulp(z) + 2.0 * kUnitRoundoff * std::sqrt(rounding_points) * std::max(std::fabs(top1), 1.0);
}

absl::StatusOr<NumericReport> CheckNumeric(const std::vector<Sequence>& reference,
                                           const ForcedLogits& candidate, int n_layers,
                                           int num_tokens) {
  if (reference.size() != candidate.size()) {
    return absl::InvalidArgumentError(absl::StrCat("numeric: ", reference.size(), " reference prompts but ",
                                                   candidate.size(), " teacher-forced runs"));
  }
  NumericReport report;
  report.n_layers = n_layers;
  report.num_tokens = num_tokens;
  report.passed = true;
  for (size_t p = 0; p < reference.size(); ++p) {
    const Sequence& ref = reference[p];
    NumericVerdict v;
    v.prompt = ref.prompt;
    if (static_cast<int>(ref.steps.size()) < num_tokens || static_cast<int>(candidate[p].size()) < num_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("numeric: prompt ", p, " has ", ref.steps.size(),
                                                     " reference and ", candidate[p].size(),
                                                     " teacher-forced steps; need ", num_tokens));
    }
    for (int s = 0; s < num_tokens; ++s) {
      const StepRecord& step = ref.steps[s];
      const std::vector<float>& cand = candidate[p][s];
      if (step.top5_logits.empty() || step.top5_logits.size() != step.top5.size() ||
          cand.size() != step.top5.size()) {
        return absl::InvalidArgumentError(absl::StrCat("numeric: prompt ", p, " step ", s, ": ",
                                                       step.top5.size(), " ids, ", step.top5_logits.size(),
                                                       " reference logits, ", cand.size(), " candidate logits"));
      }
      const double top1 = step.top5_logits[0];
      for (size_t r = 0; r < step.top5.size(); ++r) {
        const double z = step.top5_logits[r], c = cand[r];
        const double tol = NumericTolerance(z, top1, n_layers);
        const double diff = std::isfinite(c) ? std::fabs(c - z) : INFINITY;
        const double ratio = diff / tol;
        ++v.values;
        if (!(diff <= tol)) ++v.failures;
        v.max_abs_diff = std::max(v.max_abs_diff, diff);
        if (ratio > v.max_ratio || v.worst_step < 0) {
          v.max_ratio = ratio;
          v.worst_step = s;
          v.worst_id = step.top5[r];
          v.worst_reference = z;
          v.worst_candidate = c;
          v.worst_tolerance = tol;
        }
      }
    }
    v.passed = v.failures == 0;
    report.passed = report.passed && v.passed;
    report.max_abs_diff = std::max(report.max_abs_diff, v.max_abs_diff);
    report.max_ratio = std::max(report.max_ratio, v.max_ratio);
    report.prompts.push_back(std::move(v));
  }
  return report;
}

std::string NumericSummary(const NumericReport& report) {
  int passed = 0;
  for (const NumericVerdict& v : report.prompts) passed += v.passed ? 1 : 0;
  return absl::StrFormat("%s (%d/%d prompts; max |diff| %.4g, %.0f%% of tolerance)",
                         report.passed ? "PASS" : "FAIL", passed, static_cast<int>(report.prompts.size()),
                         report.max_abs_diff, 100 * report.max_ratio);
}

std::string FormatNumericReport(const NumericReport& report) {
  std::string out = absl::StrFormat(
      "numeric: teacher-forced on the reference's tokens, logits at its top-5 ids, %d steps; "
      "tol = ulp(z) + 2 * 2^-8 * sqrt(2*%d+2) * max(|top1|, 1)\n",
      report.num_tokens, report.n_layers);
  for (size_t i = 0; i < report.prompts.size(); ++i) {
    const NumericVerdict& v = report.prompts[i];
    absl::StrAppendFormat(&out,
                          "  %d | %s | %d/%d beyond tol | max |diff| %.4g | worst step %d id %u: ref %.6g "
                          "cand %.6g tol %.4g (%.0f%%)\n",
                          static_cast<int>(i), v.passed ? "PASS" : "FAIL", v.failures, v.values, v.max_abs_diff,
                          v.worst_step, v.worst_id, v.worst_reference, v.worst_candidate, v.worst_tolerance,
                          100 * v.max_ratio);
  }
  absl::StrAppend(&out, "numeric (teacher-forced, top-5 logits): ", NumericSummary(report), "\n");
  return out;
}

}  // namespace dk::verify
