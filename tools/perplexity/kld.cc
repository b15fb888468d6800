#include "tools/perplexity/kld.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dk::perplexity {
namespace {

// log-softmax's pieces of one row: its max and log(sum exp(x - max)); `e` gets
// exp(x - max). The argmax (ties to the smaller id) in *top.
absl::Status LogSumExp(absl::Span<const float> x, const char* which, double* max, double* lse, uint32_t* top,
                       double* e) {
  double m = -std::numeric_limits<double>::infinity();
  uint32_t arg = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
      return absl::InvalidArgumentError(absl::StrCat(which, " logit ", i, " is ", v));
    }
    if (v > m) {
      m = v;
      arg = static_cast<uint32_t>(i);
    }
  }
  if (m == -std::numeric_limits<double>::infinity()) {
    return absl::InvalidArgumentError(absl::StrCat(which, " logits are all -inf"));
  }
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e[i] = std::exp(static_cast<double>(x[i]) - m);
    s += e[i];
  }
  *max = m;
  *lse = std::log(s);
  *top = arg;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Position> ComparePosition(absl::Span<const float> logits, absl::Span<const float> ref_logits,
                                         uint32_t next, std::vector<double>* scratch) {
  if (logits.size() != ref_logits.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(logits.size(), " logits against a reference of ", ref_logits.size(), " (another vocabulary?)"));
  }
  if (logits.empty()) return absl::InvalidArgumentError("no logits");
  if (next >= logits.size()) {
    return absl::InvalidArgumentError(absl::StrCat("next token ", next, " is outside the vocabulary of ", logits.size()));
  }
  const size_t n = logits.size();
  scratch->resize(2 * n);
  double* e = scratch->data();
  double* ref_e = e + n;
  double m, lse, ref_m, ref_lse;
  uint32_t top, ref_top;
  if (absl::Status s = LogSumExp(logits, "the stage's", &m, &lse, &top, e); !s.ok()) return s;
  if (absl::Status s = LogSumExp(ref_logits, "the reference's", &ref_m, &ref_lse, &ref_top, ref_e); !s.ok()) return s;
  // log p(i) = x_i - m - lse; KL = sum p_ref(i) (log p_ref(i) - log p(i)).
  const double ref_sum = std::exp(ref_lse);
  const double shift = (m + lse) - (ref_m + ref_lse);
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ref_e[i] == 0) continue;  // p_ref = 0 adds nothing
    const double p_ref = ref_e[i] / ref_sum;
    const double diff = static_cast<double>(ref_logits[i]) - static_cast<double>(logits[i]) + shift;
    kl += p_ref * diff;  // diff is +inf where the stage's logit is -inf
  }
  Position p;
  // Rounding can leave a tiny negative sum for equal distributions.
  p.kld = std::max(0.0, kl);
  p.same_top1 = top == ref_top;
  p.nll = -(static_cast<double>(logits[next]) - m - lse);
  p.ref_nll = -(static_cast<double>(ref_logits[next]) - ref_m - ref_lse);
  return p;
}

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (at - static_cast<double>(lo));
}

void KldAccumulator::Add(const Position& p) {
  kld_.push_back(p.kld);
  same_ += p.same_top1 ? 1 : 0;
  nll_ += p.nll;
  ref_nll_ += p.ref_nll;
}

absl::StatusOr<Summary> KldAccumulator::Finish() const {
  if (kld_.empty()) return absl::FailedPreconditionError("no position was scored (is the text shorter than one window?)");
  Summary s;
  s.positions = positions();
  const double n = static_cast<double>(kld_.size());
  double sum = 0;
  for (double k : kld_) sum += k;
  s.mean_kld = sum / n;
  s.median_kld = Quantile(kld_, 0.5);
  s.p99_kld = Quantile(kld_, 0.99);
  s.max_kld = *std::max_element(kld_.begin(), kld_.end());
  s.top1 = static_cast<double>(same_) / n;
  s.ppl = std::exp(nll_ / n);
  s.ref_ppl = std::exp(ref_nll_ / n);
  s.ppl_ratio = s.ppl / s.ref_ppl;
  return s;
}

std::string Summary::Describe() const {
  return absl::StrFormat("mean KLD %.6f (p99 %.6f, max %.4f), top-1 %.2f%%, PPL %.4f vs %.4f (ratio %.4f), %d positions",
                         mean_kld, p99_kld, max_kld, 100 * top1, ppl, ref_ppl, ppl_ratio, positions);
}

}  // namespace dk::perplexity
