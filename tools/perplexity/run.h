// A stage against a reference stage over a text, in windows, as llama.cpp's
// `llama-perplexity --kl-divergence` does, so that both engines score the same tokens:
//   - the text's ids are cut into whole windows of `window` tokens (the rest is
//     dropped), each starting over at position 0 with its first token replaced by BOS
//     when the tokenizer adds one;
//   - in each window the logits at positions [score_from, window - 1) are compared,
//     each predicting the token after it (score_from = window / 2 by default: every
//     scored token has at least half a window of context).
// Each window goes through both decoders by Decoder::Score, the LM head on every row
// (the prefill path, Decoder::Options::score_rows tokens per run).
// Thread-safety: one caller drives both decoders.
#ifndef DK_TOOLS_PERPLEXITY_RUN_H_
#define DK_TOOLS_PERPLEXITY_RUN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/decoder.h"
#include "tools/perplexity/kld.h"

namespace dk::perplexity {

struct WindowOptions {
  int window = 512;         // tokens per window (llama-perplexity's -c)
  int score_from = -1;      // first position scored in a window; -1: window / 2
  int max_windows = 0;      // 0: every whole window of the text
  std::optional<int32_t> bos;  // the first token of every window (the tokenizer's BOS, when it adds one)
};

// The windows of `ids` (the text's ids, as the tokenizer gives them). InvalidArgument
// for a window < 2, score_from outside [0, window - 1), or a text shorter than one window.
absl::StatusOr<std::vector<std::vector<uint32_t>>> MakeWindows(absl::Span<const int32_t> ids,
                                                              const WindowOptions& options);

// Progress: windows done, of total.
using Progress = std::function<void(int done, int total)>;

// Runs every window through `stage` and `reference` (both Reset first), compares the
// scored positions. The two programs must have the same vocabulary; each window must fit
// both contexts.
absl::StatusOr<Summary> CompareStages(runtime::Decoder& stage, runtime::Decoder& reference,
                                      const std::vector<std::vector<uint32_t>>& windows, int score_from,
                                      const Progress& progress = nullptr);
// The same for several stages against one reference, run in step (each chunk of a
// window through the reference once, then through every stage): one Summary per stage.
absl::StatusOr<std::vector<Summary>> CompareStages(const std::vector<runtime::Decoder*>& stages,
                                                   runtime::Decoder& reference,
                                                   const std::vector<std::vector<uint32_t>>& windows, int score_from,
                                                   const Progress& progress = nullptr);

// The score_from in force for `options` (window / 2 for -1).
int ScoreFrom(const WindowOptions& options);

}  // namespace dk::perplexity

#endif  // DK_TOOLS_PERPLEXITY_RUN_H_
