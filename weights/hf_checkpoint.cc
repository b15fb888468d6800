// HF checkpoints: config.json <-> ModelShape, loading safetensors checkpoints
// (single or sharded), writing one that transformers loads.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "elf/elf.h"
#include "util/status.h"
#include "weights/common.h"
#include "weights/safetensors.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

using json = nlohmann::json;

// The shortest decimal that reads back as `f` (1e-05, not 9.999999747378752e-06), as
// a double, so config.json shows the value a person wrote.
double ShortestDouble(float f) {
  if (!std::isfinite(f)) return f;
  char buf[48];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, f);
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

// A positive integer of at most `max` (elf/elf.h's limits), checked before anything
// is sized by it.
absl::StatusOr<int32_t> JsonPositiveInt(const json& cfg, const char* key,
                                        const std::string& file, int64_t default_value,
                                        int64_t max) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) {
    if (default_value > max) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": \"", key, "\" (default ",
                                                     default_value, ") exceeds the limit ", max));
    }
    if (default_value > 0) return static_cast<int32_t>(default_value);
    return absl::InvalidArgumentError(absl::StrCat(file, ": missing \"", key, "\""));
  }
  // nlohmann keeps non-negative integers as uint64 (get<int64_t>() of one above
  // INT64_MAX would wrap negative), negative ones as int64.
  const bool positive = it->is_number_unsigned() ? it->get<uint64_t>() > 0
                                                 : it->is_number_integer() && it->get<int64_t>() > 0;
  if (!positive) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": \"", key, "\" must be a positive integer, got ", it->dump()));
  }
  if (it->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": \"", key, "\" = ", it->dump(), " exceeds the limit ", max));
  }
  return static_cast<int32_t>(it->get<int64_t>());
}

// The number at `key` as a double: nullopt when absent or null, an error naming the
// key when it is not a number. Nothing is converted yet: the callers range-check it.
absl::StatusOr<std::optional<double>> JsonDouble(const json& obj, const char* key,
                                                 const std::string& file) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": \"", key, "\" must be a number, got ", it->dump()));
  }
  return it->get<double>();
}

// A finite number that fits a float (every such value lands in a float field of the
// shape; converting a double beyond float's range is undefined behaviour).
absl::StatusOr<double> JsonNumber(const json& obj, const char* key, const std::string& file,
                                  double default_value) {
  DK_ASSIGN_OR_RETURN(const std::optional<double> v, JsonDouble(obj, key, file));
  if (!v.has_value()) return default_value;
  if (!std::isfinite(*v) || std::fabs(*v) > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": \"", key, "\" = ", obj.at(key).dump(), " is outside the range of a float"));
  }
  return *v;
}

// A whole number in [lo, hi], range-checked before it is converted (a double such as
// 1e300 has no int64 value).
absl::StatusOr<int64_t> JsonIntInRange(const json& obj, const char* key, const std::string& file,
                                       int64_t default_value, int64_t lo, int64_t hi) {
  DK_ASSIGN_OR_RETURN(const std::optional<double> v, JsonDouble(obj, key, file));
  if (!v.has_value()) return default_value;
  if (!(*v >= static_cast<double>(lo) && *v <= static_cast<double>(hi)) || *v != std::floor(*v)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": \"", key, "\" = ", obj.at(key).dump(),
                                                   " must be a whole number in [", lo, ", ", hi, "]"));
  }
  return static_cast<int64_t>(*v);
}

// Fills shape.rope_scaling from an HF rope_scaling / rope_parameters object.
absl::Status ParseRopeScaling(const json& rs, const std::string& file,
                              elf::ModelShape& shape) {
  if (rs.is_null()) return absl::OkStatus();
  if (!rs.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": rope_scaling is not an object"));
  }
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    const auto it = rs.find(key);
    if (it != rs.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  }
  if (type.empty() || type == "default") return absl::OkStatus();
  if (type != "llama3") {
    return absl::UnimplementedError(absl::StrCat(
        file, ": unsupported rope scaling type \"", type, "\" (supported: llama3)"));
  }
  elf::RopeScaling* out = shape.mutable_rope_scaling();
  out->set_type("llama3");
  DK_ASSIGN_OR_RETURN(double factor, JsonNumber(rs, "factor", file, 8.0));
  DK_ASSIGN_OR_RETURN(double low, JsonNumber(rs, "low_freq_factor", file, 1.0));
  DK_ASSIGN_OR_RETURN(double high, JsonNumber(rs, "high_freq_factor", file, 4.0));
  DK_ASSIGN_OR_RETURN(int64_t orig, JsonIntInRange(rs, "original_max_position_embeddings", file,
                                                    8192, 1, elf::kMaxDimension));
  out->set_factor(static_cast<float>(factor));
  out->set_low_freq_factor(static_cast<float>(low));
  out->set_high_freq_factor(static_cast<float>(high));
  out->set_original_max_position(orig);
  return absl::OkStatus();
}

// The model family a config.json names, after refusing the features of that family
// the graph does not have (each refusal names the key).
absl::StatusOr<elf::ModelShape::Family> HfFamily(const json& cfg, const std::string& file) {
  std::string model_type = "llama";
  if (const auto it = cfg.find("model_type"); it != cfg.end() && it->is_string()) model_type = it->get<std::string>();
  // Gemma3ForCausalLM's text config is gemma3_text; "gemma3" alone is the multimodal one.
  const std::optional<elf::ModelShape::Family> parsed =
      model_type == "gemma3_text" ? elf::ModelShape::GEMMA3
      : model_type == "gemma3"    ? std::nullopt
                                  : elf::ParseFamily(model_type);
  if (!parsed) {
    return absl::UnimplementedError(absl::StrCat(
        file, ": model_type \"", model_type, "\" is not supported (llama, qwen2, qwen3, gemma3_text)"));
  }
  const elf::ModelShape::Family family = *parsed;
  // Features a family may switch on in its config.json that the graph does not have.
  for (const char* key : {"attention_bias", "mlp_bias", "use_sliding_window"}) {
    const auto it = cfg.find(key);
    if (it != cfg.end() && it->is_boolean() && it->get<bool>()) {
      return absl::UnimplementedError(absl::StrCat(file, ": \"", key, "\": true is not supported"));
    }
  }
  // Gemma 3 names it hidden_activation; its FFN is GELU-tanh, every other family's SiLU.
  const char* want_act = family == elf::ModelShape::GEMMA3 ? "gelu_pytorch_tanh" : "silu";
  for (const char* key : {"hidden_act", "hidden_activation"}) {
    const auto act = cfg.find(key);
    if (act != cfg.end() && act->is_string() && act->get<std::string>() != want_act) {
      return absl::UnimplementedError(absl::StrCat(file, ": ", key, " \"", act->get<std::string>(),
                                                   "\" is not supported for ", elf::FamilyName(family), " (", want_act,
                                                   ")"));
    }
  }
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    const auto it = cfg.find(key);
    if (it != cfg.end() && !it->is_null()) {
      return absl::UnimplementedError(absl::StrCat(file, ": \"", key, "\" is not supported (null)"));
    }
  }
  return family;
}

// The sizes config.json gives, each bounded by elf/elf.h's limits.
absl::Status ParseHfSizes(const json& cfg, const std::string& file, elf::ModelShape& s) {
  DK_ASSIGN_OR_RETURN(int32_t hidden,
                      JsonPositiveInt(cfg, "hidden_size", file, 0, elf::kMaxDimension));
  DK_ASSIGN_OR_RETURN(int32_t ffn,
                      JsonPositiveInt(cfg, "intermediate_size", file, 0, elf::kMaxDimension));
  DK_ASSIGN_OR_RETURN(int32_t heads,
                      JsonPositiveInt(cfg, "num_attention_heads", file, 0, elf::kMaxHeads));
  DK_ASSIGN_OR_RETURN(int32_t layers,
                      JsonPositiveInt(cfg, "num_hidden_layers", file, 0, elf::kMaxLayers));
  DK_ASSIGN_OR_RETURN(int32_t kv_heads,
                      JsonPositiveInt(cfg, "num_key_value_heads", file, heads, elf::kMaxHeads));
  DK_ASSIGN_OR_RETURN(int32_t head_dim,
                      JsonPositiveInt(cfg, "head_dim", file, hidden / heads, elf::kMaxHeadDim));
  DK_ASSIGN_OR_RETURN(int32_t vocab,
                      JsonPositiveInt(cfg, "vocab_size", file, 0, elf::kMaxDimension));
  DK_ASSIGN_OR_RETURN(int32_t max_pos, JsonPositiveInt(cfg, "max_position_embeddings", file,
                                                       2048, elf::kMaxDimension));
  s.set_n_layers(layers);
  s.set_hidden(hidden);
  s.set_n_heads(heads);
  s.set_n_kv_heads(kv_heads);
  s.set_head_dim(head_dim);
  s.set_ffn(ffn);
  s.set_vocab(vocab);
  s.set_max_context(max_pos);
  return absl::OkStatus();
}

// rope_theta, rope_local_base_freq and the scaling, from the top level or (transformers
// >= 5) from rope_parameters; Gemma 3 writes one object per layer type there.
absl::Status ParseHfRope(const json& cfg, const std::string& file, elf::ModelShape& s) {
  double theta = 10000.0, local_theta = 10000.0;
  DK_ASSIGN_OR_RETURN(theta, JsonNumber(cfg, "rope_theta", file, theta));
  DK_ASSIGN_OR_RETURN(local_theta, JsonNumber(cfg, "rope_local_base_freq", file, local_theta));
  const auto params = cfg.find("rope_parameters");
  if (params != cfg.end() && params->is_object()) {
    const auto full = params->find("full_attention"), local = params->find("sliding_attention");
    const json& global = full != params->end() && full->is_object() ? *full : *params;
    DK_ASSIGN_OR_RETURN(theta, JsonNumber(global, "rope_theta", file, theta));
    DK_RETURN_IF_ERROR(ParseRopeScaling(global, file, s));
    if (local != params->end() && local->is_object()) {
      DK_ASSIGN_OR_RETURN(local_theta, JsonNumber(*local, "rope_theta", file, local_theta));
      if (elf::ModelShape scaled; !ParseRopeScaling(*local, file, scaled).ok() ||
                                  !scaled.rope_scaling().type().empty()) {
        return absl::UnimplementedError(absl::StrCat(file, ": RoPE scaling of sliding layers is not supported"));
      }
    }
  }
  const auto scaling = cfg.find("rope_scaling");
  if (scaling != cfg.end()) DK_RETURN_IF_ERROR(ParseRopeScaling(*scaling, file, s));
  s.set_rope_theta(static_cast<float>(theta));
  if (s.family() == elf::ModelShape::GEMMA3) s.set_rope_local_theta(static_cast<float>(local_theta));
  return absl::OkStatus();
}

// Gemma 3's sliding layers: layer_types, or (older configs) every
// sliding_window_pattern-th layer full.
absl::Status ParseGemma3Layers(const json& cfg, const std::string& file, elf::ModelShape& s) {
  if (const auto lt = cfg.find("layer_types"); lt != cfg.end() && lt->is_array()) {
    for (const auto& t : *lt) {
      if (!t.is_string()) return absl::InvalidArgumentError(absl::StrCat(file, ": layer_types holds a non-string"));
      const std::optional<elf::ModelShape::AttentionType> type = elf::ParseAttentionType(t.get<std::string>());
      if (!type) {
        return absl::UnimplementedError(absl::StrCat(file, ": layer type \"", t.get<std::string>(),
                                                     "\" is not supported (full_attention, sliding_attention)"));
      }
      s.add_layer_types(*type);
    }
  } else {
    int64_t pattern = 6;
    for (const char* key : {"sliding_window_pattern", "_sliding_window_pattern"}) {
      DK_ASSIGN_OR_RETURN(pattern, JsonIntInRange(cfg, key, file, pattern, 1, elf::kMaxLayers));
    }
    for (int i = 0; i < s.n_layers(); ++i) {
      s.add_layer_types((i + 1) % pattern == 0 ? elf::ModelShape::FULL_ATTENTION : elf::ModelShape::SLIDING_ATTENTION);
    }
  }
  DK_ASSIGN_OR_RETURN(int32_t window, JsonPositiveInt(cfg, "sliding_window", file, 4096, elf::kMaxDimension));
  s.set_sliding_window(window);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<elf::ModelShape> ShapeFromHfConfig(absl::string_view json_text,
                                                  const std::string& name,
                                                  const std::string& file) {
  json cfg = json::parse(json_text.begin(), json_text.end(), nullptr,
                         /*allow_exceptions=*/false);
  if (cfg.is_discarded()) return absl::InvalidArgumentError(file + ": not valid JSON");
  if (!cfg.is_object()) return absl::InvalidArgumentError(file + ": not a JSON object");
  DK_ASSIGN_OR_RETURN(const elf::ModelShape::Family family, HfFamily(cfg, file));
  const bool gemma3 = family == elf::ModelShape::GEMMA3;
  elf::ModelShape s;
  s.set_name(name);
  s.set_family(family);
  s.set_attention_bias(family == elf::ModelShape::QWEN2);           // Qwen2Attention: q/k/v with bias, o without
  s.set_qk_norm(family == elf::ModelShape::QWEN3 || gemma3);        // q_norm, k_norm per head
  if (gemma3) {
    s.set_ffn_activation(elf::ModelShape::GELU_TANH);
    s.set_norm_plus_one(true);
    s.set_sandwich_norms(true);
    s.set_embedding_scale(true);
    DK_ASSIGN_OR_RETURN(double scalar, JsonNumber(cfg, "query_pre_attn_scalar", file, 0));
    s.set_query_pre_attn_scalar(static_cast<float>(scalar));
  }
  DK_RETURN_IF_ERROR(ParseHfSizes(cfg, file, s));
  DK_ASSIGN_OR_RETURN(double eps, JsonNumber(cfg, "rms_norm_eps", file, 1e-6));
  s.set_rms_eps(static_cast<float>(eps));
  DK_RETURN_IF_ERROR(ParseHfRope(cfg, file, s));
  bool tied = gemma3;  // Gemma3TextConfig's default
  const auto tie = cfg.find("tie_word_embeddings");
  if (tie != cfg.end() && !tie->is_null()) {
    if (!tie->is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": \"tie_word_embeddings\" must be a boolean"));
    }
    tied = tie->get<bool>();
  }
  s.set_tied_embeddings(tied);
  if (gemma3) DK_RETURN_IF_ERROR(ParseGemma3Layers(cfg, file, s));
  // What the sizes imply together (heads dividing, the KV cache's size, ...).
  if (absl::Status st = elf::ValidateModelShape(s); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", st.message()));
  }
  return s;
}

std::string HfConfigJson(const elf::ModelShape& s) {
  const bool llama3_vocab = s.vocab() == 128256;
  const bool qwen2 = s.family() == elf::ModelShape::QWEN2, qwen3 = s.family() == elf::ModelShape::QWEN3,
             gemma3 = s.family() == elf::ModelShape::GEMMA3;
  json cfg = {
      {"architectures",
       {qwen2 ? "Qwen2ForCausalLM" : qwen3 ? "Qwen3ForCausalLM" : gemma3 ? "Gemma3ForCausalLM" : "LlamaForCausalLM"}},
      {"model_type", qwen2 ? "qwen2" : qwen3 ? "qwen3" : gemma3 ? "gemma3_text" : "llama"},
      {"torch_dtype", "bfloat16"},
      {"hidden_size", s.hidden()},
      {"intermediate_size", s.ffn()},
      {"num_attention_heads", s.n_heads()},
      {"num_hidden_layers", s.n_layers()},
      {"num_key_value_heads", s.n_kv_heads()},
      {"head_dim", s.head_dim()},
      {"vocab_size", s.vocab()},
      {"rms_norm_eps", ShortestDouble(s.rms_eps())},
      {"rope_theta", ShortestDouble(s.rope_theta())},
      {"tie_word_embeddings", s.tied_embeddings()},
      {"max_position_embeddings", s.max_context() > 0 ? s.max_context() : 2048},
      {"bos_token_id", llama3_vocab ? 128000 : 1},
      {"eos_token_id", llama3_vocab ? 128001 : 2},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"hidden_act", "silu"},
      {"initializer_range", 0.02},
      {"pretraining_tp", 1},
      {"use_cache", true},
  };
  if (qwen2 || qwen3) {
    // Qwen2Config / Qwen3Config's own keys (Qwen2's biases are not configurable);
    // Qwen2.5's and Qwen3's token ids.
    cfg.erase("mlp_bias");
    cfg.erase("pretraining_tp");
    if (qwen2) cfg.erase("attention_bias");
    cfg["bos_token_id"] = 151643;
    cfg["eos_token_id"] = qwen3 ? 151645 : 151643;
    cfg["use_sliding_window"] = false;
    cfg["sliding_window"] = nullptr;
    cfg["max_window_layers"] = s.n_layers();
  }
  if (gemma3) {
    // Gemma3TextConfig's keys, as google/gemma-3-270m's config.json has them.
    for (const char* key : {"mlp_bias", "pretraining_tp", "hidden_act"}) cfg.erase(key);
    cfg["hidden_activation"] = "gelu_pytorch_tanh";
    cfg["bos_token_id"] = 2;
    cfg["eos_token_id"] = 1;
    cfg["pad_token_id"] = 0;
    // An int in Gemma3TextConfig (256 for the 270M model).
    cfg["query_pre_attn_scalar"] = s.query_pre_attn_scalar() > 0
                                       ? static_cast<int64_t>(std::lround(s.query_pre_attn_scalar()))
                                       : int64_t{s.head_dim()};
    cfg["sliding_window"] = s.sliding_window();
    cfg["rope_local_base_freq"] = ShortestDouble(s.rope_local_theta());
    cfg["layer_types"] = json::array();
    for (int t : s.layer_types()) {
      cfg["layer_types"].push_back(elf::AttentionTypeName(static_cast<elf::ModelShape::AttentionType>(t)));
    }
    cfg["final_logit_softcapping"] = nullptr;
    cfg["attn_logit_softcapping"] = nullptr;
    cfg["use_bidirectional_attention"] = false;
  }
  if (s.rope_scaling().type() == "llama3") {
    const elf::RopeScaling& r = s.rope_scaling();
    cfg["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", ShortestDouble(r.factor())},
        {"low_freq_factor", ShortestDouble(r.low_freq_factor())},
        {"high_freq_factor", ShortestDouble(r.high_freq_factor())},
        {"original_max_position_embeddings", r.original_max_position()},
    };
  } else {
    cfg["rope_scaling"] = nullptr;
  }
  return cfg.dump(2) + "\n";
}

absl::StatusOr<Weights> LoadHfCheckpoint(const std::string& dir, ThreadPool* pool) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat("HF checkpoint directory ", dir, " not found"));
  }
  const std::string config_path = JoinPath(dir, "config.json");
  DK_ASSIGN_OR_RETURN(std::string config_text, ReadTextFile(config_path));
  DK_ASSIGN_OR_RETURN(elf::ModelShape shape,
                      ShapeFromHfConfig(config_text, Basename(dir), config_path));

  // tensor name -> file holding it.
  std::map<std::string, std::string> weight_map;
  const std::string index_path = JoinPath(dir, "model.safetensors.index.json");
  std::string single_file;
  if (FileExists(index_path)) {
    DK_ASSIGN_OR_RETURN(std::string index_text, ReadTextFile(index_path));
    json index = json::parse(index_text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object()) {
      return absl::InvalidArgumentError(index_path + ": not a valid JSON object");
    }
    const auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) {
      return absl::InvalidArgumentError(index_path + ": missing object \"weight_map\"");
    }
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": weight_map entry for \"", it.key(), "\" is not a string"));
      }
      const std::string file = it.value().get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": weight_map entry for \"", it.key(), "\" is not a file name"));
      }
      weight_map[it.key()] = file;
    }
  } else {
    single_file = JoinPath(dir, "model.safetensors");
    if (!FileExists(single_file)) {
      return absl::NotFoundError(absl::StrCat(
          dir, ": neither model.safetensors nor model.safetensors.index.json found"));
    }
  }

  Weights w;
  w.set_source(dir);
  w.set_shape(shape);
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;  // by path
  for (const auto& [name, dims] : ExpectedTensors(shape)) {
    std::string path = single_file;
    if (path.empty()) {
      const auto it = weight_map.find(name);
      if (it == weight_map.end()) {
        return absl::NotFoundError(absl::StrCat("tensor \"", name,
                                                "\" is not in the weight_map of ",
                                                index_path));
      }
      path = JoinPath(dir, it->second);
    }
    auto& file = files[path];
    if (file == nullptr) {
      DK_ASSIGN_OR_RETURN(file, SafetensorsFile::Open(path));
    }
    const SafetensorsTensorInfo* info = file->Find(name);
    if (info == nullptr) {
      return absl::NotFoundError(absl::StrCat("tensor \"", name, "\" (expected shape ",
                                              ShapeStr(dims), ") not found in ", path));
    }
    if (info->shape != dims) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" in ", path,
                                                     " has shape ", ShapeStr(info->shape),
                                                     ", expected ", ShapeStr(dims)));
    }
    DK_ASSIGN_OR_RETURN(Tensor t, file->ReadBf16(*info, pool));
    w.Add(name, std::move(t));
  }
  return w;
}

absl::Status WriteHfCheckpoint(const Weights& w, const std::string& dir, int shards) {
  if (shards < 1 || shards > 99999) {
    return absl::InvalidArgumentError(absl::StrCat("shards ", shards, " is outside [1, 99999]"));
  }
  // mkdir -p: every prefix ending before a '/', then the whole path.
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos < dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (IsDirectory(prefix)) continue;
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create directory ", prefix, ": ", std::strerror(errno)));
    }
  }
  if (!IsDirectory(dir)) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create directory ", dir));
  }
  const elf::ModelShape& shape = w.shape();
  DK_RETURN_IF_ERROR(CheckWeights(w, shape));
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const auto& [name, dims] : ExpectedTensors(shape)) {
    tensors.push_back({name, w.Find(name)});
  }
  std::sort(tensors.begin(), tensors.end());
  if (shards == 1) {
    DK_RETURN_IF_ERROR(WriteSafetensorsBf16(JoinPath(dir, "model.safetensors"), tensors,
                                            {{"format", "pt"}}));
  } else {
    int64_t total = 0;
    for (const auto& [name, t] : tensors) total += t->numel() * 2;
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
    size_t next = 0;
    int64_t written = 0;
    for (int s = 1; s <= shards; ++s) {
      char file[64];
      std::snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", s, shards);
      // Up to this shard's share of the bytes (at least one tensor while any are left).
      std::vector<std::pair<std::string, const Tensor*>> part;
      while (next < tensors.size() &&
             (part.empty() || s == shards || written + tensors[next].second->numel() * 2 <= total * s / shards)) {
        written += tensors[next].second->numel() * 2;
        index["weight_map"][tensors[next].first] = file;
        part.push_back(tensors[next++]);
      }
      DK_RETURN_IF_ERROR(WriteSafetensorsBf16(JoinPath(dir, file), part, {{"format", "pt"}}));
    }
    const std::string index_path = JoinPath(dir, "model.safetensors.index.json");
    std::ofstream idx(index_path, std::ios::binary | std::ios::trunc);
    idx << index.dump(2) << "\n";
    idx.close();
    if (!idx) return absl::DataLossError(absl::StrCat("error writing ", index_path));
  }
  const std::string config_path = JoinPath(dir, "config.json");
  std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
  out << HfConfigJson(shape);
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", config_path));
  return absl::OkStatus();
}

}  // namespace dk::weights
