// UTF-8 helpers shared by the tokenizer: validation, lossy repair (the way HF tokenizers'
// decode does it), and the GPT-2 byte <-> unicode alphabet used by byte-level BPE.
#ifndef DK_TOKENIZER_UTF8_H_
#define DK_TOKENIZER_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dk::tokenizer {

enum class Utf8Step {
  kValid,       // a complete, well-formed character of `*length` bytes
  kInvalid,     // `*length` bytes form a maximal ill-formed subpart: one U+FFFD
  kIncomplete,  // the input ends inside a character that could still be completed
};

// Classifies the sequence starting at s[0] (s non-empty), following Unicode's
// "maximal subpart" rule (as Rust's String::from_utf8_lossy does).
Utf8Step NextUtf8(absl::string_view s, size_t* length);

// OK, or InvalidArgument naming the byte offset of the first ill-formed sequence.
absl::Status ValidateUtf8(absl::string_view s);

// Replaces each maximal ill-formed subpart (and a truncated tail) by U+FFFD.
std::string Utf8Lossy(absl::string_view s);

// Appends the UTF-8 encoding of `cp`.
void AppendUtf8(uint32_t cp, std::string* out);

// GPT-2's bytes_to_unicode(): printable bytes map to themselves, the rest to U+0100...
uint32_t ByteToUnicode(uint8_t b);
// The inverse; -1 when `cp` is not in the alphabet.
int UnicodeToByte(uint32_t cp);

// Decodes one valid UTF-8 character at s[0] (caller guarantees validity).
uint32_t DecodeUtf8(absl::string_view s, size_t* length);

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_UTF8_H_
