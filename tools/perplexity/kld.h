// The figures the field judges a quantization by (llama.cpp's `llama-perplexity
// --kl-divergence`), from two stages' logits at the same positions of a text:
//   - KL divergence KL(P_ref || P) = sum_i p_ref(i) (log p_ref(i) - log p(i)), per position,
//     its mean and 99th percentile over the positions;
//   - top-1 agreement: the share of positions whose argmax is the same in both;
//   - perplexity exp(mean NLL of the text's next token) of each, and their ratio.
// Everything in f64 from f32 logits (log-softmax with the max subtracted).
// Thread-safety: a KldAccumulator is one caller's.
#ifndef DK_TOOLS_PERPLEXITY_KLD_H_
#define DK_TOOLS_PERPLEXITY_KLD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dk::perplexity {

// One position compared.
struct Position {
  double kld = 0;         // KL(P_ref || P), nats
  bool same_top1 = false;  // argmax equal (ties: the smaller id, both sides)
  double nll = 0;          // -log P(next)
  double ref_nll = 0;      // -log P_ref(next)
};

// Compares one position: `logits` (the stage judged) and `ref_logits` (the reference),
// the same vocabulary, `next` the text's next token. InvalidArgument for sizes that
// differ, an empty vocabulary, `next` outside it, or a NaN / +inf logit (-inf is a
// probability of 0; a token the reference gives probability > 0 and the stage 0 makes
// the KL divergence infinite, which is reported, not refused). `scratch` is reused.
absl::StatusOr<Position> ComparePosition(absl::Span<const float> logits, absl::Span<const float> ref_logits,
                                         uint32_t next, std::vector<double>* scratch);

struct Summary {
  int64_t positions = 0;
  double mean_kld = 0, median_kld = 0, p99_kld = 0, max_kld = 0;
  double top1 = 0;          // share of positions, 0..1
  double ppl = 0, ref_ppl = 0;
  double ppl_ratio = 0;     // ppl / ref_ppl
  // One line: "mean KLD 0.0123 (p99 0.0871), top-1 98.43%, PPL 12.345 vs 12.301 (ratio 1.0036), 5100 positions".
  std::string Describe() const;
};

class KldAccumulator {
 public:
  void Add(const Position& p);
  int64_t positions() const { return static_cast<int64_t>(kld_.size()); }
  // FailedPrecondition with no position added.
  absl::StatusOr<Summary> Finish() const;

 private:
  std::vector<double> kld_;
  int64_t same_ = 0;
  double nll_ = 0, ref_nll_ = 0;
};

// The q-quantile (0 <= q <= 1) of `values` (not empty), linear between order
// statistics (numpy's default).
double Quantile(std::vector<double> values, double q);

}  // namespace dk::perplexity

#endif  // DK_TOOLS_PERPLEXITY_KLD_H_
