// User stop strings over streamed text: generation stops where the decoded text first
// contains one of them, and the text shown before that never includes any part of it.
//
// Push takes each piece of decoded text (e.g. StreamingDecoder's output) and returns what
// is safe to show now: everything except the longest tail that is still the beginning of
// some stop string, which is held back until the next piece settles it. Matching is on
// bytes; with valid UTF-8 text and stops (what StreamingDecoder emits) the held-back tail
// and the cut before a stop fall between characters.
//
// When several stop strings occur, the one that completes first in the text wins (stops
// "abc" and "b" over "xabcd": "b", and the text shown is "xa"); of two completing at the
// same byte, the longer (stops "bc" and "abc": "abc", shown "x"). This is what a reader of the stream sees first, so the result does
// not depend on how the text was split into pieces.
//
// Not thread-safe; one instance per generation (Finish resets it for the next).
#ifndef DK_TOKENIZER_STOP_STRINGS_H_
#define DK_TOKENIZER_STOP_STRINGS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dk::tokenizer {

class StopStrings {
 public:
  // Empty strings are ignored (they would stop before anything was shown).
  explicit StopStrings(std::vector<std::string> stops);

  // Appends newly decoded text; returns the text now safe to show: everything except a
  // tail that could still be the start of a stop string. When a stop string completes,
  // *stopped is set and the returned text ends just before it (the stop string and anything
  // after it are dropped); later calls return "" with *stopped set.
  std::string Push(absl::string_view text, bool* stopped);
  // At the end of generation without a stop: the held-back tail ("" after a stop). Resets
  // the matcher for the next generation.
  std::string Finish();

 private:
  // The length of the longest suffix of held_ that is a proper prefix of a stop string.
  size_t HeldTailLength() const;

  std::vector<std::string> stops_;
  std::string held_;  // text received but not yet returned
  bool stopped_ = false;
};

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_STOP_STRINGS_H_
