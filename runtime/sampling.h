// Token sampling from one step's logits: repetition penalty, temperature, top-k,
// top-p and min-p, drawn with a seeded random stream of our own. Greedy
// (temperature 0) is the default and what verify uses.
//
// The filters run in the order HF transformers' generate applies them
// (GenerationMixin._get_logits_processor: RepetitionPenaltyLogitsProcessor, then the
// warpers TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper,
// MinPLogitsWarper), each on what the previous one left:
//   1. repetition penalty: each distinct id among the last repetition_last_n history
//      tokens has its logit l replaced by l > 0 ? l / penalty : l * penalty (once,
//      however often it occurred); history ids outside the vocabulary are ignored.
//      (HF looks at the whole sequence: a last_n >= the history's length does too.)
//   2. temperature: s = l / temperature (in double).
//   3. top-k: keep exactly min(k, number of finite logits) ids.
//   4. top-p: on the softmax over top-k's ids, keep the shortest prefix of the order
//      below whose probability sum reaches top_p (the id that crosses it is kept).
//   5. min-p: drop ids whose probability is < min_p * the most likely id's.
// The result is renormalised to sum to 1.
//
// Order and ties: every filter sees the ids most likely first, equal logits broken
// by the smaller id. A cut-off inside a run of equal logits keeps the smaller ids
// (top-k keeps exactly k, top-p exactly its prefix); min-p keeps every id at its
// threshold.
//
// Non-finite logits: -inf has probability 0; NaN is treated as -inf, and +inf as the
// largest finite float (so +inf ids share the mass and finite ids underflow). An id whose
// probability underflows to 0 in double is left out of the distribution. When every
// logit is -inf or NaN (or the vocabulary is empty), the distribution is {id 0, p 1},
// the argmax rule's tie-break applied to a row of equal values.
//
// Greedy (temperature 0) applies the repetition penalty (as HF's greedy search
// does) and returns the argmax of the penalised logits, ties to the smaller id;
// top-k, top-p and min-p never change the argmax and are not consulted. A greedy
// Sample does not advance the random stream.
//
// Determinism: the random stream is xoshiro256** seeded through splitmix64, and a
// draw is u = (next() >> 11) * 2^-53 in [0, 1); the token is the first one in
// Distribution's order whose cumulative probability (summed in double, in that
// order) exceeds u, or the last one if rounding leaves u above the total. Both are
// written here, so the stream is the same on every machine and compiler; the only
// platform-dependent step is std::exp in double, whose last bit may differ between
// C libraries (a draw could change only when u lands within ~1e-16 of a boundary).
//
// Cost: top-k runs as one pass over the logits with a heap of k (plus the penalised
// ids); without top-k, one pass computes every id's e and a histogram of e by
// quarter octaves, and top-p and the draw then sort only as long a prefix of the
// order as they walk (whole buckets, picked by one more pass), so the vocabulary is
// sorted in full only when Distribution must list every id. Measured figures:
// docs/measurements.md (//runtime:sampling_bench).
//
// Thread-safety: Distribution is const and safe to call concurrently; Sample and
// Reseed mutate the random stream (and a scratch buffer) and need external locking.
#ifndef DK_RUNTIME_SAMPLING_H_
#define DK_RUNTIME_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dk::runtime {

struct SamplingOptions {
  // 0: greedy (argmax, ties to the smaller id), what verify uses; else > 0, finite.
  float temperature = 0.0f;
  // Keep the k most likely ids (0: off); >= 0.
  int top_k = 0;
  // Keep the smallest set whose probability reaches top_p (1: off); in (0, 1].
  float top_p = 1.0f;
  // Drop ids whose probability < min_p * the most likely's (0: off); in [0, 1).
  float min_p = 0.0f;
  // > 1 discourages ids seen in the last repetition_last_n tokens (1: off; < 1
  // encourages them); CTRL/HF rule: logit > 0 ? logit / penalty : logit * penalty.
  // In (0, inf).
  float repetition_penalty = 1.0f;
  // How many of the most recent history tokens the penalty looks at; >= 0.
  int repetition_last_n = 64;
  // The random stream; same seed + same logits -> same tokens.
  uint64_t seed = 0;
};

// OK, or InvalidArgument naming the field, its value and its valid range (NaN and
// infinities refused).
absl::Status ValidateSamplingOptions(const SamplingOptions& options);

// An id the filters kept and its normalised probability.
struct Candidate {
  uint32_t id;
  double p;
};

class Sampler {
 public:
  // Validates `options` (ValidateSamplingOptions) and seeds the stream with its seed.
  static absl::StatusOr<Sampler> Create(const SamplingOptions& options);

  // The distribution Sample draws from after every filter, most likely first (ties:
  // smaller id first), probabilities summing to 1. Greedy (temperature 0): the one
  // argmax id with p = 1. `history`: the prompt and tokens so far, oldest first.
  std::vector<Candidate> Distribution(absl::Span<const float> logits,
                                      absl::Span<const uint32_t> history) const;

  // One draw from Distribution with the sampler's own random stream (advances it
  // by one value unless greedy).
  uint32_t Sample(absl::Span<const float> logits, absl::Span<const uint32_t> history);

  // Restarts the random stream as Create with this seed would.
  void Reseed(uint64_t seed);

  const SamplingOptions& options() const { return options_; }

  // The next uniform double in [0, 1) of the stream (what one Sample consumes).
  double NextUniform();

  // Buffers one call fills (kept between Sample calls to avoid reallocating).
  struct Workspace {
    struct Entry {
      double e;  // exp(score - best score): the unnormalised probability
      uint32_t id;
    };
    // Per id: the penalised logit / temperature, then (whole vocabulary) its e, 0
    // for the ids left out.
    std::vector<double> scores;
    std::vector<Entry> entries;       // kept ids, [0, sorted) the first of the order
    size_t sorted = 0;
    size_t count = 0;                 // how many ids are kept in all
    std::vector<uint32_t> histogram;  // kept ids per bucket of e (empty: entries hold all)
    size_t next_bucket = 0;           // the first bucket not yet in entries
    double z = 0;                     // the sum of the kept ids' e
  };

 private:
  explicit Sampler(const SamplingOptions& options) : options_(options) { Reseed(options.seed); }

  // Fills ws with the kept set after every filter (sampling, not greedy); entries
  // empty when no logit is finite.
  void Filter(absl::Span<const float> logits, absl::Span<const uint32_t> history,
              Workspace& ws) const;

  SamplingOptions options_;
  uint64_t state_[4];
  Workspace workspace_;
};

}  // namespace dk::runtime

#endif  // DK_RUNTIME_SAMPLING_H_
