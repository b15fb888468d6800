#include "tokenizer/utf8.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace dk::tokenizer {
namespace {

struct ByteTables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int, 0x144> cp_to_byte{};  // every mapped code point is < U+0144
  ByteTables() {
    cp_to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      byte_to_cp[b] = printable ? b : 256 + n++;
      cp_to_byte[byte_to_cp[b]] = b;
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables* t = new ByteTables();
  return *t;
}

}  // namespace

Utf8Step NextUtf8(absl::string_view s, size_t* length) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  const uint8_t b0 = p[0];
  if (b0 < 0x80) {
    *length = 1;
    return Utf8Step::kValid;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *length = 1;
    return Utf8Step::kInvalid;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= n) {
      *length = i;
      return Utf8Step::kIncomplete;
    }
    const uint8_t b = p[i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *length = i;
      return Utf8Step::kInvalid;
    }
  }
  *length = need;
  return Utf8Step::kValid;
}

absl::Status ValidateUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path.
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    if (NextUtf8(s.substr(i), &len) != Utf8Step::kValid) {
      return absl::InvalidArgumentError(
          absl::StrCat("input is not valid UTF-8: ill-formed sequence at byte offset ", i));
    }
    i += len;
  }
  return absl::OkStatus();
}

std::string Utf8Lossy(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    if (NextUtf8(s.substr(i), &len) == Utf8Step::kValid) {
      out.append(s.data() + i, len);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += len;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t ByteToUnicode(uint8_t b) { return Tables().byte_to_cp[b]; }

int UnicodeToByte(uint32_t cp) {
  return cp < Tables().cp_to_byte.size() ? Tables().cp_to_byte[cp] : -1;
}

uint32_t DecodeUtf8(absl::string_view s, size_t* length) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  if (p[0] < 0x80) {
    *length = 1;
    return p[0];
  }
  if (p[0] < 0xE0) {
    *length = 2;
    return ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (p[0] < 0xF0) {
    *length = 3;
    return ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *length = 4;
  return ((p[0] & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

}  // namespace dk::tokenizer
