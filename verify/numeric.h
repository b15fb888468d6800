// The numeric check of the verify gate (beside the top-5 gate of gate.h): at every
// step, the candidate's logits at the reference's top-5 ids must agree with the
// reference's recorded logits within a tolerance derived from bf16 rounding.
//
// Teacher forcing: the candidate is fed the REFERENCE's chosen token at each step
// (runner.h RunTeacherForced), not its own, so both sides always see the same context.
// After a greedy divergence (legitimate on near-ties) the free-running contexts differ
// and their logits are incomparable; forced, every one of the new_tokens steps of every
// prompt is compared, so a bug that only shifts logits (and never flips the top-5 set
// at the first divergence) is still caught.
//
// Tolerance for a reference logit z of a model with L decoder layers:
//
//   tol(z) = ulp(z) + 2 * u * sqrt(2L + 2) * max(|z_top1|, 1)      u = 2^-8
//
// - ulp(z): the reference logit is the LM head's output rounded to bf16 (<= ulp/2 off
//   the exact value) and the candidate's is the same dot product kept in f32 (summed
//   in another order): one bf16 ulp of z covers that rounding.
// - the second term: upstream, both sides round the residual stream and the normalized
//   hidden state to bf16 at the same 2L + 2 points (h_mid and h_out of each layer, the
//   embedding, final.xn), each a relative error up to u = 2^-8 on either side; the
//   implementations sum in different orders, so those roundings land on different
//   sides of a tie independently and add up as a random walk: relative error
//   ~ u * sqrt(2L + 2) of the hidden state, which moves a logit by that fraction of its
//   scale (|z_top1|: the top logits are the dot products where the LM-head row aligns
//   with the hidden state). The factor 2 is both sides' roundings.
// The margin this leaves on the correct stages is measured and stated in the docs
// (verify/README.md); FormatNumericReport prints the worst |diff| / tol.
//
// Thread-safety: free functions over caller-owned data.
#ifndef DK_VERIFY_NUMERIC_H_
#define DK_VERIFY_NUMERIC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verify/goldens.h"

namespace dk::verify {

// The candidate's logits at the reference's top-k ids, teacher-forced:
// [prompt][step][rank] = candidate logit of reference.steps[step].top5[rank].
using ForcedLogits = std::vector<std::vector<std::vector<float>>>;

// The tolerance above for reference logit `z` at a step whose top-1 logit is `top1`.
double NumericTolerance(double z, double top1, int n_layers);

struct NumericVerdict {
  std::string prompt;
  bool passed = false;
  int values = 0;            // logits compared
  int failures = 0;          // of them, beyond tolerance
  double max_abs_diff = 0;   // largest |candidate - reference|
  double max_ratio = 0;      // largest |diff| / tol (> 1: FAIL)
  // Where max_ratio was reached.
  int worst_step = -1;
  uint32_t worst_id = 0;
  double worst_reference = 0, worst_candidate = 0, worst_tolerance = 0;
};

struct NumericReport {
  bool passed = false;
  int n_layers = 0;
  int num_tokens = 0;
  double max_abs_diff = 0;  // over every prompt
  double max_ratio = 0;     // over every prompt: the margin is 1 / max_ratio
  std::vector<NumericVerdict> prompts;
};

// Compares the first num_tokens steps of each reference sequence with `candidate`.
// InvalidArgument when the shapes do not fit (a missing prompt or step, a step with
// other than k logits, a reference step without logits).
absl::StatusOr<NumericReport> CheckNumeric(const std::vector<Sequence>& reference,
                                           const ForcedLogits& candidate, int n_layers,
                                           int num_tokens);

// A table, one row per prompt, then
// "numeric (teacher-forced, top-5 logits): PASS (max |diff| 0.0312, 41% of tolerance)".
std::string FormatNumericReport(const NumericReport& report);
// The last line alone, e.g. "PASS (max |diff| 0.031, 41% of tol)".
std::string NumericSummary(const NumericReport& report);

}  // namespace dk::verify

#endif  // DK_VERIFY_NUMERIC_H_
