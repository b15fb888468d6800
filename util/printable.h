// Names read from a file (tensor names, metadata keys, tokens) as error messages
// show them: a corrupt name's control characters and stray bytes would otherwise
// reach the terminal as they are. Valid UTF-8 text keeps its characters (a
// tokenizer's "Ġthe" stays readable); control characters, DEL and backslash are
// written as C escapes; text that is not valid UTF-8 is hex-escaped byte by byte.
// Thread-safety: stateless function.
#ifndef DK_UTIL_PRINTABLE_H_
#define DK_UTIL_PRINTABLE_H_

#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace dk {

inline bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

inline std::string Printable(absl::string_view s) {
  if (!IsValidUtf8(s)) return absl::CHexEscape(s);
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace dk

#endif  // DK_UTIL_PRINTABLE_H_
