#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace dk::tokenizer {
namespace {

// Oniguruma's Unicode \s, as the body of a character class.
constexpr absl::string_view kWhitespaceItems =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
constexpr char kLookaheadSentinel = '\x01';

size_t LastCharStart(absl::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

size_t CharLength(absl::string_view s, size_t i) {
  const uint8_t b = static_cast<uint8_t>(s[i]);
  size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  return std::min(n, s.size() - i);
}

// The escape at p[i] ('\\'), translated into `out`; `i` left on its last character.
absl::Status TranslateEscape(const std::string& p, size_t& i, bool in_class,
                             absl::string_view pattern, std::string& out) {
  if (i + 1 >= p.size()) {
    return absl::InvalidArgumentError(absl::StrCat("regex ends with a backslash: ", pattern));
  }
  const char n = p[++i];
  if (n == 's') {
    if (in_class) {
      absl::StrAppend(&out, kWhitespaceItems);
    } else {
      absl::StrAppend(&out, "[", kWhitespaceItems, "]");
    }
  } else if (n == 'S') {
    if (in_class) {
      return absl::UnimplementedError(
          absl::StrCat("\\S inside a character class is not supported: ", pattern));
    }
    absl::StrAppend(&out, "[^", kWhitespaceItems, "]");
  } else if (n >= '1' && n <= '9' && !in_class) {
    return absl::UnimplementedError(
        absl::StrCat("backreferences are not supported by RE2: ", pattern));
  } else if ((n == 'p' || n == 'P') && i + 1 < p.size() && p[i + 1] == '{') {
    const size_t close = p.find('}', i + 1);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unterminated \\p{ in regex: ", pattern));
    }
    out.push_back('\\');
    out.append(p, i, close + 1 - i);
    i = close;
  } else {
    out.push_back('\\');
    out.push_back(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TranslatedRegex> TranslateRegex(absl::string_view pattern) {
  TranslatedRegex result;
  if (pattern.find(kLookaheadSentinel) != absl::string_view::npos) {
    return absl::InvalidArgumentError("pre-tokenizer regex contains a \\x01 byte");
  }
  std::string p(pattern);
  const std::string sentinel(1, kLookaheadSentinel);
  int replaced = absl::StrReplaceAll({{R"(\s+(?!\S)|\s+)", sentinel}}, &p);
  if (replaced == 0) replaced = absl::StrReplaceAll({{R"(\s+(?!\S))", sentinel}}, &p);
  if (replaced > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "pre-tokenizer regex uses \\s+(?!\\S) more than once: ", pattern));
  }
  result.whitespace_lookahead = replaced == 1;

  std::string& out = result.re2_pattern;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == kLookaheadSentinel) {
      absl::StrAppend(&out, "([", kWhitespaceItems, "]+)");
      continue;
    }
    if (c == '\\') {
      if (absl::Status st = TranslateEscape(p, i, in_class, pattern, out); !st.ok()) return st;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out.push_back(c);
      continue;
    }
    if (c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (c == '(') {
      if (i + 1 < p.size() && p[i + 1] == '?') {
        // Allowed: (?: and flag groups such as (?i: or (?i).
        size_t j = i + 2;
        while (j < p.size() && absl::string_view("imsU-").find(p[j]) != absl::string_view::npos) {
          ++j;
        }
        if (j >= p.size() || (p[j] != ':' && p[j] != ')')) {
          return absl::UnimplementedError(absl::StrCat(
              "regex construct '", p.substr(i, std::min<size_t>(4, p.size() - i)),
              "' (lookaround, atomic or named group) is not supported by RE2: ", pattern));
        }
        out.push_back(c);
        continue;
      }
      out.append("(?:");
      continue;
    }
    if ((c == '+' || c == '*' || c == '?') && i + 1 < p.size() && p[i + 1] == '+') {
      return absl::UnimplementedError(
          absl::StrCat("possessive quantifiers are not supported by RE2: ", pattern));
    }
    out.push_back(c);
  }
  return result;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(
    const std::vector<std::string>& patterns, const std::vector<SplitBehavior>& behaviors) {
  if (behaviors.size() > patterns.size()) {
    return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer: ", behaviors.size(),
                                                   " split behaviours for ", patterns.size(),
                                                   " patterns"));
  }
  auto pt = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  pt->patterns_ = patterns;
  for (size_t index = 0; index < patterns.size(); ++index) {
    const std::string& pattern = patterns[index];
    absl::StatusOr<TranslatedRegex> t = TranslateRegex(pattern);
    if (!t.ok()) return t.status();
    RE2::Options options;
    options.set_encoding(RE2::Options::EncodingUTF8);
    options.set_log_errors(false);
    options.set_max_mem(64 << 20);
    Step step;
    step.re = std::make_unique<RE2>(t->re2_pattern, options);
    if (!step.re->ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pre-tokenizer regex does not compile (", step.re->error(), "): ", pattern,
          " (translated: ", t->re2_pattern, ")"));
    }
    step.whitespace_lookahead = t->whitespace_lookahead;
    if (index < behaviors.size()) step.behavior = behaviors[index];
    pt->steps_.push_back(std::move(step));
  }
  return pt;
}

void PreTokenizer::SplitOne(const Step& step, absl::string_view text,
                            std::vector<absl::string_view>* out) const {
  re2::StringPiece groups[2];
  const re2::StringPiece subject(text.data(), text.size());
  const int ngroups = step.whitespace_lookahead ? 2 : 1;
  const bool merge = step.behavior == SplitBehavior::kMergedWithPrevious;
  const size_t first_out = out->size();
  bool previous_was_match = false;
  // A match: its own piece, or (MergedWithPrevious) glued to the gap before it.
  auto add_match = [&](size_t start, size_t end) {
    if (merge && !previous_was_match && out->size() > first_out) {
      absl::string_view& prev = out->back();
      prev = absl::string_view(prev.data(), end - (prev.data() - text.data()));
    } else {
      out->push_back(text.substr(start, end - start));
    }
    previous_was_match = true;
  };
  size_t pos = 0, last = 0;
  while (pos < text.size()) {
    if (!step.re->Match(subject, pos, text.size(), RE2::UNANCHORED, groups, ngroups)) break;
    const size_t start = groups[0].data() - text.data();
    size_t end = start + groups[0].size();
    if (end == start) {  // empty match: not a piece; move on by one character
      pos = start + (start < text.size() ? CharLength(text, start) : 1);
      continue;
    }
    if (step.whitespace_lookahead && groups[1].data() != nullptr && end < text.size()) {
      // `\s+(?!\S)`: the greedy run is followed by a non-space; give its last char back.
      const size_t back = LastCharStart(absl::string_view(groups[0].data(), groups[0].size()));
      if (back > 0) end = start + back;
    }
    if (start > last) {
      out->push_back(text.substr(last, start - last));
      previous_was_match = false;
    }
    add_match(start, end);
    last = pos = end;
  }
  if (last < text.size()) out->push_back(text.substr(last));
}

void PreTokenizer::Split(absl::string_view text, std::vector<absl::string_view>* pieces) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    pieces->push_back(text);
    return;
  }
  if (steps_.size() == 1) {
    SplitOne(steps_[0], text, pieces);
    return;
  }
  std::vector<absl::string_view> current{text}, next;
  for (size_t s = 0; s < steps_.size(); ++s) {
    std::vector<absl::string_view>* dst = s + 1 == steps_.size() ? pieces : &next;
    if (dst == &next) next.clear();
    for (absl::string_view piece : current) SplitOne(steps_[s], piece, dst);
    if (dst == &next) std::swap(current, next);
  }
}

}  // namespace dk::tokenizer
