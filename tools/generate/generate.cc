// Streams a greedy continuation of a prompt through a decode ELF on the CPU backend.
//   ./bazelw run //models/smollm2_135m:generate -- --prompt "The capital of France is"
// The prompt is fed through the same decode ELF one token at a time (no separate
// prefill), then --max_new_tokens tokens are generated greedily (runtime/greedy.h).
// The BUILD target passes the model's --elf, --weights and --tokenizer before the
// user's flags; a flag given again overrides (the last one counts). Relative
// --weights and --tokenizer paths are taken from where `bazel run` was called
// (util/user_path.h).
// Exit status (util/exit_codes.h): 0 generated, 1 bad input, 2 usage error.
#include <algorithm>
#include <chrono>
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
#include "elf/elf.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tools/flags/runtime_flags.h"
#include "tokenizer/tokenizer.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/user_path.h"

ABSL_FLAG(std::string, prompt, "The capital of France is", "text to continue");
ABSL_FLAG(int, max_new_tokens, 32, "tokens to generate (>= 0)");
ABSL_FLAG(std::string, elf, "", "the decode ELF (the BUILD target passes the model's)");
ABSL_FLAG(std::string, weights, "synthetic",
          "weights: an HF checkpoint directory, a .gguf file, or synthetic[:SEED] "
          "(the BUILD target passes the model's own)");
ABSL_FLAG(std::string, tokenizer, "",
          "a .gguf, a tokenizer.json or a checkpoint directory with one "
          "(the BUILD target passes the model's own)");
ABSL_FLAG(int, max_context, 0, "KV-cache positions, 0 to 2^24 (0: the model's max_context)");
ABSL_FLAG(bool, validate, false, "check the BO protocol while running");
ABSL_FLAG(bool, stop_at_eos, true, "stop when the model emits its end-of-sequence token");

namespace {

using Clock = std::chrono::steady_clock;
using dk::UserPath;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Loaded {
  dk::elf::Program program;
  std::unique_ptr<dk::tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<dk::runtime::CpuSession> session;
  int max_context = 0;
  dk::tools::RuntimeOptions runtime;  // from the runtime flags
};

// The ELF, its weights, the tokenizer and a session on the CPU device.
absl::Status Load(Loaded& m) {
  const std::string elf = absl::GetFlag(FLAGS_elf);  // the target's, runfiles-relative
  DK_ASSIGN_OR_RETURN(m.program, dk::elf::ReadElfFile(elf));
  const std::string weights_spec = UserPath(absl::GetFlag(FLAGS_weights));
  std::fprintf(stderr, "[generate] loading weights (%s) ...\n", weights_spec.c_str());
  const auto t_load = Clock::now();
  DK_ASSIGN_OR_RETURN(dk::weights::Weights weights, dk::runtime::ReadWeightsSpec(weights_spec, m.program.model()));
  DK_ASSIGN_OR_RETURN(m.tokenizer, dk::tokenizer::Tokenizer::Load(UserPath(absl::GetFlag(FLAGS_tokenizer))));
  DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerFitsModel(*m.tokenizer, m.program.model().vocab(),
                                                            dk::ShownPath(UserPath(absl::GetFlag(FLAGS_tokenizer))),
                                                            absl::StrCat("ELF ", elf)));
  dk::runtime::SessionOptions options;
  options.validate = absl::GetFlag(FLAGS_validate);
  options.max_context = absl::GetFlag(FLAGS_max_context);
  options.cpu = m.runtime.cpu;
  options.prefill_rows = m.runtime.prefill_rows;
  const double weight_mb = weights.total_bytes() / 1e6;
  // The session keeps the weights only in its BOs (and the embedding table the host
  // reads), not a second copy: peak memory about the weights' size, not twice it.
  DK_ASSIGN_OR_RETURN(m.session, dk::runtime::CpuSession::OpenOwning(m.program, elf, std::move(weights), options));
  std::fprintf(stderr, "[generate] %.0f MB of bf16 weights; %.0f MB freed once in their BOs\n", weight_mb,
               m.session->released_bytes() / 1e6);
  m.max_context = options.max_context > 0 ? options.max_context : m.program.model().max_context();
  std::fprintf(stderr, "[generate] %s on %s: ready in %.0f ms\n[generate] runtime: %s\n",
               m.program.model().name().c_str(), m.session->device().description().c_str(),
               Ms(Clock::now() - t_load), m.runtime.Describe().c_str());
  return absl::OkStatus();
}

// The prompt's ids, checked to fit the KV cache with the new tokens.
absl::StatusOr<std::vector<uint32_t>> EncodePrompt(const Loaded& m, int new_tokens) {
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, m.tokenizer->Encode(absl::GetFlag(FLAGS_prompt)));
  if (ids.empty()) return absl::InvalidArgumentError("the prompt encodes to no tokens");
  // In int64: --max_new_tokens may be up to INT_MAX (an int sum wrapped negative).
  if (static_cast<int64_t>(ids.size()) + new_tokens > m.max_context) {
    return absl::OutOfRangeError(absl::StrCat("prompt (", ids.size(), " tokens) + --max_new_tokens (", new_tokens,
                                              ") exceeds the KV cache of ", m.max_context,
                                              " positions (--max_context)"));
  }
  return std::vector<uint32_t>(ids.begin(), ids.end());
}

// Prints each new token's text as it comes; ids the tokenizer does not have (synthetic
// weights of a larger vocabulary than the test tokenizer's) show as <id:N>.
class TextStream {
 public:
  explicit TextStream(const dk::tokenizer::Tokenizer& tok) : tok_(tok), stream_(tok) {}
  absl::Status Print(uint32_t id) {
    std::string text;
    if (static_cast<int32_t>(id) < tok_.vocab_size()) {
      DK_ASSIGN_OR_RETURN(text, stream_.Next(static_cast<int32_t>(id)));
    } else {
      if (!warned_vocab_) {
        std::fprintf(stderr, "[generate] the model emits ids beyond the tokenizer's %d tokens; "
                             "showing them as <id:N> (pass --tokenizer for the model's own)\n",
                     tok_.vocab_size());
        warned_vocab_ = true;
      }
      text = absl::StrCat(stream_.Finish(), "<id:", id, ">");
    }
    std::printf("%s", text.c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }
  std::string Finish() { return stream_.Finish(); }

 private:
  const dk::tokenizer::Tokenizer& tok_;
  dk::tokenizer::StreamingDecoder stream_;
  bool warned_vocab_ = false;
};

absl::Status Generate(Loaded& m) {
  const int new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  DK_ASSIGN_OR_RETURN(const std::vector<uint32_t> prompt, EncodePrompt(m, new_tokens));
  std::printf("%s", absl::GetFlag(FLAGS_prompt).c_str());
  std::fflush(stdout);
  TextStream text(*m.tokenizer);
  dk::runtime::GreedyOptions options;
  options.max_new_tokens = new_tokens;
  if (absl::GetFlag(FLAGS_stop_at_eos) && m.tokenizer->eos_id()) {
    options.stop_tokens = {static_cast<uint32_t>(*m.tokenizer->eos_id())};
  }
  DK_ASSIGN_OR_RETURN(
      dk::runtime::GreedyRun run,
      dk::runtime::GenerateGreedy(m.session->decoder(), prompt, options,
                                  [&text](int, const dk::runtime::StepResult& step) { return text.Print(step.token); }));
  std::printf("%s\n", text.Finish().c_str());
  std::fflush(stdout);
  double total = 0;
  for (double ms : run.token_ms) total += ms;
  const double mean = run.token_ms.empty() ? 0 : total / run.token_ms.size();
  std::fprintf(stderr,
               "[generate] prompt %zu tokens in %.0f ms (%.1f tokens/s, chunks of %d: the time to the first "
               "new token); %d new tokens; decode %.2f ms/token (mean), %.1f tokens/s\n",
               prompt.size(), run.prompt_ms, run.prompt_ms > 0 ? prompt.size() / (run.prompt_ms * 1e-3) : 0.0,
               m.session->decoder().prefill_rows(), run.generated, mean, mean > 0 ? 1000.0 / mean : 0.0);
  if (run.checks > 0) {
    std::fprintf(stderr, "[generate] speculative: %d draft checks, %d of %d drafted tokens accepted (%.0f%%), %.2f "
                 "tokens per check\n", run.checks, run.accepted, run.drafted,
                 run.drafted > 0 ? 100.0 * run.accepted / run.drafted : 0.0,
                 static_cast<double>(run.accepted + run.checks) / run.checks);
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("generate", s, code); }

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "generate --elf DECODE.elf --tokenizer FILE [--prompt TEXT] [--max_new_tokens N] "
      "[--weights DIR|FILE.gguf|synthetic]");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  for (const absl::Status& s :
       {dk::cli::RequireFlag("elf", absl::GetFlag(FLAGS_elf)),
        dk::cli::RequireFlag("tokenizer", absl::GetFlag(FLAGS_tokenizer)),
        dk::cli::RequireRange("max_new_tokens", absl::GetFlag(FLAGS_max_new_tokens), 0,
                              std::numeric_limits<int>::max()),
        dk::cli::RequireRange("max_context", absl::GetFlag(FLAGS_max_context), 0,
                              dk::elf::kMaxDimension)}) {
    if (!s.ok()) return Fail(s, dk::kExitUsage);
  }
  const std::string weights = UserPath(absl::GetFlag(FLAGS_weights));
  for (const absl::Status& s :
       {dk::cli::RequireFile("elf", absl::GetFlag(FLAGS_elf)),
        dk::cli::RequirePath("tokenizer", UserPath(absl::GetFlag(FLAGS_tokenizer)),
                             dk::cli::PathKind::kFileOrDirectory),
        dk::cli::RequireWeightsSpec("weights", weights)}) {
    if (!s.ok()) return Fail(s);
  }
  Loaded m;
  absl::StatusOr<dk::tools::RuntimeOptions> runtime = dk::tools::ApplyRuntimeFlags();
  if (!runtime.ok()) return Fail(runtime.status(), dk::kExitUsage);
  m.runtime = *runtime;
  if (absl::Status s = Load(m); !s.ok()) return Fail(s);
  if (absl::Status s = Generate(m); !s.ok()) return Fail(s);
  return dk::kExitOk;
}
