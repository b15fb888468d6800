// Prints the token ids and pieces of a text.
//
//   bazel run //tools/tokenize -- --tokenizer <model.gguf | tokenizer.json | checkpoint dir> "text"
//   bazel run //tools/tokenize -- --tokenizer ... --decode 19556 905
//
// --tokenizer is the flag every tool uses for the tokenizer; --model is its old name,
// still accepted. Relative paths are resolved against the directory `bazel run` was
// started from. Exit status (util/exit_codes.h): 0 done, 1 bad input, 2 usage error.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "util/user_path.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/cli.h"
#include "util/exit_codes.h"

ABSL_FLAG(std::string, tokenizer, "",
          "A GGUF file, an HF tokenizer.json, or a checkpoint directory holding tokenizer.json.");
ABSL_FLAG(std::string, model, "", "The old name of --tokenizer (still accepted).");
ABSL_FLAG(bool, add_special_tokens, true, "Add BOS/EOS the way the model's HF tokenizer does.");
ABSL_FLAG(bool, decode, false, "Treat the arguments as token ids and print the decoded text.");

namespace {

// Escapes control characters and bytes that are not (yet) valid UTF-8 (a token may hold
// part of a character), so that pieces stay printable and on one line.
std::string Printable(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    if (dk::tokenizer::NextUtf8(s.substr(i), &len) != dk::tokenizer::Utf8Step::kValid) {
      for (size_t j = 0; j < len; ++j) {
        absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(s[i + j]), absl::kZeroPad2));
      }
      i += len;
      continue;
    }
    if (len > 1) {
      out.append(s.data() + i, len);
      i += len;
      continue;
    }
    const char c = s[i++];
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

// The arguments as token ids, decoded to text.
int Decode(const dk::tokenizer::Tokenizer& tok, const std::vector<char*>& args) {
  std::vector<int32_t> ids;
  for (size_t i = 1; i < args.size(); ++i) {
    int32_t id;
    if (!absl::SimpleAtoi(args[i], &id)) {
      std::cerr << "error: '" << args[i] << "' is not a token id\n";
      return dk::kExitUsage;
    }
    ids.push_back(id);
  }
  auto text = tok.Decode(ids);
  if (!text.ok()) {
    std::cerr << "error: " << text.status() << "\n";
    return dk::kExitFailure;
  }
  std::cout << *text << "\n";
  return dk::kExitOk;
}

// Each argument's ids and pieces.
int Encode(const dk::tokenizer::Tokenizer& tok, const std::vector<char*>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    auto ids = tok.Encode(args[i], absl::GetFlag(FLAGS_add_special_tokens));
    if (!ids.ok()) {
      std::cerr << "error: " << ids.status() << "\n";
      return dk::kExitFailure;
    }
    std::cout << "text:   \"" << Printable(args[i]) << "\"\n";
    std::cout << "ids:    [" << absl::StrJoin(*ids, ", ") << "]  (" << ids->size() << " tokens)\n";
    for (int32_t id : *ids) {
      const absl::string_view token = *tok.TokenString(id);
      const absl::string_view bytes = *tok.TokenBytes(id);
      // Escaped too: a SentencePiece vocabulary (Gemma) has tokens such as "\n" and "\t".
      std::cout << "  " << id << "\t" << Printable(token) << "\t\"" << Printable(bytes) << "\"\n";
    }
  }
  return dk::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string path =
      absl::GetFlag(FLAGS_tokenizer).empty() ? absl::GetFlag(FLAGS_model) : absl::GetFlag(FLAGS_tokenizer);
  if (path.empty() || args.size() < 2) {
    if (path.empty()) std::cerr << "tokenize: --tokenizer is required\n";
    std::cerr << "usage: tokenize --tokenizer <model.gguf | tokenizer.json | checkpoint dir> "
                 "\"text\" [\"more text\" ...]\n"
                 "       tokenize --tokenizer <...> --decode ID [ID ...]\n";
    return dk::kExitUsage;
  }
  const std::string flag = absl::GetFlag(FLAGS_tokenizer).empty() ? "model" : "tokenizer";
  if (absl::Status s = dk::cli::RequirePath(flag, dk::UserPath(path), dk::cli::PathKind::kFileOrDirectory);
      !s.ok()) {
    return dk::ExitWithError("tokenize", s);
  }
  auto tok = dk::tokenizer::Tokenizer::Load(dk::UserPath(path));
  if (!tok.ok()) return dk::ExitWithError("tokenize", tok.status());
  return absl::GetFlag(FLAGS_decode) ? Decode(**tok, args) : Encode(**tok, args);
}
