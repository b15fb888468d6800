// End-of-generation ids: the known end-of-turn texts and a checkpoint's config files.
#include "tokenizer/end_of_generation.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/checkpoint_files.h"
#include "util/printable.h"

namespace dk::tokenizer {
namespace {

using Json = nlohmann::json;

// The texts llama.cpp's vocabulary loader takes as end of generation, by family: Llama 3
// (<|eot_id|>, <|eom_id|>, <|end_of_text|>), ChatML / GPT-2 lineage (<|im_end|>,
// <|endoftext|>), Phi-3 (<|end|>), Gemma (<end_of_turn>), gpt-oss (<|return|>, <|call|>),
// CodeLlama infill (<EOT>, "_<EOT>"), SmolDocling (<end_of_utterance>).
constexpr absl::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",  "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>",
    "<|end|>",     "<end_of_turn>", "<|return|>",   "<|call|>",   "<EOT>",
    "_<EOT>",      "<end_of_utterance>",
};

// tokenizer_config.json's `key` ("bos_token", "eos_token") resolved to its id.
absl::Status ReadSpecialToken(const Json& config, const std::string& path, const char* key,
                              const TokenizerSpec& spec, std::optional<int32_t>* id) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  const Json* text = &*it;
  if (text->is_object()) {
    auto content = text->find("content");
    text = content == text->end() ? nullptr : &*content;
  }
  if (text == nullptr || !text->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", key, " is neither a token's text nor an object with a string 'content'"));
  }
  const std::string name = text->get<std::string>();
  auto found = std::find(spec.tokens.begin(), spec.tokens.end(), name);
  if (found == spec.tokens.end()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, " '", Printable(name),
                                                   "' is not a token of the tokenizer"));
  }
  *id = static_cast<int32_t>(found - spec.tokens.begin());
  return absl::OkStatus();
}

// generation_config.json's eos_token_id: an id or a list of ids.
absl::Status ReadGenerationEos(const Json& config, const std::string& path,
                               TokenizerSpec& spec) {
  auto it = config.find("eos_token_id");
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  std::vector<const Json*> ids;
  if (it->is_array()) {
    for (const Json& v : *it) ids.push_back(&v);
  } else {
    ids.push_back(&*it);
  }
  const int64_t n = static_cast<int64_t>(spec.tokens.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json& v = *ids[i];
    const std::string key = it->is_array() ? absl::StrCat("eos_token_id[", i, "]") : "eos_token_id";
    if (!v.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", key, " = ", v.dump(), " is not an integer token id"));
    }
    // nlohmann reads a non-negative integer as unsigned, a negative one as signed.
    if (!v.is_number_unsigned() || v.get<uint64_t>() >= static_cast<uint64_t>(n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", key, " = ", v.dump(), " is out of range [0, ", n,
          ") (the tokenizer's vocabulary)"));
    }
    spec.eog_ids.push_back(static_cast<int32_t>(v.get<uint64_t>()));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsKnownEndOfGenerationText(absl::string_view text) {
  return std::find(std::begin(kEndOfGenerationTexts), std::end(kEndOfGenerationTexts), text) !=
         std::end(kEndOfGenerationTexts);
}

void AddKnownEndOfGenerationIds(TokenizerSpec& spec) {
  for (const TokenizerSpec::AddedToken& t : spec.added_tokens) {
    if (t.special && IsKnownEndOfGenerationText(t.content)) spec.eog_ids.push_back(t.id);
  }
}

absl::Status AddCheckpointConfigs(const std::string& dir, TokenizerSpec& spec) {
  const std::string tokenizer_config = absl::StrCat(dir, "/tokenizer_config.json");
  absl::StatusOr<std::optional<Json>> config = ReadJsonConfig(tokenizer_config, "checkpoint config");
  if (!config.ok()) return config.status();
  if (config->has_value()) {
    for (auto [key, id] : {std::pair{"bos_token", &spec.bos_id}, {"eos_token", &spec.eos_id}}) {
      if (absl::Status s = ReadSpecialToken(**config, tokenizer_config, key, spec, id); !s.ok()) {
        return s;
      }
    }
  }
  const std::string generation_config = absl::StrCat(dir, "/generation_config.json");
  config = ReadJsonConfig(generation_config, "checkpoint config");
  if (!config.ok()) return config.status();
  if (config->has_value()) return ReadGenerationEos(**config, generation_config, spec);
  return absl::OkStatus();
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return std::binary_search(spec_.eog_ids.begin(), spec_.eog_ids.end(), id);
}

}  // namespace dk::tokenizer
