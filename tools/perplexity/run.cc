#include "tools/perplexity/run.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "util/status.h"

namespace dk::perplexity {

int ScoreFrom(const WindowOptions& options) {
  return options.score_from < 0 ? options.window / 2 : options.score_from;
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> MakeWindows(absl::Span<const int32_t> ids,
                                                              const WindowOptions& options) {
  if (options.window < 2) return absl::InvalidArgumentError(absl::StrCat("window of ", options.window, " tokens (at least 2)"));
  const int from = ScoreFrom(options);
  if (from < 0 || from >= options.window - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("score_from ", from, " outside [0, ", options.window - 1, ") of a window of ", options.window));
  }
  const size_t count = ids.size() / static_cast<size_t>(options.window);
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the text has ", ids.size(), " tokens, fewer than one window of ", options.window));
  }
  const size_t used = options.max_windows > 0 ? std::min<size_t>(count, options.max_windows) : count;
  std::vector<std::vector<uint32_t>> windows(used);
  for (size_t w = 0; w < used; ++w) {
    for (int i = 0; i < options.window; ++i) {
      const int32_t id = ids[w * options.window + i];
      if (id < 0) return absl::InvalidArgumentError(absl::StrCat("token id ", id, " at ", w * options.window + i));
      windows[w].push_back(static_cast<uint32_t>(id));
    }
    if (options.bos) windows[w][0] = static_cast<uint32_t>(*options.bos);
  }
  return windows;
}

absl::StatusOr<std::vector<Summary>> CompareStages(const std::vector<runtime::Decoder*>& stages,
                                                   runtime::Decoder& reference,
                                                   const std::vector<std::vector<uint32_t>>& windows, int score_from,
                                                   const Progress& progress) {
  const int64_t vocab = reference.program().model().vocab();
  int rows = reference.check_rows();
  for (const runtime::Decoder* stage : stages) {
    if (stage->program().model().vocab() != vocab) {
      return absl::InvalidArgumentError(absl::StrCat("a stage's vocabulary has ", stage->program().model().vocab(),
                                                     " tokens, the reference's ", vocab));
    }
    rows = std::min(rows, stage->check_rows());
  }
  std::vector<KldAccumulator> acc(stages.size());
  std::vector<double> scratch;
  std::vector<uint32_t> top1;
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::vector<uint32_t>& ids = windows[w];
    const int n = static_cast<int>(ids.size());
    reference.Reset();
    for (runtime::Decoder* stage : stages) stage->Reset();
    for (int begin = 0; begin < n - 1; begin += rows) {
      // Rows [begin, end): logits at row r predict ids[r + 1]; the last id predicts nothing.
      const int end = std::min(n - 1, begin + rows);
      const absl::Span<const uint32_t> chunk(ids.data() + begin, end - begin);
      DK_RETURN_IF_ERROR(reference.Score(chunk, &top1));
      for (size_t k = 0; k < stages.size(); ++k) {
        DK_RETURN_IF_ERROR(stages[k]->Score(chunk, &top1));
        for (int p = std::max(begin, score_from); p < end; ++p) {
          const float* got = stages[k]->row_logits(p - begin);
          const float* want = reference.row_logits(p - begin);
          if (got == nullptr || want == nullptr) return absl::InternalError(absl::StrCat("no logits for row ", p - begin));
          absl::StatusOr<Position> pos = ComparePosition(absl::MakeConstSpan(got, vocab),
                                                         absl::MakeConstSpan(want, vocab), ids[p + 1], &scratch);
          if (!pos.ok()) {
            return absl::Status(pos.status().code(),
                                absl::StrCat("window ", w, ", position ", p, ": ", pos.status().message()));
          }
          acc[k].Add(*pos);
        }
      }
    }
    if (progress) progress(static_cast<int>(w) + 1, static_cast<int>(windows.size()));
  }
  std::vector<Summary> out;
  for (const KldAccumulator& a : acc) {
    DK_ASSIGN_OR_RETURN(Summary s, a.Finish());
    out.push_back(s);
  }
  return out;
}

absl::StatusOr<Summary> CompareStages(runtime::Decoder& stage, runtime::Decoder& reference,
                                      const std::vector<std::vector<uint32_t>>& windows, int score_from,
                                      const Progress& progress) {
  DK_ASSIGN_OR_RETURN(std::vector<Summary> s, CompareStages(std::vector<runtime::Decoder*>{&stage}, reference,
                                                            windows, score_from, progress));
  return s[0];
}

}  // namespace dk::perplexity
