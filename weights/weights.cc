#include "weights/weights.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "util/check.h"
#include "util/status.h"
#include "weights/dequant.h"
#include "weights/gguf.h"
#include "weights/parallel.h"
#include "weights/safetensors.h"
#include "weights/sha256.h"

namespace dk::weights {
namespace {

using json = nlohmann::json;

std::string ShapeStr(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string Basename(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string JoinPath(const std::string& dir, const std::string& file) {
  if (dir.empty() || dir.back() == '/') return dir + file;
  return dir + "/" + file;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return ss.str();
}

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

// --- config.json helpers -------------------------------------------------------------

absl::StatusOr<int32_t> JsonPositiveInt(const json& cfg, const char* key,
                                        const std::string& file, int64_t default_value) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) {
    if (default_value > 0) return static_cast<int32_t>(default_value);
    return absl::InvalidArgumentError(absl::StrCat(file, ": missing \"", key, "\""));
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": \"", key, "\" must be a positive integer, got ", it->dump()));
  }
  return static_cast<int32_t>(it->get<int64_t>());
}

absl::StatusOr<double> JsonNumber(const json& obj, const char* key, const std::string& file,
                                  double default_value) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return default_value;
  if (!it->is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": \"", key, "\" must be a number, got ", it->dump()));
  }
  return it->get<double>();
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
  DK_ASSIGN_OR_RETURN(double orig,
                      JsonNumber(rs, "original_max_position_embeddings", file, 8192));
  out->set_factor(static_cast<float>(factor));
  out->set_low_freq_factor(static_cast<float>(low));
  out->set_high_freq_factor(static_cast<float>(high));
  out->set_original_max_position(static_cast<int64_t>(orig));
  return absl::OkStatus();
}

// --- GGUF helpers --------------------------------------------------------------------

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; "" when the
// tensor has no HF counterpart (e.g. rope_freqs.weight).
std::string GgufNameToHf(absl::string_view name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (!absl::ConsumePrefix(&name, "blk.")) return "";
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos) return "";
  int layer = 0;
  if (!absl::SimpleAtoi(name.substr(0, dot), &layer) || layer < 0) return "";
  const absl::string_view rest = name.substr(dot + 1);
  static constexpr std::pair<const char*, const char*> kMap[] = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  for (const auto& [gguf, hf] : kMap) {
    if (rest == gguf) return absl::StrCat("model.layers.", layer, ".", hf);
  }
  return "";
}

absl::StatusOr<int32_t> GgufPositiveInt(const GgufFile& f, const std::string& key,
                                        int64_t default_value) {
  if (f.Find(key) == nullptr) {
    if (default_value > 0) return static_cast<int32_t>(default_value);
    return absl::NotFoundError(absl::StrCat(f.name(), ": missing metadata key ", key));
  }
  DK_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v <= 0 || v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.name(), ": metadata ", key, " = ", v, " is not a positive int32"));
  }
  return static_cast<int32_t>(v);
}

absl::StatusOr<double> GgufNumber(const GgufFile& f, const std::string& key,
                                  double default_value) {
  if (f.Find(key) == nullptr) return default_value;
  return f.GetDouble(key);
}

std::string ToLowerSnake(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.') {
      out.push_back(c);
    } else {
      out.push_back('_');
    }
  }
  return out;
}

absl::StatusOr<elf::ModelShape> ShapeFromGguf(const GgufFile& f, const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch != "llama") {
    return absl::UnimplementedError(absl::StrCat(
        path, ": GGUF architecture \"", arch, "\" is not supported (only llama)"));
  }
  elf::ModelShape s;
  DK_ASSIGN_OR_RETURN(int32_t layers, GgufPositiveInt(f, "llama.block_count", 0));
  DK_ASSIGN_OR_RETURN(int32_t hidden, GgufPositiveInt(f, "llama.embedding_length", 0));
  DK_ASSIGN_OR_RETURN(int32_t ffn, GgufPositiveInt(f, "llama.feed_forward_length", 0));
  DK_ASSIGN_OR_RETURN(int32_t heads, GgufPositiveInt(f, "llama.attention.head_count", 0));
  DK_ASSIGN_OR_RETURN(int32_t kv_heads,
                      GgufPositiveInt(f, "llama.attention.head_count_kv", heads));
  DK_ASSIGN_OR_RETURN(int32_t head_dim,
                      GgufPositiveInt(f, "llama.rope.dimension_count", hidden / heads));
  if (f.Find("llama.attention.key_length") != nullptr) {
    DK_ASSIGN_OR_RETURN(head_dim, GgufPositiveInt(f, "llama.attention.key_length", 0));
  }
  DK_ASSIGN_OR_RETURN(int32_t context, GgufPositiveInt(f, "llama.context_length", 2048));
  int32_t vocab = 0;
  if (f.Find("tokenizer.ggml.tokens") != nullptr) {
    DK_ASSIGN_OR_RETURN(const GgufArray* tokens,
                        f.Find("tokenizer.ggml.tokens")->AsArray());
    vocab = static_cast<int32_t>(tokens->elements.size());
  } else {
    DK_ASSIGN_OR_RETURN(vocab, GgufPositiveInt(f, "llama.vocab_size", 0));
  }
  DK_ASSIGN_OR_RETURN(double theta, GgufNumber(f, "llama.rope.freq_base", 10000.0));
  DK_ASSIGN_OR_RETURN(double eps,
                      GgufNumber(f, "llama.attention.layer_norm_rms_epsilon", 1e-5));
  if (f.Find("llama.rope.scaling.type") != nullptr) {
    DK_ASSIGN_OR_RETURN(std::string type, f.GetString("llama.rope.scaling.type"));
    if (type != "none") {
      return absl::UnimplementedError(absl::StrCat(
          path, ": rope scaling type \"", type, "\" is not supported for GGUF"));
    }
  }
  std::string name;
  if (f.Find("general.basename") != nullptr) {
    DK_ASSIGN_OR_RETURN(std::string base, f.GetString("general.basename"));
    name = base;
    if (f.Find("general.size_label") != nullptr) {
      DK_ASSIGN_OR_RETURN(std::string size, f.GetString("general.size_label"));
      name = absl::StrCat(base, "_", size);
    }
  } else {
    name = Basename(path);
    if (absl::EndsWith(name, ".gguf")) name.resize(name.size() - 5);
  }
  s.set_name(ToLowerSnake(name));
  s.set_n_layers(layers);
  s.set_hidden(hidden);
  s.set_n_heads(heads);
  s.set_n_kv_heads(kv_heads);
  s.set_head_dim(head_dim);
  s.set_ffn(ffn);
  s.set_vocab(vocab);
  s.set_rms_eps(static_cast<float>(eps));
  s.set_rope_theta(static_cast<float>(theta));
  s.set_tied_embeddings(f.FindTensor("output.weight") == nullptr);
  s.set_max_context(context);
  return s;
}

// --- synthetic -----------------------------------------------------------------------

uint64_t Fnv1a64(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

inline uint64_t Mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool IsNormWeight(absl::string_view name) { return absl::EndsWith(name, "norm.weight"); }

uint64_t SyntheticTensorKey(uint64_t seed, absl::string_view name) {
  return Mix64(Mix64(seed ^ 0x6a09e667f3bcc908ULL) ^ Fnv1a64(name));
}

bf16 SyntheticElement(uint64_t key, uint64_t i) {
  // a = 0.02 * sqrt(3): uniform on [-a, a] has std 0.02. q in [-2^23, 2^23) times
  // a / 2^23 is one f32 multiply of exact operands, so the result is the same on
  // every machine and compiler (no FMA can apply).
  constexpr float kScale = static_cast<float>(0.034641016151377546 / 8388608.0);
  const uint64_t z = Mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
  const int32_t q = static_cast<int32_t>(z >> 40) - (1 << 23);
  return F32ToBf16(static_cast<float>(q) * kScale);
}

}  // namespace

// --- Tensor / Weights -------------------------------------------------------------------

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void Weights::Add(std::string name, Tensor tensor) {
  tensors_[std::move(name)] = std::move(tensor);
}

const Tensor* Weights::Find(absl::string_view name) const {
  const auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<const Tensor*> Weights::Get(
    absl::string_view name, const std::vector<int64_t>& expected_shape) const {
  const Tensor* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor \"", name, "\" (expected shape ",
                                            ShapeStr(expected_shape), ") not found in ",
                                            source_));
  }
  if (t->shape != expected_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor \"", name, "\" in ", source_, " has shape ", ShapeStr(t->shape),
        ", expected ", ShapeStr(expected_shape)));
  }
  return t;
}

std::vector<std::string> Weights::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

int64_t Weights::total_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : tensors_) bytes += t.numel() * int64_t{sizeof(bf16)};
  return bytes;
}

std::string Weights::Digest() const {
  static_assert(sizeof(bf16) == 2, "");
  Sha256 h;
  for (const auto& [name, t] : tensors_) {
    h.Update(name.data(), name.size() + 1);  // includes the NUL
    uint8_t rank[4];
    const uint32_t r = static_cast<uint32_t>(t.shape.size());
    for (int i = 0; i < 4; ++i) rank[i] = static_cast<uint8_t>(r >> (8 * i));
    h.Update(rank, 4);
    for (int64_t d : t.shape) {
      uint8_t b[8];
      for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(static_cast<uint64_t>(d) >> (8 * i));
      h.Update(b, 8);
    }
    h.Update(t.data.data(), static_cast<size_t>(t.numel()) * 2);  // host is little-endian
  }
  return absl::StrCat("sha256:", h.HexFinal());
}

std::vector<std::pair<std::string, std::vector<int64_t>>> ExpectedTensors(
    const elf::ModelShape& s) {
  const int64_t hidden = s.hidden();
  const int64_t q_rows = int64_t{s.n_heads()} * s.head_dim();
  const int64_t kv_rows = int64_t{s.n_kv_heads()} * s.head_dim();
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {s.vocab(), hidden}});
  for (int l = 0; l < s.n_layers(); ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    out.push_back({p + "input_layernorm.weight", {hidden}});
    out.push_back({p + "self_attn.q_proj.weight", {q_rows, hidden}});
    out.push_back({p + "self_attn.k_proj.weight", {kv_rows, hidden}});
    out.push_back({p + "self_attn.v_proj.weight", {kv_rows, hidden}});
    out.push_back({p + "self_attn.o_proj.weight", {hidden, q_rows}});
    out.push_back({p + "post_attention_layernorm.weight", {hidden}});
    out.push_back({p + "mlp.gate_proj.weight", {s.ffn(), hidden}});
    out.push_back({p + "mlp.up_proj.weight", {s.ffn(), hidden}});
    out.push_back({p + "mlp.down_proj.weight", {hidden, s.ffn()}});
  }
  out.push_back({"model.norm.weight", {hidden}});
  if (!s.tied_embeddings()) out.push_back({"lm_head.weight", {s.vocab(), hidden}});
  return out;
}

absl::Status CheckWeights(const Weights& w, const elf::ModelShape& shape) {
  for (const auto& [name, dims] : ExpectedTensors(shape)) {
    DK_RETURN_IF_ERROR(w.Get(name, dims).status());
  }
  return absl::OkStatus();
}

// --- HF checkpoints ----------------------------------------------------------------------

absl::StatusOr<elf::ModelShape> ShapeFromHfConfig(absl::string_view json_text,
                                                  const std::string& name,
                                                  const std::string& file) {
  json cfg = json::parse(json_text.begin(), json_text.end(), nullptr,
                         /*allow_exceptions=*/false);
  if (cfg.is_discarded()) return absl::InvalidArgumentError(file + ": not valid JSON");
  if (!cfg.is_object()) return absl::InvalidArgumentError(file + ": not a JSON object");
  const auto model_type = cfg.find("model_type");
  if (model_type != cfg.end() && model_type->is_string() &&
      model_type->get<std::string>() != "llama") {
    return absl::UnimplementedError(absl::StrCat(file, ": model_type \"",
                                                 model_type->get<std::string>(),
                                                 "\" is not supported (only llama)"));
  }
  elf::ModelShape s;
  s.set_name(name);
  DK_ASSIGN_OR_RETURN(int32_t hidden, JsonPositiveInt(cfg, "hidden_size", file, 0));
  DK_ASSIGN_OR_RETURN(int32_t ffn, JsonPositiveInt(cfg, "intermediate_size", file, 0));
  DK_ASSIGN_OR_RETURN(int32_t heads, JsonPositiveInt(cfg, "num_attention_heads", file, 0));
  DK_ASSIGN_OR_RETURN(int32_t layers, JsonPositiveInt(cfg, "num_hidden_layers", file, 0));
  DK_ASSIGN_OR_RETURN(int32_t kv_heads,
                      JsonPositiveInt(cfg, "num_key_value_heads", file, heads));
  DK_ASSIGN_OR_RETURN(int32_t head_dim, JsonPositiveInt(cfg, "head_dim", file,
                                                        hidden / heads));
  DK_ASSIGN_OR_RETURN(int32_t vocab, JsonPositiveInt(cfg, "vocab_size", file, 0));
  DK_ASSIGN_OR_RETURN(int32_t max_pos,
                      JsonPositiveInt(cfg, "max_position_embeddings", file, 2048));
  DK_ASSIGN_OR_RETURN(double eps, JsonNumber(cfg, "rms_norm_eps", file, 1e-6));
  double theta = 10000.0;
  // transformers >= 5 writes rope_theta and the scaling inside rope_parameters.
  const auto params = cfg.find("rope_parameters");
  if (params != cfg.end() && params->is_object()) {
    DK_ASSIGN_OR_RETURN(theta, JsonNumber(*params, "rope_theta", file, theta));
    DK_RETURN_IF_ERROR(ParseRopeScaling(*params, file, s));
  }
  DK_ASSIGN_OR_RETURN(theta, JsonNumber(cfg, "rope_theta", file, theta));
  const auto scaling = cfg.find("rope_scaling");
  if (scaling != cfg.end()) DK_RETURN_IF_ERROR(ParseRopeScaling(*scaling, file, s));
  bool tied = false;
  const auto tie = cfg.find("tie_word_embeddings");
  if (tie != cfg.end() && !tie->is_null()) {
    if (!tie->is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": \"tie_word_embeddings\" must be a boolean"));
    }
    tied = tie->get<bool>();
  }
  s.set_n_layers(layers);
  s.set_hidden(hidden);
  s.set_n_heads(heads);
  s.set_n_kv_heads(kv_heads);
  s.set_head_dim(head_dim);
  s.set_ffn(ffn);
  s.set_vocab(vocab);
  s.set_rms_eps(static_cast<float>(eps));
  s.set_rope_theta(static_cast<float>(theta));
  s.set_tied_embeddings(tied);
  s.set_max_context(max_pos);
  return s;
}

std::string HfConfigJson(const elf::ModelShape& s) {
  const bool llama3_vocab = s.vocab() == 128256;
  json cfg = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
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

absl::StatusOr<Weights> LoadHfCheckpoint(const std::string& dir) {
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
    DK_ASSIGN_OR_RETURN(Tensor t, file->ReadBf16(*info));
    w.Add(name, std::move(t));
  }
  return w;
}

// --- GGUF ------------------------------------------------------------------------------

absl::StatusOr<Weights> LoadGguf(const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  DK_ASSIGN_OR_RETURN(elf::ModelShape shape, ShapeFromGguf(*f, path));
  std::map<std::string, std::vector<int64_t>> expected;
  for (auto& [name, dims] : ExpectedTensors(shape)) expected[name] = dims;

  Weights w;
  w.set_source(path);
  w.set_shape(shape);
  for (const GgufTensorInfo& info : f->tensors()) {
    const std::string name = GgufNameToHf(info.name);
    const auto exp = expected.find(name);
    if (exp == expected.end()) continue;  // no HF counterpart (e.g. rope_freqs)
    auto where = [&] {
      return absl::StrCat("tensor \"", info.name, "\" (", name, ") in ", path);
    };
    Tensor t;
    t.shape.assign(info.dims.rbegin(), info.dims.rend());  // ggml order -> PyTorch order
    if (t.shape != exp->second) {
      return absl::InvalidArgumentError(absl::StrCat(where(), " has shape ",
                                                     ShapeStr(t.shape), ", expected ",
                                                     ShapeStr(exp->second)));
    }
    const int64_t cols = t.shape.back();
    const int64_t rows = cols == 0 ? 0 : t.numel() / cols;
    absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(info.type, cols);
    if (!row_bytes.ok()) {
      return absl::Status(row_bytes.status().code(),
                          absl::StrCat(where(), ": ", row_bytes.status().message()));
    }
    absl::StatusOr<absl::Span<const uint8_t>> bytes = f->TensorData(info);
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat(where(), ": ", bytes.status().message()));
    }
    if (bytes->size() != *row_bytes * static_cast<uint64_t>(rows)) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": ", bytes->size(),
                                                     " bytes of data, expected ",
                                                     *row_bytes * rows));
    }
    // Q and K rows are stored permuted for interleaved RoPE; undo it as transformers'
    // GGUF loader does (n_head = attention heads for Q, KV heads for K).
    int64_t n_head = 0;
    if (absl::EndsWith(name, "q_proj.weight")) n_head = shape.n_heads();
    if (absl::EndsWith(name, "k_proj.weight")) n_head = shape.n_kv_heads();
    if (n_head > 0 && rows % (2 * n_head) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": ", rows, " rows cannot be split into ", n_head, " heads x 2 halves"));
    }
    t.data = AlignedBuffer<bf16>(static_cast<size_t>(t.numel()));
    if (t.numel() > 0 && t.data.empty()) {
      return absl::ResourceExhaustedError(absl::StrCat(where(), ": out of memory"));
    }
    const uint8_t* src = bytes->data();
    bf16* dst = t.data.data();
    const GgmlType type = info.type;
    const uint64_t rb = *row_bytes;
    const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(cols, 1));
    ParallelChunks(rows, rows_per_chunk, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t hf_row = n_head > 0 ? GgufQkRowToHfRow(r, rows, n_head) : r;
        DequantizeToBf16(type, src + r * rb, cols, dst + hf_row * cols);
      }
    });
    w.Add(name, std::move(t));
  }
  DK_RETURN_IF_ERROR(CheckWeights(w, shape));
  return w;
}

absl::StatusOr<Weights> LoadWeights(const std::string& path) {
  if (IsDirectory(path)) return LoadHfCheckpoint(path);
  if (absl::EndsWith(path, ".gguf")) return LoadGguf(path);
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot tell the format of ", path,
      ": expected an HF checkpoint directory or a .gguf file"));
}

// --- synthetic ----------------------------------------------------------------------------

Weights MakeSyntheticWeights(const elf::ModelShape& shape, uint64_t seed) {
  Weights w;
  w.set_source(absl::StrCat("synthetic(seed=", seed, ")"));
  w.set_shape(shape);
  struct Job {
    bf16* data;
    int64_t numel;
    uint64_t key;
    bool norm;
  };
  std::vector<Job> jobs;
  const auto expected = ExpectedTensors(shape);
  for (const auto& [name, dims] : expected) {
    Tensor t;
    t.shape = dims;
    t.data = AlignedBuffer<bf16>(static_cast<size_t>(t.numel()));
    DK_CHECK(t.numel() == 0 || !t.data.empty());  // out of memory
    w.Add(name, std::move(t));
  }
  for (const auto& [name, dims] : expected) {
    Tensor* t = const_cast<Tensor*>(w.Find(name));
    jobs.push_back({t->data.data(), t->numel(), SyntheticTensorKey(seed, name),
                    IsNormWeight(name)});
  }
  // Tasks of at most 1M elements across all tensors: balanced for any shape.
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<std::pair<int, int64_t>> tasks;  // (job, begin)
  for (int j = 0; j < static_cast<int>(jobs.size()); ++j) {
    for (int64_t b = 0; b < jobs[j].numel; b += kChunk) tasks.push_back({j, b});
  }
  SharedThreadPool().Run(static_cast<int64_t>(tasks.size()), [&](int64_t task, int) {
    const Job& job = jobs[tasks[task].first];
    const int64_t begin = tasks[task].second;
    const int64_t end = std::min(begin + kChunk, job.numel);
    if (job.norm) {
      for (int64_t i = begin; i < end; ++i) job.data[i] = bf16{0x3F80};  // 1.0
      return;
    }
    for (int64_t i = begin; i < end; ++i) job.data[i] = SyntheticElement(job.key, i);
  });
  return w;
}

absl::Status WriteHfCheckpoint(const Weights& w, const std::string& dir) {
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
  DK_RETURN_IF_ERROR(WriteSafetensorsBf16(JoinPath(dir, "model.safetensors"), tensors,
                                          {{"format", "pt"}}));
  const std::string config_path = JoinPath(dir, "config.json");
  std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
  out << HfConfigJson(shape);
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", config_path));
  return absl::OkStatus();
}

}  // namespace dk::weights
