// Normalization of the input text before pre-tokenization (HF tokenizers' `normalizer`),
// for the variants the supported tokenizer.json layouts use:
//   * NFC (Qwen2 / Qwen2.5 / Qwen3): Unicode canonical composition, through ICU (Debian's
//     libicu-dev, Unicode 15.0). HF's NFC (the unicode-normalization-alignments crate) has
//     older tables: it does not know 80 combining marks assigned since (e.g. U+0898,
//     U+1715, U+1AC1, U+1DF6, U+16FF0) and treats them as starters, so text holding one of
//     them next to other marks can normalize differently. Compared on 5.56M strings (every
//     code point alone, after "e", and before/with combining marks): 137 differ, all of
//     them through those 80 code points.
//   * Replace of a literal string (Gemma 3: " " -> "▁"): every non-overlapping occurrence,
//     leftmost first, as HF's Replace with a {"String": ...} pattern.
// A normalizer is a list of such steps applied in order (HF's Sequence); an empty list
// leaves the text as it is.
#ifndef DK_TOKENIZER_NORMALIZER_H_
#define DK_TOKENIZER_NORMALIZER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace dk::tokenizer {

struct NormalizerStep {
  enum class Kind { kNfc, kReplace };
  Kind kind = Kind::kNfc;
  std::string pattern;  // kReplace: the literal replaced; never empty
  std::string content;  // kReplace: its replacement
};

// `text` must be valid UTF-8 (the tokenizer validates its input first).
absl::StatusOr<std::string> Normalize(absl::Span<const NormalizerStep> steps,
                                      absl::string_view text);

// Unicode NFC of valid UTF-8 text.
absl::StatusOr<std::string> NfcNormalize(absl::string_view text);

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_NORMALIZER_H_
