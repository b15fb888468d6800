#include "verify/runner.h"

#include "absl/strings/str_cat.h"

namespace dk::verify {

absl::StatusOr<std::vector<Sequence>> RunGreedy(runtime::Decoder& decoder,
                                                const std::vector<GoldenPrompt>& prompts,
                                                int new_tokens) {
  std::vector<Sequence> out;
  for (const GoldenPrompt& prompt : prompts) {
    if (prompt.prompt_ids.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("prompt \"", prompt.text, "\" has no ids"));
    }
    decoder.Reset();
    absl::StatusOr<runtime::StepResult> step;
    for (uint32_t id : prompt.prompt_ids) {
      step = decoder.Step(id);
      if (!step.ok()) return step.status();
    }
    Sequence seq;
    seq.prompt = prompt.text;
    for (int i = 0; i < new_tokens; ++i) {
      StepRecord record;
      record.id = step->token;
      record.top5 = step->top_ids;
      record.top5_logits = step->top_logits;
      seq.steps.push_back(std::move(record));
      if (i + 1 < new_tokens) {
        step = decoder.Step(seq.steps.back().id);
        if (!step.ok()) return step.status();
      }
    }
    out.push_back(std::move(seq));
  }
  return out;
}

}  // namespace dk::verify
