// Streams a continuation of a prompt (or, with --chat, the model's answer in its chat
// format) through a decode ELF on the CPU backend, as a thin user of the public API
// (api/decodekit.h: decodekit::Engine).
//   ./bazelw run //models/smollm2_135m:generate -- --prompt "The capital of France is"
//   ./bazelw run //models/smollm2_135m:generate -- --chat --prompt "What is the capital of France?"
// The prompt goes through the prefill path (--prefill_chunk tokens per run), then
// --max_new_tokens tokens are chosen greedily (the default, what verify checks) or
// sampled (--temperature > 0, with --top_k / --top_p / --min_p / --repetition_penalty
// and --seed). Generation stops at the model's end-of-generation tokens (its files'
// EOS / end-of-turn ids) and at any of --stop's strings.
//   ./bazelw run //tools/generate -- --model SmolLM2-135M.Q4_1.gguf --prompt "The capital of France is"
// (--model: the model file alone; its chain's ELFs are built and cached, and the best
// stage its weights allow runs, or --stage.)
// The BUILD target passes the model's --elf, --weights and --tokenizer before the
// user's flags; a flag given again overrides (the last one counts). Relative
// --weights and --tokenizer paths are taken from where `bazel run` was called
// (util/user_path.h).
// Exit status (util/exit_codes.h): 0 generated, 1 bad input, 2 usage error.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "api/decodekit.h"
#include "api/engine_internal.h"
#include "elf/elf.h"
#include "tools/flags/model_flags.h"
#include "tools/flags/runtime_flags.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "util/user_path.h"

ABSL_FLAG(std::string, prompt, "The capital of France is", "text to continue (with --chat: the user's message)");
ABSL_FLAG(int, max_new_tokens, 32, "tokens to generate (>= 0)");
ABSL_FLAG(std::string, elf, "", "the decode ELF (the BUILD target passes the model's)");
ABSL_FLAG(std::string, weights, "synthetic",
          "weights: an HF checkpoint directory, a .gguf file, or synthetic[:SEED] "
          "(the BUILD target passes the model's own)");
ABSL_FLAG(std::string, tokenizer, "",
          "a .gguf, a tokenizer.json or a checkpoint directory with one "
          "(the BUILD target passes the model's own)");
ABSL_FLAG(bool, validate, false, "check the BO protocol while running");
ABSL_FLAG(bool, stop_at_eos, true,
          "stop at the model's end-of-generation tokens (its EOS and end-of-turn ids)");
ABSL_FLAG(float, temperature, 0.0f, "0: greedy (the default); > 0: sample at this temperature");
ABSL_FLAG(int, top_k, 0, "sampling: keep the k most likely tokens (0: all)");
ABSL_FLAG(float, top_p, 1.0f, "sampling: keep the smallest set reaching this probability, in (0, 1]");
ABSL_FLAG(float, min_p, 0.0f, "sampling: drop tokens below min_p x the most likely's probability, in [0, 1)");
ABSL_FLAG(float, repetition_penalty, 1.0f, "> 1 discourages the last 64 tokens (1: off)");
ABSL_FLAG(uint64_t, seed, 0, "sampling: the random seed (the same seed gives the same tokens)");
ABSL_FLAG(bool, chat, false, "format --prompt as a user message in the model's chat format, answer it");
ABSL_FLAG(std::string, system, "", "with --chat: a system message before the user's");
ABSL_FLAG(std::string, chat_format, "",
          "with --chat: llama3, chatml, gemma or raw instead of the model's own chat template");
ABSL_FLAG(std::vector<std::string>, stop, {}, "stop strings, comma-separated: generation ends before the first");

namespace {

using dk::UserPath;

decodekit::GenerateOptions GenerateOptionsFromFlags() {
  decodekit::GenerateOptions o;
  o.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  o.stop_at_end_of_generation = absl::GetFlag(FLAGS_stop_at_eos);
  o.stop_strings = absl::GetFlag(FLAGS_stop);
  o.sampling.temperature = absl::GetFlag(FLAGS_temperature);
  o.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  o.sampling.top_p = absl::GetFlag(FLAGS_top_p);
  o.sampling.min_p = absl::GetFlag(FLAGS_min_p);
  o.sampling.repetition_penalty = absl::GetFlag(FLAGS_repetition_penalty);
  o.sampling.seed = absl::GetFlag(FLAGS_seed);
  return o;
}

decodekit::EngineOptions EngineOptionsFromFlags(const dk::tools::RuntimeOptions& runtime) {
  decodekit::EngineOptions options;
  if (const std::string model = absl::GetFlag(FLAGS_model); !model.empty()) {
    // The model file alone: the API builds (or finds) its chain's ELFs.
    options.model = UserPath(model);
    options.stage = absl::GetFlag(FLAGS_stage);
    options.cache_dir = UserPath(absl::GetFlag(FLAGS_cache_dir));
    // --weights' default, "synthetic", means the model's own here.
    if (absl::GetFlag(FLAGS_weights) != "synthetic") options.weights = UserPath(absl::GetFlag(FLAGS_weights));
  } else {
    options.elf = absl::GetFlag(FLAGS_elf);  // the target's, runfiles-relative
    options.weights = UserPath(absl::GetFlag(FLAGS_weights));
  }
  options.tokenizer = UserPath(absl::GetFlag(FLAGS_tokenizer));
  options.max_context = absl::GetFlag(FLAGS_max_context);
  options.prefill_chunk = runtime.prefill_rows;
  options.chat_format = absl::GetFlag(FLAGS_chat_format);
  return options;
}

absl::StatusOr<std::unique_ptr<decodekit::Engine>> Open(const decodekit::EngineOptions& options,
                                                        const dk::tools::RuntimeOptions& runtime) {
  decodekit::internal::ToolOptions tool;
  tool.pool = &dk::SharedThreadPool();
  tool.cpu = runtime.cpu;
  tool.validate = absl::GetFlag(FLAGS_validate);
  std::fprintf(stderr, "[generate] loading %s with weights %s ...\n",
               options.model.empty() ? options.elf.c_str() : options.model.c_str(),
               options.weights.empty() ? "of the model file" : options.weights.c_str());
  return decodekit::internal::EngineAccess::Open(options, tool);
}

// --chat's conversation: --system (if any), then --prompt as the user's message.
std::vector<decodekit::Message> Conversation() {
  std::vector<decodekit::Message> messages;
  if (!absl::GetFlag(FLAGS_system).empty()) messages.push_back({"system", absl::GetFlag(FLAGS_system)});
  messages.push_back({"user", absl::GetFlag(FLAGS_prompt)});
  return messages;
}

// The prompt's tokens (a chat: the formatted conversation's), checked up front to fit
// the KV cache with the new tokens.
absl::StatusOr<std::vector<int32_t>> PromptTokens(decodekit::Engine& engine, int new_tokens) {
  std::vector<int32_t> ids;
  if (absl::GetFlag(FLAGS_chat)) {
    DK_ASSIGN_OR_RETURN(const std::string text, engine.FormatChat(Conversation()));
    DK_ASSIGN_OR_RETURN(ids, engine.Tokenize(text, /*add_special=*/false));
  } else {
    DK_ASSIGN_OR_RETURN(ids, engine.Tokenize(absl::GetFlag(FLAGS_prompt)));
  }
  if (ids.empty()) return absl::InvalidArgumentError("the prompt encodes to no tokens");
  // In int64: --max_new_tokens may be up to INT_MAX (an int sum wrapped negative).
  if (static_cast<int64_t>(ids.size()) + new_tokens > engine.max_context()) {
    return absl::OutOfRangeError(absl::StrCat("prompt (", ids.size(), " tokens) + --max_new_tokens (", new_tokens,
                                              ") exceeds the KV cache of ", engine.max_context(),
                                              " positions (--max_context)"));
  }
  return ids;
}

absl::Status Generate(decodekit::Engine& engine) {
  const decodekit::GenerateOptions options = GenerateOptionsFromFlags();
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> prompt, PromptTokens(engine, options.max_new_tokens));
  const bool chat = absl::GetFlag(FLAGS_chat);
  if (!chat) std::printf("%s", absl::GetFlag(FLAGS_prompt).c_str());
  std::fflush(stdout);
  const auto print = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  absl::StatusOr<decodekit::GenerateResult> run;
  if (chat) {
    run = engine.Chat(Conversation(), options, print);
  } else {
    run = engine.Complete(absl::GetFlag(FLAGS_prompt), options, print);
  }
  DK_RETURN_IF_ERROR(run.status());
  std::printf("\n");
  std::fflush(stdout);
  static const char* kStops[] = {"--max_new_tokens", "an end-of-generation token", "a --stop string",
                                 "the caller"};
  const double mean = run->tokens.size() >= 2 ? run->decode_ms / (run->tokens.size() - 1) : 0.0;
  std::fprintf(stderr,
               "[generate] prompt %zu tokens in %.0f ms (%.1f tokens/s: the time to first token); %zu new "
               "tokens; decode %.2f ms/token (mean), %.1f tokens/s; stopped at %s\n",
               prompt.size(), run->prompt_ms, run->prompt_ms > 0 ? prompt.size() / (run->prompt_ms * 1e-3) : 0.0,
               run->tokens.size(), mean, run->decode_tokens_per_s(), kStops[static_cast<int>(run->stop)]);
  if (run->draft_checks > 0) {
    std::fprintf(stderr, "[generate] speculative: %d draft checks, %d of %d drafted tokens accepted (%.0f%%), %.2f "
                 "tokens per check\n", run->draft_checks, run->accepted, run->drafted,
                 run->drafted > 0 ? 100.0 * run->accepted / run->drafted : 0.0,
                 static_cast<double>(run->accepted + run->draft_checks) / run->draft_checks);
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("generate", s, code); }

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "generate (--model FILE.gguf|CHECKPOINT_DIR [--stage S] | --elf DECODE.elf --tokenizer FILE) [--prompt TEXT] "
      "[--max_new_tokens N] "
      "[--weights DIR|FILE.gguf|synthetic] [--chat [--system TEXT] [--chat_format F]] [--temperature T "
      "--top_k K --top_p P --min_p M --repetition_penalty R --seed S] [--stop A,B]");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  const bool model = !absl::GetFlag(FLAGS_model).empty();
  if (absl::Status s = dk::tools::CheckModelFlags(absl::GetFlag(FLAGS_elf)); !s.ok()) return Fail(s, dk::kExitUsage);
  for (const absl::Status& s :
       {model ? absl::OkStatus() : dk::cli::RequireFlag("elf", absl::GetFlag(FLAGS_elf)),
        model ? absl::OkStatus() : dk::cli::RequireFlag("tokenizer", absl::GetFlag(FLAGS_tokenizer)),
        dk::cli::RequireRange("max_new_tokens", absl::GetFlag(FLAGS_max_new_tokens), 0,
                              std::numeric_limits<int>::max()),
        dk::cli::RequireRange("max_context", absl::GetFlag(FLAGS_max_context), 0,
                              dk::elf::kMaxDimension)}) {
    if (!s.ok()) return Fail(s, dk::kExitUsage);
  }
  const std::string weights = UserPath(absl::GetFlag(FLAGS_weights));
  for (const absl::Status& s :
       {model ? absl::OkStatus() : dk::cli::RequireFile("elf", absl::GetFlag(FLAGS_elf)),
        model && absl::GetFlag(FLAGS_tokenizer).empty()
            ? absl::OkStatus()
            : dk::cli::RequirePath("tokenizer", UserPath(absl::GetFlag(FLAGS_tokenizer)),
                                   dk::cli::PathKind::kFileOrDirectory),
        dk::cli::RequireWeightsSpec("weights", weights)}) {
    if (!s.ok()) return Fail(s);
  }
  if (absl::Status s = decodekit::ValidateGenerateOptions(GenerateOptionsFromFlags()); !s.ok()) {
    return Fail(s, dk::kExitUsage);
  }
  absl::StatusOr<dk::tools::RuntimeOptions> runtime = dk::tools::ApplyRuntimeFlags();
  if (!runtime.ok()) return Fail(runtime.status(), dk::kExitUsage);
  const decodekit::EngineOptions options = EngineOptionsFromFlags(*runtime);
  if (absl::Status s = decodekit::ValidateEngineOptions(options); !s.ok()) return Fail(s, dk::kExitUsage);
  absl::StatusOr<std::unique_ptr<decodekit::Engine>> engine = Open(options, *runtime);
  if (!engine.ok()) return Fail(engine.status());
  std::fprintf(stderr, "[generate] %s\n[generate] runtime: %s\n", (*engine)->Describe().c_str(),
               runtime->Describe().c_str());
  if (absl::Status s = Generate(**engine); !s.ok()) return Fail(s);
  return dk::kExitOk;
}
