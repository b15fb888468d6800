#include "runtime/greedy.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "runtime/draft.h"
#include "util/status.h"

namespace dk::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

absl::Status FeedPrompt(Decoder& decoder, absl::Span<const uint32_t> prompt) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  decoder.Reset();
  return decoder.Feed(prompt);
}

namespace {

// Passes a chosen token to on_token and appends it to `context`; run.requested_end
// says whether the run ends after it (options.end_requested).
absl::Status Emit(const StepResult& step, const GreedyOptions& options, const OnToken& on_token,
                  std::vector<uint32_t>& context, GreedyRun& run) {
  if (on_token) DK_RETURN_IF_ERROR(on_token(run.generated, step));
  ++run.generated;
  context.push_back(step.token);
  run.requested_end = options.end_requested && options.end_requested();
  return absl::OkStatus();
}

// The speculative loop: `pending` (the last chosen token, not yet fed) and drafts
// checked together; emits the kept drafts and the check's own choice.
absl::Status SpeculativeSteps(Decoder& decoder, std::vector<uint32_t>& context, const GreedyOptions& options,
                              const OnToken& on_token, GreedyRun& run) {
  const elf::Speculative& spec = decoder.program().speculative();
  std::vector<uint32_t> chunk, top1;
  StepResult row;
  while (run.generated < options.max_new_tokens && !run.stopped && !run.requested_end) {
    const int room = options.max_new_tokens - run.generated - 1;  // drafts past the limit are wasted
    // Drafts come from matches of at least two tokens (elf::kMinDraftNgram): a lone
    // repeated token (a space, a comma) predicts its old successor too rarely to pay
    // for the extra rows of a check.
    std::vector<uint32_t> draft =
        PromptLookupDraft(context, std::min(spec.max_draft(), room), spec.max_ngram(), elf::kMinDraftNgram);
    chunk.assign(1, context.back());
    chunk.insert(chunk.end(), draft.begin(), draft.end());
    const auto t0 = Clock::now();
    DK_RETURN_IF_ERROR(decoder.Score(chunk, &top1));
    size_t kept = 0;
    while (kept < draft.size() && top1[kept] == draft[kept]) ++kept;
    DK_RETURN_IF_ERROR(decoder.Rewind(static_cast<int>(kept) + 1));
    const double ms = MsSince(t0) / static_cast<double>(kept + 1);
    ++run.checks;
    run.drafted += static_cast<int>(draft.size());
    run.accepted += static_cast<int>(kept);
    size_t i = 0;
    for (; i <= kept && run.generated < options.max_new_tokens; ++i) {
      DK_RETURN_IF_ERROR(decoder.ReadRow(static_cast<int>(i), &row));
      run.token_ms.push_back(ms);
      if (options.IsStop(row.token)) {
        run.stopped = true;
        break;
      }
      DK_RETURN_IF_ERROR(Emit(row, options, on_token, context, run));
      if (run.requested_end) break;
    }
    // Ended at row i: nothing past it stays fed. The sequence ends with the token a stop
    // follows, or with the last token emitted (chosen, not fed), as after any run.
    if (i < kept) DK_RETURN_IF_ERROR(decoder.Rewind(static_cast<int>(i) + 1));
  }
  return absl::OkStatus();
}

}  // namespace

bool GreedyOptions::IsStop(uint32_t token) const {
  return std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end();
}

absl::StatusOr<GreedyRun> ContinueGreedy(Decoder& decoder, std::vector<uint32_t>* context,
                                         const GreedyOptions& options, const OnToken& on_token) {
  if (context->empty() || decoder.position() != static_cast<int>(context->size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("ContinueGreedy: the decoder has fed ", decoder.position(), " tokens, the context holds ",
                     context->size(), " (feed at least one token first)"));
  }
  GreedyRun run;
  run.token_ms.reserve(options.max_new_tokens > 0 ? options.max_new_tokens : 0);
  if (decoder.check_rows() > 1 && !options.choose && options.max_new_tokens > 0) {
    // Token 0 is the prompt's choice; the rest come from draft checks.
    const StepResult& first = decoder.last();
    if (options.IsStop(first.token)) {
      run.stopped = true;
      return run;
    }
    DK_RETURN_IF_ERROR(Emit(first, options, on_token, *context, run));
    if (!run.requested_end) DK_RETURN_IF_ERROR(SpeculativeSteps(decoder, *context, options, on_token, run));
    return run;
  }
  // One step per token: feed the previous choice (the context's last token), choose.
  StepResult chosen;  // decoder.last() with another chooser's token; reused, so no allocation per token
  for (int i = 0; i < options.max_new_tokens; ++i) {
    if (i > 0) {
      const auto t0 = Clock::now();
      const absl::Status step = decoder.Advance(context->back());
      run.token_ms.push_back(MsSince(t0));
      DK_RETURN_IF_ERROR(step);
    }
    const StepResult* step = &decoder.last();
    if (options.choose) {
      chosen = decoder.last();
      chosen.token = options.choose(decoder, *context);
      step = &chosen;
    }
    if (options.IsStop(step->token)) {
      run.stopped = true;
      break;
    }
    DK_RETURN_IF_ERROR(Emit(*step, options, on_token, *context, run));
    if (run.requested_end) break;
  }
  return run;
}

absl::StatusOr<GreedyRun> GenerateGreedy(Decoder& decoder, absl::Span<const uint32_t> prompt,
                                         const GreedyOptions& options, const OnToken& on_token) {
  const auto t_prompt = Clock::now();
  DK_RETURN_IF_ERROR(FeedPrompt(decoder, prompt));
  const double prompt_ms = MsSince(t_prompt);
  std::vector<uint32_t> context(prompt.begin(), prompt.end());
  context.reserve(prompt.size() + std::max(options.max_new_tokens, 0));
  DK_ASSIGN_OR_RETURN(GreedyRun run, ContinueGreedy(decoder, &context, options, on_token));
  run.prompt_ms = prompt_ms;
  return run;
}

}  // namespace dk::runtime
