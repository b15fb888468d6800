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
