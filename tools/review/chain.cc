#include "tools/review/chain.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dk::review {
namespace {

enum class Tok { kIdent, kString, kOther, kPunct };

struct Token {
  Tok kind;
  std::string text;  // strings: with their quotes, as written
  int line;
};

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Reads a string literal starting at text[i] (a quote); advances i past it.
absl::Status ReadString(const std::string& text, size_t& i, int& line, std::string& out) {
  const int start_line = line;
  const char q = text[i];
  const bool triple = text.compare(i, 3, std::string(3, q)) == 0;
  const size_t open = triple ? 3 : 1;
  const size_t begin = i;
  i += open;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      if (text[i + 1] == '\n') ++line;
      i += 2;
      continue;
    }
    if (c == '\n') {
      if (!triple) break;
      ++line;
    }
    if (c == q && (!triple || text.compare(i, 3, std::string(3, q)) == 0)) {
      i += open;
      out = text.substr(begin, i - begin);
      return absl::OkStatus();
    }
    ++i;
  }
  return absl::InvalidArgumentError(absl::StrCat("line ", start_line, ": unterminated string literal"));
}

absl::StatusOr<std::vector<Token>> Tokenize(const std::string& text) {
  std::vector<Token> tokens;
  int line = 1;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      std::string s;
      const int l = line;
      auto st = ReadString(text, i, line, s);
      if (!st.ok()) return st;
      tokens.push_back({Tok::kString, std::move(s), l});
    } else if (IdentStart(c)) {
      size_t j = i;
      while (j < text.size() && IdentChar(text[j])) ++j;
      std::string word = text.substr(i, j - i);
      // r"..." / b'...': a prefixed string literal.
      if (j < text.size() && (text[j] == '"' || text[j] == '\'') &&
          (word == "r" || word == "b" || word == "rb" || word == "br")) {
        i = j;
        std::string s;
        const int l = line;
        auto st = ReadString(text, i, line, s);
        if (!st.ok()) return st;
        tokens.push_back({Tok::kString, std::move(s), l});
        continue;
      }
      tokens.push_back({Tok::kIdent, std::move(word), line});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < text.size() && (IdentChar(text[j]) || text[j] == '.')) ++j;
      tokens.push_back({Tok::kOther, text.substr(i, j - i), line});
      i = j;
    } else if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      i += 2;  // explicit line continuation
      ++line;
    } else {
      // "==", "!=", "<=", ">=" stay one token so "a == b" is no keyword argument.
      if (i + 1 < text.size() && text[i + 1] == '=' && (c == '=' || c == '!' || c == '<' || c == '>')) {
        tokens.push_back({Tok::kPunct, text.substr(i, 2), line});
        i += 2;
      } else {
        tokens.push_back({Tok::kPunct, std::string(1, c), line});
        ++i;
      }
    }
  }
  return tokens;
}

// The value of a string literal token: quotes removed, simple escapes resolved.
std::string Unquote(const std::string& lit) {
  size_t start = 0;
  bool raw = false;
  while (start < lit.size() && lit[start] != '"' && lit[start] != '\'') {
    if (lit[start] == 'r') raw = true;
    ++start;
  }
  const char q = lit[start];
  const size_t open = lit.compare(start, 3, std::string(3, q)) == 0 && lit.size() - start >= 6 ? 3 : 1;
  const std::string body = lit.substr(start + open, lit.size() - start - 2 * open);
  if (raw) return body;
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '\\' && i + 1 < body.size()) {
      const char e = body[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    } else {
      out += body[i];
    }
  }
  return out;
}

bool IsOpen(const std::string& t) { return t == "(" || t == "[" || t == "{"; }
bool IsClose(const std::string& t) { return t == ")" || t == "]" || t == "}"; }
char Partner(char close) { return close == ')' ? '(' : close == ']' ? '[' : '{'; }

// Source text of tokens[b, e) without whitespace (a space kept between words).
std::string Join(const std::vector<Token>& tokens, size_t b, size_t e) {
  std::string out;
  for (size_t i = b; i < e; ++i) {
    if (i > b && tokens[i].kind != Tok::kPunct && tokens[i - 1].kind != Tok::kPunct) out += ' ';
    out += tokens[i].text;
  }
  return out;
}

// One argument tokens[b, e) of a call: `name = value` fills rule.attrs / strings.
void AddArgument(const std::vector<Token>& tokens, size_t b, size_t e, Rule& rule) {
  if (e - b < 3 || tokens[b].kind != Tok::kIdent || tokens[b + 1].text != "=") return;
  const std::string& name = tokens[b].text;
  rule.attrs[name] = Join(tokens, b + 2, e);
  std::vector<std::string> strings;
  if (e - b == 3 && tokens[b + 2].kind == Tok::kString) {
    strings.push_back(Unquote(tokens[b + 2].text));
  } else if (tokens[b + 2].text == "[" && tokens[e - 1].text == "]") {
    for (size_t i = b + 3; i + 1 < e; ++i) {
      if (tokens[i].kind == Tok::kString) {
        strings.push_back(Unquote(tokens[i].text));
      } else if (tokens[i].text != ",") {
        return;  // not a plain list of strings
      }
    }
  } else {
    return;
  }
  rule.strings[name] = std::move(strings);
}

std::string Describe(const Stage& s) {
  if (s.src.empty()) return absl::StrCat(s.name, " = ", s.kind, "()");
  return absl::StrCat(s.name, " = ", s.kind, "(src = \"", s.src, "\")");
}

std::string OrNone(const std::string& s) { return s.empty() ? "(none)" : absl::StrCat("\"", s, "\""); }

}  // namespace

absl::StatusOr<std::vector<Rule>> ParseBuild(const std::string& text) {
  auto tokens_or = Tokenize(text);
  if (!tokens_or.ok()) return tokens_or.status();
  const std::vector<Token>& tokens = *tokens_or;
  std::vector<Rule> rules;
  std::vector<const Token*> stack;  // open brackets
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (stack.empty() && t.kind == Tok::kIdent && i + 1 < tokens.size() && tokens[i + 1].text == "(" &&
        (i == 0 || tokens[i - 1].text != ".")) {
      // A top-level call: split its arguments at depth-1 commas.
      Rule rule;
      rule.kind = t.text;
      rule.line = t.line;
      std::vector<char> depth = {'('};
      size_t arg_begin = i + 2;
      size_t j = i + 2;
      for (; j < tokens.size() && !depth.empty(); ++j) {
        const std::string& x = tokens[j].text;
        if (tokens[j].kind != Tok::kPunct) continue;
        if (IsOpen(x)) {
          depth.push_back(x[0]);
        } else if (IsClose(x)) {
          if (depth.back() != Partner(x[0])) {
            return absl::InvalidArgumentError(absl::StrCat(
                "line ", tokens[j].line, ": '", x, "' does not close '", std::string(1, depth.back()), "'"));
          }
          depth.pop_back();
          if (depth.empty()) AddArgument(tokens, arg_begin, j, rule);
        } else if (x == "," && depth.size() == 1) {
          AddArgument(tokens, arg_begin, j, rule);
          arg_begin = j + 1;
        }
      }
      if (!depth.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", t.line, ": the call ", t.text, "( is never closed"));
      }
      rules.push_back(std::move(rule));
      i = j - 1;
      continue;
    }
    if (t.kind != Tok::kPunct) continue;
    if (IsOpen(t.text)) {
      stack.push_back(&t);
    } else if (IsClose(t.text)) {
      if (stack.empty() || stack.back()->text[0] != Partner(t.text[0])) {
        return absl::InvalidArgumentError(absl::StrCat("line ", t.line, ": unbalanced '", t.text, "'"));
      }
      stack.pop_back();
    }
  }
  if (!stack.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", stack.back()->line, ": '", stack.back()->text, "' is never closed"));
  }
  return rules;
}

std::string NormalizeLabel(const std::string& label, const std::string& model) {
  const std::string pkg = absl::StrCat("//models/", model, ":");
  if (label.rfind(pkg, 0) == 0) return label.substr(pkg.size() - 1);
  if (label.find(':') == std::string::npos && label.find('/') == std::string::npos && !label.empty()) {
    return absl::StrCat(":", label);
  }
  return label;
}

const Stage* Chain::Find(const std::string& name) const {
  for (const Stage& s : stages) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<std::string> Chain::Path() const {
  std::vector<std::string> path;
  std::set<std::string> seen;
  const Stage* s = Find(final_stage);
  while (s != nullptr && seen.insert(s->name).second) {
    path.push_back(s->name);
    s = s->src.empty() ? nullptr : Find(s->src);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

absl::StatusOr<Chain> ParseChain(const std::string& build_text, const std::string& model) {
  auto rules = ParseBuild(build_text);
  if (!rules.ok()) return rules.status();
  Chain chain;
  for (const Rule& r : *rules) {
    if (r.kind != "decode_elf" && r.attrs.count("src") == 0) continue;
    auto name = r.strings.find("name");
    if (name == r.strings.end() || name->second.size() != 1 || r.attrs.at("name")[0] == '[') {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", r.line, ": a chain rule ", r.kind, "(...) without a string name"));
    }
    Stage s;
    s.name = NormalizeLabel(name->second[0], model);
    s.kind = r.kind;
    if (r.attrs.count("src")) {
      auto src = r.strings.find("src");
      if (src == r.strings.end() || src->second.size() != 1 || r.attrs.at("src")[0] == '[') {
        return absl::InvalidArgumentError(absl::StrCat("line ", r.line, ": the src of ", s.name,
                                                       " is not a string label: ", r.attrs.at("src")));
      }
      s.src = NormalizeLabel(src->second[0], model);
    }
    for (const auto& [k, v] : r.attrs) {
      if (k != "name" && k != "src") s.other[k] = v;
    }
    if (chain.Find(s.name) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", r.line, ": a second chain rule named ", s.name));
    }
    chain.stages.push_back(std::move(s));
  }
  for (const char* kind : {"decode_profile", "verify_chain"}) {
    for (const Rule& r : *rules) {
      if (r.kind != kind || !chain.final_stage.empty()) continue;
      auto final = r.strings.find("final");
      auto stages = r.strings.find("stages");
      if (final != r.strings.end() && final->second.size() == 1) {
        chain.final_stage = NormalizeLabel(final->second[0], model);
        chain.final_from = absl::StrCat(kind, " final, line ", r.line);
      } else if (stages != r.strings.end() && !stages->second.empty()) {
        chain.final_stage = NormalizeLabel(stages->second.back(), model);
        chain.final_from = absl::StrCat("last of ", kind, " stages, line ", r.line);
      }
    }
  }
  if (chain.final_stage.empty() && !chain.stages.empty()) {
    std::set<std::string> srcs;
    for (const Stage& s : chain.stages) srcs.insert(s.src);
    std::vector<std::string> ends;
    for (const Stage& s : chain.stages) {
      if (!srcs.count(s.name)) ends.push_back(s.name);
    }
    if (ends.empty()) {
      return absl::InvalidArgumentError("the chain has no end (its src attributes form a cycle)");
    }
    chain.final_stage = ends.back();
    chain.final_from = ends.size() == 1
                           ? "the chain's end"
                           : absl::StrCat("the last of the chain's ends ", absl::StrJoin(ends, ", "));
  }
  if (!chain.final_stage.empty() && chain.Find(chain.final_stage) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the final stage ", chain.final_stage, " (",
                                                   chain.final_from, ") is no rule of the chain"));
  }
  return chain;
}

std::vector<std::string> ChainChanges(const Chain& base, const Chain& work) {
  std::vector<std::string> out;
  for (const Stage& s : base.stages) {
    if (work.Find(s.name) == nullptr) out.push_back(absl::StrCat("- removed: ", Describe(s)));
  }
  for (const Stage& s : work.stages) {
    if (base.Find(s.name) == nullptr) out.push_back(absl::StrCat("+ added: ", Describe(s)));
  }
  for (const Stage& w : work.stages) {
    const Stage* b = base.Find(w.name);
    if (b == nullptr) continue;
    if (b->kind != w.kind)
      out.push_back(absl::StrCat("~ kind changed: ", w.name, " ", b->kind, " -> ", w.kind));
    if (b->src != w.src) {
      out.push_back(absl::StrCat("~ re-pointed: ", w.name, " src ", OrNone(b->src), " -> ", OrNone(w.src)));
    }
    std::set<std::string> keys;
    for (const auto& [k, v] : b->other) keys.insert(k);
    for (const auto& [k, v] : w.other) keys.insert(k);
    for (const std::string& k : keys) {
      auto bi = b->other.find(k);
      auto wi = w.other.find(k);
      const std::string bv = bi == b->other.end() ? "(unset)" : bi->second;
      const std::string wv = wi == w.other.end() ? "(unset)" : wi->second;
      if (bv != wv) out.push_back(absl::StrCat("~ attribute changed: ", w.name, " ", k, " ", bv, " -> ", wv));
    }
  }
  if (base.final_stage != work.final_stage) {
    out.push_back(absl::StrCat("~ final stage: ", base.final_stage.empty() ? "(none)" : base.final_stage,
                               " -> ", work.final_stage.empty() ? "(none)" : work.final_stage));
  }
  return out;
}

}  // namespace dk::review
