#include "runtime/draft.h"

#include <algorithm>

namespace dk::runtime {

std::vector<uint32_t> PromptLookupDraft(absl::Span<const uint32_t> context, int max_draft, int max_ngram,
                                        int min_ngram) {
  const size_t len = context.size();
  const size_t least = static_cast<size_t>(std::max(min_ngram, 1));
  for (size_t n = std::min<size_t>(max_ngram, len > 0 ? len - 1 : 0); n >= least; --n) {
    const absl::Span<const uint32_t> suffix = context.subspan(len - n);
    // The most recent earlier occurrence: start j < len - n, latest first.
    for (size_t j = len - n; j-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + j)) continue;
      const size_t longer = std::min<size_t>(n - least, 16);  // 2^(n - min_ngram) drafts at most
      const size_t cap = std::min(static_cast<size_t>(std::max(max_draft, 0)), size_t{1} << longer);
      const size_t from = j + n, to = std::min(len, from + cap);
      return std::vector<uint32_t>(context.begin() + from, context.begin() + to);
    }
  }
  return {};
}

}  // namespace dk::runtime
