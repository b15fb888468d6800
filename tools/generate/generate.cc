// Streams a greedy continuation of a prompt through a decode ELF on the CPU backend.
//   ./bazelw run //models/smollm2_135m:generate -- --prompt "The capital of France is"
// The prompt is fed through the same decode ELF one token at a time (no separate
// prefill), then --max_new_tokens tokens are generated greedily.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "util/user_path.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "runtime/cpu/session.h"
#include "elf/elf.h"
#include "tokenizer/tokenizer.h"

ABSL_FLAG(std::string, prompt, "The capital of France is", "text to continue");
ABSL_FLAG(int, max_new_tokens, 32, "tokens to generate");
ABSL_FLAG(std::string, weights, "",
          "weights: an HF checkpoint directory, a .gguf file, or synthetic[:SEED] "
          "(default: the model's own, set by the BUILD target)");
ABSL_FLAG(std::string, tokenizer, "",
          "a .gguf, a tokenizer.json or a checkpoint directory with one "
          "(default: the model's own, set by the BUILD target)");
ABSL_FLAG(std::string, default_tokenizer, "", "set by the BUILD target");
ABSL_FLAG(std::string, elf, "", "the decode ELF (set by the BUILD target)");
ABSL_FLAG(std::string, default_weights, "synthetic", "set by the BUILD target");
ABSL_FLAG(int, max_context, 0, "KV-cache positions (0: the model's max_context)");
ABSL_FLAG(bool, validate, false, "check the BO protocol while running");
ABSL_FLAG(bool, stop_at_eos, true, "stop when the model emits its end-of-sequence token");

namespace {

// User paths are relative to where `bazel run` was called (dk::UserPath); the
// target's own defaults are relative to the runfiles directory (the working one).
using dk::UserPath;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "generate: %s\n", std::string(s.message()).c_str());
  return 1;
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "generate --prompt TEXT [--max_new_tokens N] [--weights DIR|FILE.gguf|synthetic]");
  absl::ParseCommandLine(argc, argv);
  using Clock = std::chrono::steady_clock;

  auto program = dk::elf::ReadElfFile(absl::GetFlag(FLAGS_elf));
  if (!program.ok()) return Fail(program.status());
  const std::string weights_spec = absl::GetFlag(FLAGS_weights).empty()
                                       ? absl::GetFlag(FLAGS_default_weights)
                                       : UserPath(absl::GetFlag(FLAGS_weights));
  std::fprintf(stderr, "[generate] loading weights (%s) ...\n", weights_spec.c_str());
  const auto t_load = Clock::now();
  auto weights = dk::runtime::LoadWeightsSpec(weights_spec, program->model());
  if (!weights.ok()) return Fail(weights.status());
  const std::string tokenizer_path = absl::GetFlag(FLAGS_tokenizer).empty()
                                         ? absl::GetFlag(FLAGS_default_tokenizer)
                                         : UserPath(absl::GetFlag(FLAGS_tokenizer));
  auto tok = dk::tokenizer::Tokenizer::Load(tokenizer_path);
  if (!tok.ok()) return Fail(tok.status());
  dk::runtime::SessionOptions options;
  options.validate = absl::GetFlag(FLAGS_validate);
  options.max_context = absl::GetFlag(FLAGS_max_context);
  auto session = dk::runtime::CpuSession::Open(*program, absl::GetFlag(FLAGS_elf), *weights, options);
  if (!session.ok()) return Fail(session.status());
  std::fprintf(stderr, "[generate] %s on %s: ready in %.0f ms\n", program->model().name().c_str(),
               (*session)->device().description().c_str(), Ms(Clock::now() - t_load));

  auto ids = (*tok)->Encode(absl::GetFlag(FLAGS_prompt));
  if (!ids.ok()) return Fail(ids.status());
  if (ids->empty()) return Fail(absl::InvalidArgumentError("the prompt encodes to no tokens"));
  const int max_context = options.max_context > 0 ? options.max_context : program->model().max_context();
  const int new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  if (static_cast<int>(ids->size()) + new_tokens > max_context) {
    return Fail(absl::OutOfRangeError(absl::StrCat(
        "prompt (", ids->size(), " tokens) + --max_new_tokens (", new_tokens,
        ") exceeds the KV cache of ", max_context, " positions (--max_context)")));
  }
  dk::runtime::Decoder& decoder = (*session)->decoder();

  // Prompt: one token at a time through the same ELF.
  const auto t_prompt = Clock::now();
  absl::StatusOr<dk::runtime::StepResult> step;
  for (int32_t id : *ids) {
    step = decoder.Step(static_cast<uint32_t>(id));
    if (!step.ok()) return Fail(step.status());
  }
  const double prompt_ms = Ms(Clock::now() - t_prompt);

  std::printf("%s", absl::GetFlag(FLAGS_prompt).c_str());
  std::fflush(stdout);
  dk::tokenizer::StreamingDecoder stream(**tok);
  std::vector<double> token_ms;
  int generated = 0;
  bool warned_vocab = false;
  for (; generated < new_tokens; ++generated) {
    const uint32_t next = step->token;
    if (absl::GetFlag(FLAGS_stop_at_eos) && (*tok)->eos_id() && static_cast<int32_t>(next) == *(*tok)->eos_id()) {
      break;
    }
    absl::StatusOr<std::string> text;
    if (static_cast<int32_t>(next) < (*tok)->vocab_size()) {
      text = stream.Next(static_cast<int32_t>(next));
      if (!text.ok()) return Fail(text.status());
    } else {
      // The model's vocabulary is larger than the tokenizer's (synthetic weights
      // with the small test tokenizer): show the id.
      if (!warned_vocab) {
        std::fprintf(stderr, "[generate] the model emits ids beyond the tokenizer's %d tokens; "
                             "showing them as <id:N> (pass --tokenizer for the model's own)\n",
                     (*tok)->vocab_size());
        warned_vocab = true;
      }
      text = absl::StrCat(stream.Finish(), "<id:", next, ">");
    }
    std::printf("%s", text->c_str());
    std::fflush(stdout);
    if (generated + 1 == new_tokens) {
      ++generated;
      break;
    }
    const auto t0 = Clock::now();
    step = decoder.Step(next);
    if (!step.ok()) return Fail(step.status());
    token_ms.push_back(Ms(Clock::now() - t0));
  }
  std::printf("%s\n", stream.Finish().c_str());
  std::fflush(stdout);
  std::sort(token_ms.begin(), token_ms.end());
  const double median = token_ms.empty() ? 0 : token_ms[token_ms.size() / 2];
  std::fprintf(stderr,
               "[generate] prompt %zu tokens in %.0f ms; %d new tokens; decode %.2f ms/token "
               "(median), %.1f tokens/s\n",
               ids->size(), prompt_ms, generated, median, median > 0 ? 1000.0 / median : 0.0);
  return 0;
}
