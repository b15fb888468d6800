// The generation loop, written once for every tool that generates (the API and so
// generate, the verify gate's runner, the profile's timing runs, the benchmarks):
// start a new sequence, feed the prompt through the decode ELF in chunks of the
// decoder's prefill rows (Decoder::Feed: one run per step for a whole chunk), then
// choose each token with a token chooser. Greedy is the chooser that takes the step's
// argmax (StepResult::token, the default); a sampler (runtime/sampling.h) is another,
// as in llama2.c's one loop. Stop tokens, end requests and, for the argmax chooser on a
// speculative program, the draft checks live here alone.
//
//   runtime::GreedyOptions options;
//   options.max_new_tokens = 32;
//   options.stop_tokens = {eos};  // optional
//   DK_ASSIGN_OR_RETURN(runtime::GreedyRun run,
//       runtime::GenerateGreedy(decoder, prompt, options,
//           [&](int i, const runtime::StepResult& step) { ...; return absl::OkStatus(); }));
//
// New token 0 is the choice after the prompt; token i > 0 is the choice after
// feeding token i - 1, so max_new_tokens tokens take max_new_tokens - 1 decode steps
// after the prompt. Thread-safety: drives one decoder from one thread.
#ifndef DK_RUNTIME_GREEDY_H_
#define DK_RUNTIME_GREEDY_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/decoder.h"

namespace dk::runtime {

// Starts a new sequence and feeds `prompt` (Decoder::Feed); decoder.last() is then
// the choice after the prompt. InvalidArgument for an empty prompt.
absl::Status FeedPrompt(Decoder& decoder, absl::Span<const uint32_t> prompt);

// Chooses the token that follows the decoder's last step (decoder.last(),
// decoder.logits()); `context` holds every token fed so far and the ones chosen
// since, oldest first (a repetition penalty's history).
using TokenChooser = std::function<uint32_t(const Decoder& decoder, absl::Span<const uint32_t> context)>;

struct GreedyOptions {
  int max_new_tokens = 32;
  // Empty: the argmax (StepResult::token, the device's top-1, ties to the smaller id),
  // the only chooser speculative decoding keeps exact, so the only one that drafts:
  // with another, a speculative program decodes one step per token.
  TokenChooser choose;
  // A choice equal to one of these ends the run before it is emitted (the model's
  // end-of-generation ids).
  std::vector<uint32_t> stop_tokens;
  // Asked after each token passed to on_token: true ends the run there, that token
  // the last (GreedyRun::requested_end); e.g. a stop string completed in the text.
  std::function<bool()> end_requested;
  bool IsStop(uint32_t token) const;
};

// Called with each new token in order (`step` is decoder.last(), its token the
// chooser's choice; the decoder's timings() are those of the step that chose it). A
// non-OK status ends the run and is returned by GenerateGreedy.
using OnToken = std::function<absl::Status(int index, const StepResult& step)>;

struct GreedyRun {
  int generated = 0;             // tokens passed to on_token
  bool stopped = false;          // ended at one of options.stop_tokens
  bool requested_end = false;    // ended by options.end_requested
  double prompt_ms = 0;          // feeding the prompt
  // Each new token after the first, in order: the decode step that chose it (a draft
  // check that chose several: its time split evenly among them).
  std::vector<double> token_ms;
  // Speculative decoding (Program.speculative): draft checks run, tokens drafted
  // and drafts the model chose (each check also chooses one token of its own).
  int checks = 0, drafted = 0, accepted = 0;
};

// FeedPrompt, then up to options.max_new_tokens tokens. With the argmax chooser, a
// program with Program.speculative drafts tokens by prompt lookup (runtime/draft.h)
// and checks them with Decoder::Score, keeping those the model chooses: the same
// tokens, with the same top-k, as one step per token.
absl::StatusOr<GreedyRun> GenerateGreedy(Decoder& decoder, absl::Span<const uint32_t> prompt,
                                         const GreedyOptions& options, const OnToken& on_token);

// GenerateGreedy's tokens after the prompt, from the decoder's current state:
// `context` holds every token fed so far (the last one's choice is decoder.last(); the
// speculative loop drafts from it); GreedyRun::prompt_ms stays 0. The generated tokens
// are appended to *context; the last one is chosen but not fed (decoder.position() is
// context->size() - 1 afterwards, or context->size() after a stop).
absl::StatusOr<GreedyRun> ContinueGreedy(Decoder& decoder, std::vector<uint32_t>* context,
                                         const GreedyOptions& options, const OnToken& on_token);

}  // namespace dk::runtime

#endif  // DK_RUNTIME_GREEDY_H_
