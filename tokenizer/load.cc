// Tokenizer loaders: HF tokenizer.json, and Load, which tells it from a GGUF file
// (whose tokenizer.ggml.* metadata load_gguf.cc reads).
#include <sys/stat.h>

#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "tokenizer/checkpoint_files.h"
#include "tokenizer/end_of_generation.h"
#include "tokenizer/tokenizer.h"
#include "util/read_file.h"

namespace dk::tokenizer {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxVocab = int64_t{1} << 24;

absl::Status JsonError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", what));
}
absl::Status JsonUnsupported(absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat("tokenizer.json: ", what));
}

// Field access that never throws.
const Json* Field(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

absl::StatusOr<std::string> StringField(const Json& obj, const char* key, absl::string_view ctx) {
  const Json* f = Field(obj, key);
  if (f == nullptr) return JsonError(absl::StrCat(ctx, ": missing field '", key, "'"));
  if (!f->is_string()) return JsonError(absl::StrCat(ctx, ": field '", key, "' is not a string"));
  return f->get<std::string>();
}

bool BoolField(const Json& obj, const char* key, bool default_value) {
  const Json* f = Field(obj, key);
  return f != nullptr && f->is_boolean() ? f->get<bool>() : default_value;
}

absl::StatusOr<int32_t> IdValue(const Json& v, absl::string_view ctx) {
  if (!v.is_number_integer()) return JsonError(absl::StrCat(ctx, " is not an integer id"));
  const int64_t id = v.get<int64_t>();
  if (id < 0 || id >= kMaxVocab) {
    return JsonError(absl::StrCat(ctx, " = ", id, " is out of range [0, ", kMaxVocab, ")"));
  }
  return static_cast<int32_t>(id);
}

std::string EscapeForRegex(absl::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        !(static_cast<unsigned char>(c) & 0x80)) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

// `*byte_level` is set when a ByteLevel pre-tokenizer is part of `pt`.
absl::Status AddPreTokenizer(const Json& pt, TokenizerSpec* spec, bool* byte_level) {
  if (pt.is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type = StringField(pt, "type", "pre_tokenizer");
  if (!type.ok()) return type.status();
  if (*type == "Sequence") {
    const Json* list = Field(pt, "pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return JsonError("pre_tokenizer Sequence: 'pretokenizers' is not an array");
    }
    for (const Json& child : *list) {
      if (absl::Status s = AddPreTokenizer(child, spec, byte_level); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (*type == "ByteLevel") {
    *byte_level = true;
    if (BoolField(pt, "use_regex", true)) {
      spec->pre_tokenizer_patterns.emplace_back(kGpt2Pattern);
    }
    spec->add_prefix_space = BoolField(pt, "add_prefix_space", false);
    return absl::OkStatus();
  }
  if (*type == "Digits") {
    spec->pre_tokenizer_patterns.emplace_back(BoolField(pt, "individual_digits", false)
                                                  ? kDigitsIndividualPattern
                                                  : kDigitsPattern);
    return absl::OkStatus();
  }
  if (*type == "Split") {
    const Json* pattern = Field(pt, "pattern");
    if (pattern == nullptr || !pattern->is_object()) {
      return JsonError("pre_tokenizer Split: missing 'pattern' object");
    }
    std::string regex;
    if (const Json* r = Field(*pattern, "Regex"); r != nullptr && r->is_string()) {
      regex = r->get<std::string>();
    } else if (const Json* s = Field(*pattern, "String"); s != nullptr && s->is_string()) {
      regex = EscapeForRegex(s->get<std::string>());
    } else {
      return JsonError("pre_tokenizer Split: pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
    absl::StatusOr<std::string> behavior = StringField(pt, "behavior", "pre_tokenizer Split");
    if (!behavior.ok()) return behavior.status();
    const std::string lower = absl::AsciiStrToLower(*behavior);
    SplitBehavior split_behavior = SplitBehavior::kIsolated;
    if (lower == "mergedwithprevious" || lower == "merged_with_previous") {
      split_behavior = SplitBehavior::kMergedWithPrevious;
    } else if (lower != "isolated" || BoolField(pt, "invert", false)) {
      return JsonUnsupported(absl::StrCat("pre_tokenizer Split with behavior '", *behavior,
                                          "' / invert is not supported (only Isolated and ",
                                          "MergedWithPrevious, invert false)"));
    }
    if (BoolField(pt, "invert", false)) {
      return JsonUnsupported("pre_tokenizer Split with invert true is not supported");
    }
    spec->pre_tokenizer_behaviors.resize(spec->pre_tokenizer_patterns.size(),
                                         SplitBehavior::kIsolated);
    spec->pre_tokenizer_patterns.push_back(std::move(regex));
    spec->pre_tokenizer_behaviors.push_back(split_behavior);
    return absl::OkStatus();
  }
  return JsonUnsupported(absl::StrCat("pre_tokenizer type '", *type,
                                      "' is not supported (ByteLevel, Split, Digits, Sequence)"));
}

// A literal {"String": ...} pattern of a Replace normalizer or decoder.
absl::StatusOr<std::string> ReplacePattern(const Json& obj, absl::string_view ctx) {
  const Json* pattern = Field(obj, "pattern");
  if (pattern == nullptr || !pattern->is_object()) {
    return JsonError(absl::StrCat(ctx, " Replace: missing 'pattern' object"));
  }
  const Json* literal = Field(*pattern, "String");
  if (literal == nullptr || !literal->is_string()) {
    if (Field(*pattern, "Regex") != nullptr) {
      return JsonUnsupported(absl::StrCat(ctx, " Replace with a {\"Regex\": ...} pattern is ",
                                          "not supported (only {\"String\": ...})"));
    }
    return JsonError(absl::StrCat(ctx, " Replace: pattern is not {\"String\": ...}"));
  }
  if (literal->get<std::string>().empty()) {
    return JsonError(absl::StrCat(ctx, " Replace: the pattern is empty"));
  }
  return literal->get<std::string>();
}

absl::Status AddNormalizer(const Json& norm, TokenizerSpec* spec) {
  if (norm.is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type = StringField(norm, "type", "normalizer");
  if (!type.ok()) return type.status();
  if (*type == "Sequence") {
    const Json* list = Field(norm, "normalizers");
    if (list == nullptr || !list->is_array()) {
      return JsonError("normalizer Sequence: 'normalizers' is not an array");
    }
    for (const Json& child : *list) {
      if (absl::Status s = AddNormalizer(child, spec); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (*type == "NFC") {
    spec->normalizer.push_back({NormalizerStep::Kind::kNfc, "", ""});
    return absl::OkStatus();
  }
  if (*type == "Replace") {
    absl::StatusOr<std::string> pattern = ReplacePattern(norm, "normalizer");
    if (!pattern.ok()) return pattern.status();
    absl::StatusOr<std::string> content = StringField(norm, "content", "normalizer Replace");
    if (!content.ok()) return content.status();
    spec->normalizer.push_back({NormalizerStep::Kind::kReplace, *pattern, *content});
    return absl::OkStatus();
  }
  return JsonUnsupported(absl::StrCat("normalizer type '", *type,
                                      "' is not supported (NFC, Replace, Sequence)"));
}

// The decoder must match the model: ByteLevel for a byte-level tokenizer, else a Sequence
// of Replace steps, then ByteFallback, then Fuse (each optional; Gemma's and Llama 2's
// shape), whose per-token steps are exact when applied token by token.
absl::Status AddDecoder(const Json& decoder, TokenizerSpec* spec) {
  if (decoder.is_null()) return JsonUnsupported("a null decoder is not supported");
  absl::StatusOr<std::string> type = StringField(decoder, "type", "decoder");
  if (!type.ok()) return type.status();
  std::vector<const Json*> steps;
  if (*type == "Sequence") {
    const Json* list = Field(decoder, "decoders");
    if (list == nullptr || !list->is_array() || list->empty()) {
      return JsonError("decoder Sequence: 'decoders' is not a non-empty array");
    }
    for (const Json& child : *list) steps.push_back(&child);
  } else {
    steps.push_back(&decoder);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    absl::StatusOr<std::string> t = StringField(*steps[i], "type", "decoder");
    if (!t.ok()) return t.status();
    if (*t == "ByteLevel") {
      if (!spec->byte_level) {
        return JsonUnsupported("decoder ByteLevel without a ByteLevel pre_tokenizer is not supported");
      }
      if (steps.size() != 1) {
        return JsonUnsupported("decoder ByteLevel is only supported on its own");
      }
      return absl::OkStatus();
    }
    if (spec->byte_level) {
      return JsonUnsupported(absl::StrCat("decoder '", *t, "' is not supported with a ",
                                          "ByteLevel pre_tokenizer (need decoder ByteLevel)"));
    }
    const DecoderStep::Kind last =
        spec->decoder.empty() ? DecoderStep::Kind::kReplace : spec->decoder.back().kind;
    if (*t == "Replace") {
      if (last != DecoderStep::Kind::kReplace) {
        return JsonUnsupported("decoder Replace after ByteFallback or Fuse is not supported");
      }
      absl::StatusOr<std::string> pattern = ReplacePattern(*steps[i], "decoder");
      if (!pattern.ok()) return pattern.status();
      absl::StatusOr<std::string> content = StringField(*steps[i], "content", "decoder Replace");
      if (!content.ok()) return content.status();
      spec->decoder.push_back({DecoderStep::Kind::kReplace, *pattern, *content});
    } else if (*t == "ByteFallback") {
      if (last != DecoderStep::Kind::kReplace) {
        return JsonUnsupported("decoder ByteFallback after ByteFallback or Fuse is not supported");
      }
      spec->decoder.push_back({DecoderStep::Kind::kByteFallback, "", ""});
    } else if (*t == "Fuse") {
      if (i + 1 != steps.size()) {
        return JsonUnsupported("decoder Fuse is only supported as the last step");
      }
      spec->decoder.push_back({DecoderStep::Kind::kFuse, "", ""});
    } else {
      return JsonUnsupported(absl::StrCat("decoder '", *t, "' is not supported (ByteLevel, or ",
                                          "a Sequence of Replace, ByteFallback, Fuse)"));
    }
  }
  return absl::OkStatus();
}

absl::Status AddPostProcessor(const Json& pp, TokenizerSpec* spec) {
  if (pp.is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type = StringField(pp, "type", "post_processor");
  if (!type.ok()) return type.status();
  if (*type == "ByteLevel") return absl::OkStatus();
  if (*type == "Sequence") {
    const Json* list = Field(pp, "processors");
    if (list == nullptr || !list->is_array()) {
      return JsonError("post_processor Sequence: 'processors' is not an array");
    }
    for (const Json& child : *list) {
      if (absl::Status s = AddPostProcessor(child, spec); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (*type == "TemplateProcessing") {
    const Json* single = Field(pp, "single");
    const Json* specials = Field(pp, "special_tokens");
    if (single == nullptr || !single->is_array()) {
      return JsonError("post_processor TemplateProcessing: 'single' is not an array");
    }
    bool seen_sequence = false;
    for (const Json& item : *single) {
      if (const Json* seq = Field(item, "Sequence")) {
        const Json* id = Field(*seq, "id");
        if (id == nullptr || !id->is_string() || id->get<std::string>() != "A" || seen_sequence) {
          return JsonError("post_processor TemplateProcessing: 'single' must hold sequence A once");
        }
        seen_sequence = true;
        continue;
      }
      const Json* sp = Field(item, "SpecialToken");
      const Json* name = sp == nullptr ? nullptr : Field(*sp, "id");
      if (name == nullptr || !name->is_string()) {
        return JsonError("post_processor TemplateProcessing: bad item in 'single'");
      }
      const Json* def = specials == nullptr ? nullptr : Field(*specials, name->get<std::string>().c_str());
      const Json* ids = def == nullptr ? nullptr : Field(*def, "ids");
      if (ids == nullptr || !ids->is_array()) {
        return JsonError(absl::StrCat("post_processor TemplateProcessing: special token '",
                                      name->get<std::string>(), "' has no ids"));
      }
      for (const Json& id : *ids) {
        absl::StatusOr<int32_t> v = IdValue(id, "post_processor special token id");
        if (!v.ok()) return v.status();
        (seen_sequence ? spec->suffix_ids : spec->prefix_ids).push_back(*v);
      }
    }
    if (!seen_sequence) {
      return JsonError("post_processor TemplateProcessing: 'single' has no sequence A");
    }
    return absl::OkStatus();
  }
  return JsonUnsupported(absl::StrCat("post_processor '", *type, "' is not supported"));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return ReadRegularFile(path, "tokenizer file");
}

// The BPE `model` object: its type and the options it may not set (dropout, subword
// affixes); the flags it may set go into `spec`.
absl::StatusOr<const Json*> BpeModel(const Json& root, TokenizerSpec& spec) {
  const Json* model = Field(root, "model");
  if (model == nullptr || !model->is_object()) return JsonError("missing 'model' object");
  if (const Json* type = Field(*model, "type"); type != nullptr) {
    if (!type->is_string() || type->get<std::string>() != "BPE") {
      return JsonUnsupported(absl::StrCat("model type ", type->dump(), " is not supported (BPE only)"));
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* f = Field(*model, key);
    if (f != nullptr && f->is_string() && !f->get<std::string>().empty()) {
      return JsonUnsupported(absl::StrCat("model.", key, " is not supported"));
    }
  }
  const Json* vocab = Field(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return JsonError("missing 'model.vocab' object");
  const Json* merges = Field(*model, "merges");
  if (merges == nullptr || !merges->is_array()) return JsonError("missing 'model.merges' array");
  spec.ignore_merges = BoolField(*model, "ignore_merges", false);
  spec.byte_fallback = BoolField(*model, "byte_fallback", false);
  spec.fuse_unk = BoolField(*model, "fuse_unk", false);
  if (const Json* dropout = Field(*model, "dropout"); dropout != nullptr && !dropout->is_null()) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      return JsonUnsupported("model.dropout is not supported (BPE dropout is random)");
    }
  }
  return model;
}

// Collects the tokens of model.vocab and added_tokens by id. Ids must be 0..n-1
// without gaps, n at most the entries of model.vocab and added_tokens: each id is
// bounded by that before anything is sized by it (one id of 2^24 - 1 allocated 16M
// token strings before failing).
class TokenTable {
 public:
  TokenTable(size_t max_tokens, std::vector<std::string>& tokens)
      : max_tokens_(max_tokens), tokens_(tokens) {}

  absl::Status Place(int32_t id, const std::string& token, absl::string_view what) {
    if (static_cast<size_t>(id) >= max_tokens_) {
      return JsonError(absl::StrCat(what, " '", token, "' has id ", id, ", but there are only ",
                                    max_tokens_, " tokens (ids must be 0..", max_tokens_ - 1,
                                    " without gaps)"));
    }
    if (static_cast<size_t>(id) >= tokens_.size()) {
      tokens_.resize(id + 1);
      filled_.resize(id + 1, false);
    }
    if (filled_[id] && tokens_[id] != token) {
      return JsonError(absl::StrCat(what, " '", token, "' has id ", id, ", already used by '",
                                    tokens_[id], "'"));
    }
    tokens_[id] = token;
    filled_[id] = true;
    return absl::OkStatus();
  }

  absl::Status CheckNoGaps() const {
    for (size_t id = 0; id < filled_.size(); ++id) {
      if (!filled_[id]) return JsonError(absl::StrCat("no token has id ", id));
    }
    return absl::OkStatus();
  }

 private:
  const size_t max_tokens_;
  std::vector<std::string>& tokens_;
  std::vector<bool> filled_;
};

// model.merges: "a b" strings or ["a", "b"] pairs.
absl::Status AddJsonMerges(const Json& merges, TokenizerSpec& spec) {
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos || space + 1 >= s.size()) {
        return JsonError(absl::StrCat("model.merges[", i, "] = '", s,
                                      "' is not two tokens separated by a space"));
      }
      spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return JsonError(absl::StrCat("model.merges[", i, "] is neither \"a b\" nor [\"a\", \"b\"]"));
    }
  }
  return absl::OkStatus();
}

absl::Status AddJsonAddedTokens(const Json& added, TokenTable& table, TokenizerSpec& spec) {
  if (!added.is_array()) return JsonError("'added_tokens' is not an array");
  for (const Json& a : added) {
    absl::StatusOr<std::string> content = StringField(a, "content", "added_tokens[]");
    if (!content.ok()) return content.status();
    const Json* idv = Field(a, "id");
    if (idv == nullptr) return JsonError(absl::StrCat("added token '", *content, "' has no id"));
    absl::StatusOr<int32_t> id = IdValue(*idv, absl::StrCat("added token '", *content, "' id"));
    if (!id.ok()) return id.status();
    if (BoolField(a, "lstrip", false) || BoolField(a, "rstrip", false) ||
        BoolField(a, "single_word", false)) {
      return JsonUnsupported(absl::StrCat("added token '", *content,
                                          "': lstrip/rstrip/single_word are not supported"));
    }
    if (absl::Status s = table.Place(*id, *content, "added token"); !s.ok()) return s;
    const bool special = BoolField(a, "special", false);
    // HF's AddedToken defaults `normalized` to !special.
    spec.added_tokens.push_back(TokenizerSpec::AddedToken{
        *id, *content, special, BoolField(a, "normalized", !special)});
  }
  return absl::OkStatus();
}

// The stages around the model: normalizer, pre-tokenizer, decoder, post-processor.
absl::Status AddJsonPipeline(const Json& root, TokenizerSpec& spec) {
  if (const Json* norm = Field(root, "normalizer"); norm != nullptr) {
    if (absl::Status s = AddNormalizer(*norm, &spec); !s.ok()) return s;
  }
  bool byte_level = false;
  if (const Json* pt = Field(root, "pre_tokenizer"); pt != nullptr) {
    if (absl::Status s = AddPreTokenizer(*pt, &spec, &byte_level); !s.ok()) return s;
  }
  spec.byte_level = byte_level;
  const Json* decoder = Field(root, "decoder");
  if (absl::Status s = AddDecoder(decoder == nullptr ? Json() : *decoder, &spec); !s.ok()) {
    return s;
  }
  if (const Json* pp = Field(root, "post_processor"); pp != nullptr) {
    if (absl::Status s = AddPostProcessor(*pp, &spec); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerSpec> Tokenizer::SpecFromTokenizerJson(absl::string_view json_text) {
  Json root = Json::parse(json_text.begin(), json_text.end(), /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) return JsonError("not valid JSON");
  if (!root.is_object()) return JsonError("top level is not an object");

  TokenizerSpec spec;
  absl::StatusOr<const Json*> model = BpeModel(root, spec);
  if (!model.ok()) return model.status();
  const Json& vocab = *Field(**model, "vocab");
  const Json* added_list = Field(root, "added_tokens");
  TokenTable table(
      vocab.size() + (added_list != nullptr && added_list->is_array() ? added_list->size() : 0),
      spec.tokens);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    absl::StatusOr<int32_t> id = IdValue(it.value(), absl::StrCat("model.vocab['", it.key(), "']"));
    if (!id.ok()) return id.status();
    if (absl::Status s = table.Place(*id, it.key(), "vocabulary token"); !s.ok()) return s;
  }
  if (absl::Status s = AddJsonMerges(*Field(**model, "merges"), spec); !s.ok()) return s;
  if (added_list != nullptr && !added_list->is_null()) {
    if (absl::Status s = AddJsonAddedTokens(*added_list, table, spec); !s.ok()) return s;
  }
  if (absl::Status s = table.CheckNoGaps(); !s.ok()) return s;
  if (spec.tokens.empty()) return JsonError("empty vocabulary");

  if (const Json* unk = Field(**model, "unk_token"); unk != nullptr && unk->is_string()) {
    for (size_t id = 0; id < spec.tokens.size(); ++id) {
      if (spec.tokens[id] == unk->get<std::string>()) spec.unk_id = static_cast<int32_t>(id);
    }
  }
  if (absl::Status s = AddJsonPipeline(root, spec); !s.ok()) return s;
  if (!spec.prefix_ids.empty()) spec.bos_id = spec.prefix_ids.front();
  AddKnownEndOfGenerationIds(spec);
  return spec;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const weights::GgufFile& gguf) {
  absl::StatusOr<TokenizerSpec> spec = SpecFromGguf(gguf);
  if (!spec.ok()) return spec.status();
  return Create(*std::move(spec));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromTokenizerJson(
    absl::string_view json_text) {
  absl::StatusOr<TokenizerSpec> spec = SpecFromTokenizerJson(json_text);
  if (!spec.ok()) return spec.status();
  return Create(*std::move(spec));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  absl::StatusOr<OpenedPath> opened = OpenUserPath(path, "tokenizer", PathKinds::kFileOrDirectory);
  if (absl::IsNotFound(opened.status())) {
    return absl::NotFoundError(absl::StrCat("tokenizer: no such file or directory: ", path));
  }
  if (!opened.ok()) return opened.status();
  std::string json_path = path;
  // Where tokenizer_config.json and generation_config.json may be: the checkpoint
  // directory, or the directory of a file named tokenizer.json (a checkpoint's).
  std::optional<std::string> config_dir;
  if (opened->is_directory) {
    json_path = absl::StrCat(path, "/tokenizer.json");
    config_dir = path;
    struct stat st;
    if (::stat(json_path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("tokenizer: checkpoint directory ", path,
                                              " has no tokenizer.json"));
    }
  } else {
    // The format by content, not by name: GGUF starts with its magic, a
    // tokenizer.json with '{' (after whitespace).
    absl::StatusOr<std::string> head = ReadHead(*opened, path, 64);
    if (!head.ok()) return head.status();
    const absl::string_view start(*head);
    if (absl::StartsWith(start, "GGUF")) {
      absl::StatusOr<std::unique_ptr<weights::GgufFile>> gguf = weights::GgufFile::Open(path);
      if (!gguf.ok()) return gguf.status();
      return FromGguf(**gguf);
    }
    const size_t first = start.find_first_not_of(" \t\r\n");
    if (first == absl::string_view::npos || start[first] != '{') {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer ", path, " is neither a GGUF file (no GGUF magic) nor a tokenizer.json ",
          "(does not start with '{')", absl::EndsWith(path, ".gguf") ? "; a corrupt .gguf?" : ""));
    }
    const size_t slash = path.rfind('/');
    if (path.substr(slash + 1) == "tokenizer.json") config_dir = DirectoryOf(path);
  }
  absl::StatusOr<std::string> text = ReadFile(json_path);
  if (!text.ok()) return text.status();
  absl::StatusOr<TokenizerSpec> spec = SpecFromTokenizerJson(*text);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(),
                        absl::StrCat(json_path, ": ", spec.status().message()));
  }
  if (config_dir.has_value()) {
    if (absl::Status s = AddCheckpointConfigs(*config_dir, *spec); !s.ok()) return s;
  }
  return Create(*std::move(spec));
}

}  // namespace dk::tokenizer
