// Pre-tokenization: split text into the pieces that BPE encodes one by one.
//
// HF tokenizers (and llama.cpp) describe pre-tokenizers as Oniguruma / PCRE-style regexes
// applied with "isolated" split behaviour: every match is a piece, and so is every gap
// between matches. We run them on RE2 (a real Unicode regex library, from Debian), after a
// small translation:
//
//  * `\s` / `\S`: in Oniguruma they are Unicode White_Space; in RE2 only ASCII. They are
//    rewritten to an explicit class: U+0009-U+000D, U+0020, U+0085, U+00A0, U+1680,
//    U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
//  * RE2 has no lookahead. The GPT-2 / Llama 3 patterns end in `\s+(?!\S)|\s+` ("a
//    whitespace run, but leave its last character to the next piece when a non-space
//    follows"). That tail is rewritten to one capturing group `(\s+)`, and after a match of
//    that group we apply the lookahead by hand: if the run is longer than one character and
//    a character follows it (necessarily a non-space, since the run is greedy), the run's
//    last character is given back. That is exactly what backtracking into `\s+(?!\S)`
//    yields; a one-character run falls through to the plain `\s+`, which we keep. A lone
//    `\s+(?!\S)` (without `|\s+`) gets the same treatment: its unmatched single space
//    becomes a gap piece, which isolated splitting emits anyway.
//  * Other capturing groups become non-capturing. Any other lookaround, atomic group or
//    backreference is refused (Unimplemented) rather than silently mistranslated.
//
// A split is "isolated" (every match a piece) or, as HF's MergedWithPrevious (Gemma's
// Split(" ")), each match is appended to the piece before it, unless that piece is itself
// a match or there is none.
#ifndef DK_TOKENIZER_PRE_TOKENIZER_H_
#define DK_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "re2/re2.h"

namespace dk::tokenizer {

// GPT-2's pattern: HF's ByteLevel(use_regex=true), llama.cpp "gpt2".
inline constexpr absl::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's pattern (tokenizer.json Split, llama.cpp "llama-bpe").
inline constexpr absl::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// HF Digits(individual_digits=true / false): Rust's char::is_numeric is \p{N}.
inline constexpr absl::string_view kDigitsIndividualPattern = R"(\p{N})";
inline constexpr absl::string_view kDigitsPattern = R"(\p{N}+)";

// HF Split behaviours that are supported.
enum class SplitBehavior { kIsolated, kMergedWithPrevious };

struct TranslatedRegex {
  std::string re2_pattern;
  bool whitespace_lookahead = false;  // group 1 is the rewritten `\s+(?!\S)` tail
};

// Translates an Oniguruma/PCRE pre-tokenizer pattern to RE2 syntax (see above).
absl::StatusOr<TranslatedRegex> TranslateRegex(absl::string_view pattern);

// A sequence of isolated regex splits, applied in order (each to every piece of the last).
class PreTokenizer {
 public:
  // `behaviors` parallels `patterns`; a missing entry is kIsolated.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(
      const std::vector<std::string>& patterns,
      const std::vector<SplitBehavior>& behaviors = {});

  // Appends the pieces of `text` (views into it) to `pieces`. Concatenated, the pieces are
  // `text`; no piece is empty.
  void Split(absl::string_view text, std::vector<absl::string_view>* pieces) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Step {
    std::unique_ptr<RE2> re;
    bool whitespace_lookahead = false;
    SplitBehavior behavior = SplitBehavior::kIsolated;
  };
  void SplitOne(const Step& step, absl::string_view text,
                std::vector<absl::string_view>* out) const;

  std::vector<std::string> patterns_;
  std::vector<Step> steps_;
};

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_PRE_TOKENIZER_H_
