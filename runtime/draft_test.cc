#include "runtime/draft.h"

#include <vector>

#include "gtest/gtest.h"

namespace dk::runtime {
namespace {

using V = std::vector<uint32_t>;

TEST(PromptLookupDraft, ContinuesTheLongestMostRecentMatch) {
  // ... 1 2 3 [7 8] ... 2 3 [9 4] ... 1 2 3 | : the 3-gram "1 2 3" wins over "2 3".
  const V context = {1, 2, 3, 7, 8, 5, 2, 3, 9, 4, 6, 1, 2, 3};
  EXPECT_EQ(PromptLookupDraft(context, 2, 3), (V{7, 8}));
  // With n-grams of at most 2, the most recent "2 3" is followed by 9 4.
  EXPECT_EQ(PromptLookupDraft(context, 2, 2), (V{9, 4}));
  // Drafts stop at max_draft and at the end of the context.
  EXPECT_EQ(PromptLookupDraft(context, 1, 3), (V{7}));
  EXPECT_EQ(PromptLookupDraft(V{5, 6, 7, 5, 6}, 4, 3), (V{7, 5}));
}

TEST(PromptLookupDraft, LongerMatchesDraftFurther) {
  // A passage quoted back: 1..9, then its first n tokens. A match of n tokens drafts
  // 2^(n - min_ngram) of what followed, up to max_draft.
  const V passage = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  for (size_t n = 1; n <= 4; ++n) {
    V context = passage;
    context.insert(context.end(), passage.begin(), passage.begin() + n);
    const V draft = PromptLookupDraft(context, 15, 8);
    const size_t want = size_t{1} << (n - 1);
    EXPECT_EQ(draft, V(passage.begin() + n, passage.begin() + n + want)) << "n = " << n;
    EXPECT_EQ(PromptLookupDraft(context, 15, 8, 2).size(), n >= 2 ? size_t{1} << (n - 2) : 0) << "n = " << n;
    EXPECT_EQ(PromptLookupDraft(context, 3, 8).size(), std::min<size_t>(want, 3)) << "n = " << n;
  }
}

TEST(PromptLookupDraft, NoEarlierOccurrenceNoDraft) {
  EXPECT_TRUE(PromptLookupDraft(V{1, 2, 3, 4}, 4, 3).empty());
  EXPECT_TRUE(PromptLookupDraft(V{7}, 4, 3).empty());
  EXPECT_TRUE(PromptLookupDraft(V{}, 4, 3).empty());
}

TEST(PromptLookupDraft, MinNgramLeavesShortMatchesOut) {
  // "... 9 3 | 3": only a 1-gram match; with min_ngram 2 no draft.
  EXPECT_EQ(PromptLookupDraft(V{3, 8, 9, 3}, 2, 3, 1), (V{8}));
  EXPECT_TRUE(PromptLookupDraft(V{3, 8, 9, 3}, 2, 3, 2).empty());
  // A 2-gram match still drafts (one token: the shortest match there is).
  EXPECT_EQ(PromptLookupDraft(V{1, 2, 7, 1, 2}, 2, 3, 2), (V{7}));
}

TEST(PromptLookupDraft, RepeatedTokenDraftsItsContinuation) {
  // "4 4 4": the suffix "4 4" occurred at 0..1, followed by 4.
  EXPECT_EQ(PromptLookupDraft(V{4, 4, 4}, 3, 2), (V{4}));
}

}  // namespace
}  // namespace dk::runtime
