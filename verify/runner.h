// Greedy decode of golden prompts through a decode ELF, recorded the way the
// goldens are (chosen id, top-5 ids and logits per step), for the gate.
// Thread-safety: drives one decoder from one thread.
#ifndef DK_VERIFY_RUNNER_H_
#define DK_VERIFY_RUNNER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/decoder.h"
#include "verify/goldens.h"

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

}  // namespace dk::verify

#endif  // DK_VERIFY_RUNNER_H_
