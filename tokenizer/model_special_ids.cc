#include "tokenizer/model_special_ids.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tokenizer/checkpoint_files.h"
#include "util/read_file.h"
#include "weights/gguf.h"

namespace dk::tokenizer {
namespace {

using Json = nlohmann::json;

// `key` of a config.json-like object: absent or null, an id, or a list of ids.
absl::Status ReadIds(const Json& config, const char* key, const std::string& path,
                     std::vector<int64_t>* out) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  std::vector<const Json*> values;
  if (it->is_array()) {
    for (const Json& v : *it) values.push_back(&v);
  } else {
    values.push_back(&*it);
  }
  for (const Json* v : values) {
    // nlohmann keeps a non-negative integer as unsigned: anything else is no id.
    if (!v->is_number_unsigned() || v->get<uint64_t>() > uint64_t{1} << 31) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", key, " = ", it->dump(), " is not a token id (or list of ids)"));
    }
    out->push_back(static_cast<int64_t>(v->get<uint64_t>()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelSpecialIds> FromCheckpoint(const std::string& dir) {
  ModelSpecialIds ids;
  std::vector<std::string> sources;
  for (const char* file : {"config.json", "generation_config.json"}) {
    const std::string path = absl::StrCat(dir, "/", file);
    absl::StatusOr<std::optional<Json>> config = ReadJsonConfig(path, file);
    if (!config.ok()) return config.status();
    if (!config->has_value()) continue;
    sources.push_back(path);
    std::vector<int64_t> bos;
    if (absl::Status s = ReadIds(**config, "bos_token_id", path, &bos); !s.ok()) return s;
    if (bos.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bos_token_id is a list"));
    }
    if (!bos.empty()) ids.bos = bos[0];
    if (absl::Status s = ReadIds(**config, "eos_token_id", path, &ids.eos); !s.ok()) return s;
  }
  ids.source = absl::StrJoin(sources, " and ");
  return ids;
}

absl::StatusOr<ModelSpecialIds> FromGguf(const std::string& path) {
  absl::StatusOr<std::unique_ptr<weights::GgufFile>> gguf = weights::GgufFile::Open(path);
  if (!gguf.ok()) return gguf.status();
  ModelSpecialIds ids;
  ids.source = path;
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if ((*gguf)->Find(key) == nullptr) continue;
    absl::StatusOr<int64_t> id = (*gguf)->GetInt(key);
    if (!id.ok()) return id.status();
    if (absl::StrContains(key, "bos")) {
      ids.bos = *id;
    } else {
      ids.eos.push_back(*id);
    }
  }
  return ids;
}

std::string IdList(const std::vector<int64_t>& ids) {
  return ids.size() == 1 ? absl::StrCat(ids[0]) : absl::StrCat("[", absl::StrJoin(ids, ", "), "]");
}

}  // namespace

absl::StatusOr<std::optional<ModelSpecialIds>> ReadModelSpecialIds(const std::string& weights_spec) {
  if (weights_spec == "synthetic" || absl::StartsWith(weights_spec, "synthetic:")) return std::nullopt;
  absl::StatusOr<OpenedPath> opened = OpenUserPath(weights_spec, "weights", PathKinds::kFileOrDirectory);
  if (!opened.ok()) return opened.status();
  if (opened->is_directory) return FromCheckpoint(weights_spec);
  return FromGguf(weights_spec);
}

absl::Status CheckTokenizerSpecialIds(const Tokenizer& tokenizer, const ModelSpecialIds& model,
                                      absl::string_view tokenizer_path) {
  const auto mismatch = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer ", tokenizer_path, " is not this model's: ", what, " (model ids from ",
        model.source, ")"));
  };
  if (model.bos.has_value() && tokenizer.bos_id().has_value() && *model.bos != *tokenizer.bos_id()) {
    return mismatch(absl::StrCat("its BOS is id ", *tokenizer.bos_id(), ", the model's is ", *model.bos));
  }
  // Judged only where the tokenizer's files name an EOS (tokenizer_config.json, a GGUF):
  // a bare tokenizer.json knows its end-of-turn tokens by their texts alone (Gemma 3's
  // <end_of_turn>, not its <eos>), which says nothing about which model it belongs to.
  const absl::Span<const int32_t> eog = tokenizer.end_of_generation_ids();
  if (!model.eos.empty() && tokenizer.eos_id().has_value() &&
      std::none_of(eog.begin(), eog.end(), [&](int32_t id) {
        return std::find(model.eos.begin(), model.eos.end(), id) != model.eos.end();
      })) {
    return mismatch(absl::StrCat("none of its end-of-generation ids ",
                                 IdList(std::vector<int64_t>(eog.begin(), eog.end())),
                                 " is the model's EOS or end of turn ", IdList(model.eos)));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenizerMatchesWeights(const Tokenizer& tokenizer, absl::string_view tokenizer_path,
                                          const std::string& weights_spec) {
  absl::StatusOr<std::optional<ModelSpecialIds>> ids = ReadModelSpecialIds(weights_spec);
  if (!ids.ok()) return ids.status();
  if (!ids->has_value()) return absl::OkStatus();
  return CheckTokenizerSpecialIds(tokenizer, **ids, tokenizer_path);
}

}  // namespace dk::tokenizer
