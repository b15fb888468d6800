#include "runtime/greedy.h"

#include <chrono>

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

absl::StatusOr<GreedyRun> GenerateGreedy(Decoder& decoder, absl::Span<const uint32_t> prompt,
                                         const GreedyOptions& options, const OnToken& on_token) {
  GreedyRun run;
  const auto t_prompt = Clock::now();
  DK_RETURN_IF_ERROR(FeedPrompt(decoder, prompt));
  run.prompt_ms = MsSince(t_prompt);
  run.token_ms.reserve(options.max_new_tokens > 0 ? options.max_new_tokens : 0);
  for (int i = 0; i < options.max_new_tokens; ++i) {
    if (i > 0) {
      const uint32_t previous = decoder.last().token;
      const auto t0 = Clock::now();
      const absl::Status step = decoder.Advance(previous);
      run.token_ms.push_back(MsSince(t0));
      DK_RETURN_IF_ERROR(step);
    }
    if (options.stop_token && decoder.last().token == *options.stop_token) {
      run.stopped = true;
      break;
    }
    if (on_token) DK_RETURN_IF_ERROR(on_token(i, decoder.last()));
    ++run.generated;
  }
  return run;
}

}  // namespace dk::runtime
