#include "verify/runner.h"

#include "absl/strings/str_cat.h"
#include "runtime/greedy.h"
#include "util/status.h"

namespace dk::verify {

absl::StatusOr<Sequence> RunGreedy(runtime::Decoder& decoder, const GoldenPrompt& prompt,
                                   int new_tokens) {
  if (prompt.prompt_ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("prompt \"", prompt.text, "\" has no ids"));
  }
  Sequence seq;
  seq.prompt = prompt.text;
  runtime::GreedyOptions options;
  options.max_new_tokens = new_tokens;
  DK_RETURN_IF_ERROR(runtime::GenerateGreedy(decoder, prompt.prompt_ids, options,
                                             [&seq](int, const runtime::StepResult& step) {
                                               StepRecord record;
                                               record.id = step.token;
                                               record.top5 = step.top_ids;
                                               record.top5_logits = step.top_logits;
                                               seq.steps.push_back(std::move(record));
                                               return absl::OkStatus();
                                             })
                         .status());
  return seq;
}

absl::StatusOr<ForcedRun> RunTeacherForced(runtime::Decoder& decoder, const GoldenPrompt& prompt,
                                           int new_tokens) {
  const std::vector<StepRecord>& ref = prompt.sequence.steps;
  if (static_cast<int>(ref.size()) < new_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt \"", prompt.text, "\" has ", ref.size(),
                                                   " reference steps, fewer than ", new_tokens));
  }
  DK_RETURN_IF_ERROR(runtime::FeedPrompt(decoder, prompt.prompt_ids));
  ForcedRun out;
  out.sequence.prompt = prompt.text;
  out.logits.reserve(new_tokens);
  for (int i = 0; i < new_tokens; ++i) {
    if (i > 0) DK_RETURN_IF_ERROR(decoder.Advance(ref[i - 1].id));  // the reference's choice
    const float* logits = decoder.logits();
    const uint32_t vocab = static_cast<uint32_t>(decoder.program().model().vocab());
    std::vector<float> at;
    at.reserve(ref[i].top5.size());
    for (uint32_t id : ref[i].top5) {
      if (id >= vocab) return absl::InvalidArgumentError(absl::StrCat("reference id ", id, " >= vocab ", vocab));
      at.push_back(logits[id]);
    }
    out.logits.push_back(std::move(at));
    const runtime::StepResult& step = decoder.last();
    out.sequence.steps.push_back({step.token, step.top_ids, step.top_logits});
  }
  return out;
}

absl::StatusOr<std::vector<Sequence>> RunGreedy(runtime::Decoder& decoder,
                                                const std::vector<GoldenPrompt>& prompts,
                                                int new_tokens) {
  std::vector<Sequence> out;
  for (const GoldenPrompt& prompt : prompts) {
    DK_ASSIGN_OR_RETURN(Sequence seq, RunGreedy(decoder, prompt, new_tokens));
    out.push_back(std::move(seq));
  }
  return out;
}

}  // namespace dk::verify
