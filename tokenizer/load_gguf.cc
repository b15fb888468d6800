// Tokenizer loader for GGUF `tokenizer.ggml.*` metadata: byte-level BPE ("gpt2") and
// SentencePiece BPE ("llama", Gemma's layout).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tokenizer/end_of_generation.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/printable.h"
#include "weights/gguf.h"

namespace dk::tokenizer {
namespace {

// tokenizer.ggml.merges: "left right" strings.
absl::Status AddGgufMerges(const weights::GgufFile& gguf, const std::string& where,
                           TokenizerSpec& spec) {
  absl::StatusOr<std::vector<std::string>> merges = gguf.GetStringArray("tokenizer.ggml.merges");
  if (!merges.ok()) return merges.status();
  spec.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& m = (*merges)[i];
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos || space + 1 >= m.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "tokenizer.ggml.merges[", i, "] = '", Printable(m),
          "' is not two tokens separated by a space"));
    }
    spec.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  return absl::OkStatus();
}

// tokenizer.ggml.token_type (optional): checks the normal tokens' text (byte-level BPE)
// and collects the control and user-defined tokens as added tokens. A user-defined token
// that was `respelled` is not added: HF adds one only when its spelling in the file is a
// vocabulary token, which a respelled one no longer is.
absl::Status AddGgufTokenTypes(const weights::GgufFile& gguf, const std::string& where,
                               const std::vector<bool>& respelled, TokenizerSpec& spec) {
  if (gguf.Find("tokenizer.ggml.token_type") == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<int64_t>> types = gguf.GetIntArray("tokenizer.ggml.token_type");
  if (!types.ok()) return types.status();
  if (types->size() != spec.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "tokenizer.ggml.token_type has ", types->size(), " entries but there are ",
        spec.tokens.size(), " tokens"));
  }
  for (size_t id = 0; id < types->size(); ++id) {
    const int64_t t = (*types)[id];
    // llama.cpp's token types: 0 undefined, 1 normal, 2 unknown, 3 control,
    // 4 user-defined, 5 unused, 6 byte.
    if (t < 0 || t > 6) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "tokenizer.ggml.token_type[", id, "] = ", t,
          " is not a token type (0 undefined .. 6 byte)"));
    }
    // A NORMAL token of byte-level BPE is text in the byte-level alphabet.
    if (t == 1 && spec.byte_level) {
      const std::string& token = spec.tokens[id];
      for (size_t at = 0; at < token.size();) {
        size_t len = 0;
        const uint32_t cp = DecodeUtf8(absl::string_view(token).substr(at), &len);
        if (len == 0 || UnicodeToByte(cp) < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, "tokenizer.ggml.tokens[", id, "] = '", Printable(token),
              "' (a normal token) is not byte-level BPE text (the tokens array is corrupt)"));
        }
        at += len;
      }
    }
    if (t == 4 && !respelled.empty() && respelled[id]) continue;
    if (t == 3 || t == 4) {  // CONTROL (special) / USER_DEFINED (plain added token)
      spec.added_tokens.push_back(
          TokenizerSpec::AddedToken{static_cast<int32_t>(id), spec.tokens[id], t == 3});
    }
  }
  return absl::OkStatus();
}

// tokenizer.ggml.pre names the pre-tokenizer (llama.cpp's names).
absl::Status AddGgufPreTokenizer(const weights::GgufFile& gguf, const std::string& where,
                                 TokenizerSpec& spec) {
  std::string pre = "gpt2";
  if (gguf.Find("tokenizer.ggml.pre") != nullptr) {
    absl::StatusOr<std::string> p = gguf.GetString("tokenizer.ggml.pre");
    if (!p.ok()) return p.status();
    pre = *p;
  }
  if (pre == "smollm") {
    spec.pre_tokenizer_patterns = {std::string(kDigitsIndividualPattern),
                                   std::string(kGpt2Pattern)};
  } else if (pre == "gpt2") {
    spec.pre_tokenizer_patterns = {std::string(kGpt2Pattern)};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    spec.pre_tokenizer_patterns = {std::string(kLlama3Pattern)};
    spec.ignore_merges = true;
  } else {
    return absl::UnimplementedError(absl::StrCat(
        where, "pre-tokenizer tokenizer.ggml.pre = '", pre,
        "' is not supported (supported: smollm, gpt2, llama-bpe, llama3, llama-v3)"));
  }
  return absl::OkStatus();
}

// An optional token id `key`, checked against the vocabulary.
absl::Status OptionalGgufId(const weights::GgufFile& gguf, const std::string& where,
                            const char* key, const TokenizerSpec& spec,
                            std::optional<int32_t>* out) {
  if (gguf.Find(key) == nullptr) return absl::OkStatus();
  absl::StatusOr<int64_t> v = gguf.GetInt(key);
  if (!v.ok()) return v.status();
  if (*v < 0 || *v >= static_cast<int64_t>(spec.tokens.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, key, " = ", *v, " is out of range [0, ", spec.tokens.size(), ")"));
  }
  *out = static_cast<int32_t>(*v);
  return absl::OkStatus();
}

// The end-of-generation ids besides EOS (which Tokenizer::Create adds): the end-of-turn
// and end-of-message ids, and the control tokens with a known end-of-turn text, which
// files often do not name (Gemma 3's has no eot key for its <end_of_turn>). Run after
// AddGgufTokenTypes, which makes the control tokens special added tokens.
absl::Status AddGgufEndOfGeneration(const weights::GgufFile& gguf, const std::string& where,
                                    TokenizerSpec& spec) {
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    std::optional<int32_t> id;
    if (absl::Status s = OptionalGgufId(gguf, where, key, spec, &id); !s.ok()) return s;
    if (id.has_value()) spec.eog_ids.push_back(*id);
  }
  AddKnownEndOfGenerationIds(spec);
  return absl::OkStatus();
}

// BOS/EOS/unknown ids and the add_bos/add_eos/add_space_prefix flags, and the
// end-of-generation ids. add_bos_token absent means `default_add_bos`.
absl::Status AddGgufSpecialTokens(const weights::GgufFile& gguf, const std::string& where,
                                  bool default_add_bos, TokenizerSpec& spec) {
  auto optional_id = [&](const char* key, std::optional<int32_t>* out) {
    return OptionalGgufId(gguf, where, key, spec, out);
  };
  if (absl::Status s = optional_id("tokenizer.ggml.bos_token_id", &spec.bos_id); !s.ok()) return s;
  if (absl::Status s = optional_id("tokenizer.ggml.eos_token_id", &spec.eos_id); !s.ok()) return s;
  if (absl::Status s = optional_id("tokenizer.ggml.unknown_token_id", &spec.unk_id); !s.ok()) {
    return s;
  }
  auto optional_bool = [&](const char* key, bool* out) -> absl::Status {
    if (gguf.Find(key) == nullptr) return absl::OkStatus();
    absl::StatusOr<bool> v = gguf.GetBool(key);
    if (!v.ok()) return v.status();
    *out = *v;
    return absl::OkStatus();
  };
  bool add_bos = default_add_bos, add_eos = false;
  if (absl::Status s = optional_bool("tokenizer.ggml.add_bos_token", &add_bos); !s.ok()) return s;
  if (absl::Status s = optional_bool("tokenizer.ggml.add_eos_token", &add_eos); !s.ok()) return s;
  if (absl::Status s = optional_bool("tokenizer.ggml.add_space_prefix", &spec.add_prefix_space);
      !s.ok()) {
    return s;
  }
  if (add_bos) {
    if (!spec.bos_id) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "add_bos_token is true but tokenizer.ggml.bos_token_id is missing"));
    }
    spec.prefix_ids.push_back(*spec.bos_id);
  }
  if (add_eos) {
    if (!spec.eos_id) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "add_eos_token is true but tokenizer.ggml.eos_token_id is missing"));
    }
    spec.suffix_ids.push_back(*spec.eos_id);
  }
  return AddGgufEndOfGeneration(gguf, where, spec);
}

// tokenizer.ggml.tokens, each checked to be UTF-8: a corrupt array would otherwise
// surface later as a merge naming a token the vocabulary lacks.
absl::Status ReadGgufTokens(const weights::GgufFile& gguf, const std::string& where,
                            TokenizerSpec& spec) {
  absl::StatusOr<std::vector<std::string>> tokens = gguf.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  spec.tokens = *std::move(tokens);
  if (spec.tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "tokenizer.ggml.tokens is empty"));
  }
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (!ValidateUtf8(spec.tokens[id]).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "tokenizer.ggml.tokens[", id, "] = '",
                                                     Printable(spec.tokens[id]),
                                                     "' is not valid UTF-8 (the tokens array is corrupt)"));
    }
  }
  return absl::OkStatus();
}

// Byte-level BPE (tokenizer.ggml.model "gpt2"): tokens in the GPT-2 byte alphabet, merges.
absl::StatusOr<TokenizerSpec> ByteLevelSpecFromGguf(const weights::GgufFile& gguf,
                                                    const std::string& where) {
  TokenizerSpec spec;
  if (absl::Status s = ReadGgufTokens(gguf, where, spec); !s.ok()) return s;
  if (absl::Status s = AddGgufMerges(gguf, where, spec); !s.ok()) return s;
  if (absl::Status s = AddGgufTokenTypes(gguf, where, {}, spec); !s.ok()) return s;
  if (absl::Status s = AddGgufPreTokenizer(gguf, where, spec); !s.ok()) return s;
  if (absl::Status s = AddGgufSpecialTokens(gguf, where, /*default_add_bos=*/false, spec);
      !s.ok()) {
    return s;
  }
  return spec;
}

constexpr char kSpaceMark[] = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Python's str.isspace, which decides what transformers respells (IsSpaceRun).
bool IsPythonSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
         cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// llama.cpp's converter writes Gemma's whitespace-run pieces ("▁▁", "▁▁▁", ...) with real
// spaces; transformers spells every all-whitespace token holding a space back as one "▁"
// per character, so that the merges derived from the vocabulary reach them. Returns
// whether `token` was respelled.
bool RespellSpaceRun(std::string& token) {
  if (token.find(' ') == std::string::npos) return false;
  size_t chars = 0;
  for (size_t at = 0; at < token.size(); ++chars) {
    size_t len = 0;
    if (!IsPythonSpace(DecodeUtf8(absl::string_view(token).substr(at), &len)) || len == 0) {
      return false;
    }
    at += len;
  }
  std::string respelled;
  for (size_t i = 0; i < chars; ++i) respelled += kSpaceMark;
  token = std::move(respelled);
  return true;
}

// SentencePiece BPE (tokenizer.ggml.model "llama") in the layout transformers gives Gemma
// (GemmaTokenizer): spaces replaced by "▁" and no dummy prefix; BPE from the characters
// with byte fallback (<0xXX>) and fused unknowns; merges derived from the vocabulary
// (BuildMergesFromVocab) unless the file lists them; control tokens special, user-defined
// ones (e.g. "\n\n", "<b>") plain added tokens, both matched whole in the raw text; BOS
// unless add_bos_token says otherwise. Other architectures get Llama's layout in
// transformers (a Metaspace prefix, score-ordered merges, a Strip decoder): not supported.
absl::StatusOr<TokenizerSpec> SentencePieceSpecFromGguf(const weights::GgufFile& gguf,
                                                        const std::string& where) {
  absl::StatusOr<std::string> arch = gguf.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  if (*arch != "gemma" && *arch != "gemma2" && *arch != "gemma3") {
    return absl::UnimplementedError(absl::StrCat(
        where, "a SentencePiece tokenizer (tokenizer.ggml.model 'llama') is supported in ",
        "Gemma's layout only (general.architecture gemma, gemma2, gemma3), not for '",
        Printable(*arch), "'"));
  }
  TokenizerSpec spec;
  spec.byte_level = false;
  spec.byte_fallback = true;
  spec.fuse_unk = true;
  if (absl::Status s = ReadGgufTokens(gguf, where, spec); !s.ok()) return s;
  std::vector<bool> respelled(spec.tokens.size(), false);
  for (size_t id = 0; id < spec.tokens.size(); ++id) respelled[id] = RespellSpaceRun(spec.tokens[id]);
  if (gguf.Find("tokenizer.ggml.merges") != nullptr) {
    if (absl::Status s = AddGgufMerges(gguf, where, spec); !s.ok()) return s;
  } else {
    spec.merges_from_vocab = true;
  }
  spec.normalizer = {NormalizerStep{NormalizerStep::Kind::kReplace, " ", kSpaceMark}};
  spec.decoder = {DecoderStep{DecoderStep::Kind::kReplace, kSpaceMark, " "},
                  DecoderStep{DecoderStep::Kind::kByteFallback, "", ""},
                  DecoderStep{DecoderStep::Kind::kFuse, "", ""}};
  if (absl::Status s = AddGgufTokenTypes(gguf, where, respelled, spec); !s.ok()) return s;
  if (absl::Status s = AddGgufSpecialTokens(gguf, where, /*default_add_bos=*/true, spec);
      !s.ok()) {
    return s;
  }
  if (spec.add_prefix_space) {
    return absl::UnimplementedError(absl::StrCat(
        where, "tokenizer.ggml.add_space_prefix is true: a SentencePiece dummy prefix is not "
               "supported (Gemma's files set it false)"));
  }
  return spec;
}

}  // namespace

absl::StatusOr<TokenizerSpec> Tokenizer::SpecFromGguf(const weights::GgufFile& gguf) {
  const std::string where = absl::StrCat("GGUF ", gguf.name(), ": ");
  absl::StatusOr<std::string> model = gguf.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.status();
  if (*model == "gpt2") return ByteLevelSpecFromGguf(gguf, where);
  if (*model == "llama") return SentencePieceSpecFromGguf(gguf, where);
  return absl::UnimplementedError(absl::StrCat(
      where, "tokenizer.ggml.model is '", *model,
      "'; supported: 'gpt2' (byte-level BPE) and 'llama' (SentencePiece BPE)"));
}

}  // namespace dk::tokenizer
