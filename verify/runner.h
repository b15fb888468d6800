// Greedy decode of golden prompts through a decode ELF, recorded the way the
// goldens are (chosen id, top-5 ids and logits per step), for the gate.
// Thread-safety: drives one decoder from one thread.
#ifndef DK_VERIFY_RUNNER_H_
#define DK_VERIFY_RUNNER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/decoder.h"
#include "verify/goldens.h"
#include "verify/numeric.h"

namespace dk::verify {

// One prompt through runtime::GenerateGreedy: a new sequence, its prompt_ids one at
// a time, then `new_tokens` greedy tokens. Step i records the choice after
// prompt + i tokens.
absl::StatusOr<Sequence> RunGreedy(runtime::Decoder& decoder, const GoldenPrompt& prompt,
                                   int new_tokens);

// Every prompt in order, as above.
absl::StatusOr<std::vector<Sequence>> RunGreedy(runtime::Decoder& decoder,
                                                const std::vector<GoldenPrompt>& prompts,
                                                int new_tokens);

// Teacher-forced: a new sequence, its prompt_ids one at a time, then the REFERENCE's
// chosen ids (prompt.sequence.steps[i].id) instead of the decoder's own, for
// `new_tokens` steps; step i records the decoder's f32 logits at the reference's
// top-k ids of step i (numeric.h says why), and in `sequence` what the decoder chose
// at step i (its own top-5) in that context. Up to and including the first step where
// that choice differs from the reference's, the contexts are the greedy run's, so the
// top-5 gate over `sequence` is the gate over the greedy run (the gate stops there).
struct ForcedRun {
  Sequence sequence;                       // the decoder's choices, reference-fed
  std::vector<std::vector<float>> logits;  // [step][rank]: at reference top5[rank]
};
absl::StatusOr<ForcedRun> RunTeacherForced(runtime::Decoder& decoder, const GoldenPrompt& prompt,
                                           int new_tokens);

}  // namespace dk::verify

#endif  // DK_VERIFY_RUNNER_H_
