// Drafting for speculative decoding (Program.speculative, the speculative_decode
// rule): prompt lookup, which needs no second model. The draft is what followed the
// most recent earlier occurrence of the sequence's last n tokens, for the longest
// n <= max_ngram that occurred before; text that repeats itself (code being edited,
// a passage quoted back, a list's structure) makes such drafts right often. A longer
// match predicts further: a match of n tokens drafts at most 2^(n - min_ngram) of
// them (1, 2, 4, 8, ... up to max_draft), so that a chance match of a few common
// tokens costs few check rows while a passage being quoted back drafts many.
// Thread-safety: a pure function.
#ifndef DK_RUNTIME_DRAFT_H_
#define DK_RUNTIME_DRAFT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace dk::runtime {

// Up to max_draft tokens continuing `context` (the prompt and the tokens generated
// so far), at most 2^(n - min_ngram) for a match of n tokens; empty when no suffix
// of min_ngram..max_ngram tokens occurred earlier.
std::vector<uint32_t> PromptLookupDraft(absl::Span<const uint32_t> context, int max_draft, int max_ngram,
                                        int min_ngram = 1);

}  // namespace dk::runtime

#endif  // DK_RUNTIME_DRAFT_H_
