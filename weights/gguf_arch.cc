#include "weights/gguf_arch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "elf/elf.h"
#include "util/printable.h"
#include "util/status.h"
#include "weights/common.h"

namespace dk::weights {
namespace {

// A positive metadata integer of at most `max` (elf/elf.h's limits), checked before
// anything is sized by it.
absl::StatusOr<int32_t> GgufPositiveInt(const GgufFile& f, const std::string& key,
                                        int64_t default_value, int64_t max) {
  if (f.Find(key) == nullptr) {
    if (default_value > 0 && default_value <= max) return static_cast<int32_t>(default_value);
    if (default_value > max) {
      return absl::InvalidArgumentError(absl::StrCat(f.name(), ": metadata ", key, " (default ",
                                                     default_value, ") exceeds the limit ", max));
    }
    return absl::NotFoundError(absl::StrCat(f.name(), ": missing metadata key ", key));
  }
  DK_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v <= 0 || v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.name(), ": metadata ", key, " = ", v, " is not a positive int32"));
  }
  if (v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.name(), ": metadata ", key, " = ", v, " exceeds the limit ", max));
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

// The sizes under `<arch>.`, each bounded by elf/elf.h's limits. head_dim is
// attention.key_length where the converter writes it (Qwen3, Gemma 3: independent of
// hidden / heads), else llama's rope.dimension_count, else hidden / heads (Qwen2).
absl::Status ReadSizes(const GgufFile& f, const std::string& arch, const std::string& path,
                       elf::ModelShape& s) {
  const std::string p = arch + ".";
  DK_ASSIGN_OR_RETURN(int32_t v, GgufPositiveInt(f, p + "block_count", 0, elf::kMaxLayers));
  s.set_n_layers(v);
  DK_ASSIGN_OR_RETURN(v, GgufPositiveInt(f, p + "embedding_length", 0, elf::kMaxDimension));
  s.set_hidden(v);
  DK_ASSIGN_OR_RETURN(v, GgufPositiveInt(f, p + "feed_forward_length", 0, elf::kMaxDimension));
  s.set_ffn(v);
  DK_ASSIGN_OR_RETURN(v, GgufPositiveInt(f, p + "attention.head_count", 0, elf::kMaxHeads));
  s.set_n_heads(v);
  DK_ASSIGN_OR_RETURN(v, GgufPositiveInt(f, p + "attention.head_count_kv", s.n_heads(), elf::kMaxHeads));
  s.set_n_kv_heads(v);
  const std::string head_dim_key =
      f.Find(p + "attention.key_length") != nullptr ? p + "attention.key_length" : p + "rope.dimension_count";
  DK_ASSIGN_OR_RETURN(v, GgufPositiveInt(f, head_dim_key, s.hidden() / s.n_heads(), elf::kMaxHeadDim));
  s.set_head_dim(v);
  DK_ASSIGN_OR_RETURN(v, GgufPositiveInt(f, p + "context_length", 2048, elf::kMaxDimension));
  s.set_max_context(v);
  if (const GgufValue* tokens_value = f.Find("tokenizer.ggml.tokens"); tokens_value != nullptr) {
    DK_ASSIGN_OR_RETURN(const GgufArray* tokens, tokens_value->AsArray());
    if (tokens->elements.size() > static_cast<uint64_t>(elf::kMaxDimension)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tokenizer.ggml.tokens has ",
                                                     tokens->elements.size(),
                                                     " entries, more than the vocabulary limit ",
                                                     elf::kMaxDimension));
    }
    s.set_vocab(static_cast<int32_t>(tokens->elements.size()));
  } else {
    DK_ASSIGN_OR_RETURN(v, GgufPositiveInt(f, p + "vocab_size", 0, elf::kMaxDimension));
    s.set_vocab(v);
  }
  return absl::OkStatus();
}

// Features the converters may write that the graph does not have, each refused by key.
absl::Status RefuseUnsupported(const GgufFile& f, const std::string& arch, const std::string& path) {
  const std::string p = arch + ".";
  if (f.Find(p + "rope.scaling.type") != nullptr) {
    // Llama 3's scaling is a rope_freqs tensor (ReadRopeFreqs); Gemma 3 >= 4B writes
    // "linear" (global layers only), Qwen2.5 long-context files "yarn".
    DK_ASSIGN_OR_RETURN(std::string type, f.GetString(p + "rope.scaling.type"));
    if (type != "none") {
      return absl::UnimplementedError(absl::StrCat(path, ": ", p, "rope.scaling.type \"", Printable(type),
                                                   "\" is not supported for GGUF"));
    }
  }
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    DK_ASSIGN_OR_RETURN(double cap, GgufNumber(f, p + key, 0.0));
    if (cap != 0.0) {
      return absl::UnimplementedError(absl::StrCat(path, ": ", p, key, " = ", cap, " is not supported (0)"));
    }
  }
  // A per-layer pattern written out (llama.cpp's Gemma 3n): the fixed one below would ignore it.
  if (f.Find(p + "attention.sliding_window_pattern") != nullptr) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": ", p, "attention.sliding_window_pattern is not supported"));
  }
  return absl::OkStatus();
}

// Llama 3's per-frequency RoPE factors for `head_dim` / 2 rotary frequencies of base
// `theta` under `r`, as HF's llama3 rope initialisation (and llama.cpp's converter,
// which stores them) computes them: the factor each frequency is divided by, 1 for
// wavelengths under original / high_freq_factor, `factor` above original /
// low_freq_factor, a smooth blend between.
std::vector<double> Llama3RopeFactors(double theta, int head_dim, const elf::RopeScaling& r) {
  const double low_wavelen = r.original_max_position() / r.low_freq_factor();
  const double high_wavelen = r.original_max_position() / r.high_freq_factor();
  std::vector<double> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0);
    } else if (wavelen > low_wavelen) {
      out.push_back(r.factor());
    } else {
      const double smooth = (r.original_max_position() / wavelen - r.low_freq_factor()) /
                            (r.high_freq_factor() - r.low_freq_factor());
      out.push_back(1.0 / ((1.0 - smooth) / r.factor() + smooth));
    }
  }
  return out;
}

// llama.cpp's converter writes Llama 3's RoPE scaling (config.json's rope_scaling,
// rope_type llama3) not as metadata but as the F32 tensor rope_freqs.weight: one
// factor per rotary frequency, by which llama.cpp divides it (ggml_rope_ext's
// freq_factors). The parameters are recovered by matching the table against
// Llama3RopeFactors: factor = its largest element, low_freq_factor /
// high_freq_factor / original_max_position_embeddings from the sets the Llama 3.x
// releases use (1 / 4 / 8192 in 3.1, 3.2, 3.3; the others are there for fine-tunes
// that changed the context), every element within 1e-5 relative (the converter
// computes the frequencies in float32, a few ulp from these double ones; a table of
// other parameters differs in the blend by far more). A table no set reproduces is
// refused: running without it, or with other factors, would be another model.
absl::Status ReadRopeFreqs(const GgufFile& f, const std::string& path, elf::ModelShape& s) {
  const GgufTensorInfo* info = f.FindTensor("rope_freqs.weight");
  if (info == nullptr) return absl::OkStatus();
  const int64_t n = s.head_dim() / 2;
  if (info->type != GgmlType::kF32 || info->dims != std::vector<int64_t>{n}) {
    absl::StatusOr<GgmlTypeTraits> traits = GetGgmlTypeTraits(info->type);
    return absl::UnimplementedError(absl::StrCat(
        path, ": tensor rope_freqs.weight (Llama 3 RoPE scaling factors) is ",
        traits.ok() ? traits->name : "an unknown type", " with ", info->dims.size(),
        " dims; only F32 [head_dim / 2 = ", n, "] is supported"));
  }
  DK_ASSIGN_OR_RETURN(absl::Span<const uint8_t> bytes, f.TensorData(*info));
  if (bytes.size() != static_cast<size_t>(n) * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor rope_freqs.weight has ", bytes.size(), " bytes, expected ", n * 4));
  }
  std::vector<float> got(static_cast<size_t>(n));
  std::memcpy(got.data(), bytes.data(), bytes.size());
  float factor = 0.0f;
  for (float v : got) {
    if (!std::isfinite(v) || !(v > 0.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor rope_freqs.weight holds ", v, "; factors must be finite and > 0"));
    }
    factor = std::max(factor, v);
  }
  struct Params {
    float low, high;
    int64_t original;
  };
  constexpr Params kSets[] = {{1, 4, 8192},  {1, 4, 4096},  {1, 4, 16384}, {1, 4, 32768},
                              {1, 4, 65536}, {1, 4, 131072}, {1, 4, 2048}};
  for (const Params& p : kSets) {
    elf::RopeScaling r;
    r.set_type("llama3");
    r.set_factor(factor);
    r.set_low_freq_factor(p.low);
    r.set_high_freq_factor(p.high);
    r.set_original_max_position(p.original);
    const std::vector<double> want = Llama3RopeFactors(s.rope_theta(), s.head_dim(), r);
    bool match = true;
    for (int64_t i = 0; i < n && match; ++i) {
      match = std::abs(got[i] - want[i]) <= 1e-5 * std::max(1.0, std::abs(want[i]));
    }
    if (!match) continue;
    // All ones: no element reaches the low-frequency band, nothing is scaled.
    if (factor != 1.0f) *s.mutable_rope_scaling() = r;
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat(
      path, ": tensor rope_freqs.weight (", n, " RoPE frequency factors, largest ", factor,
      ") matches no Llama 3 rope scaling (factor = the largest, low_freq_factor 1, high_freq_factor 4, "
      "original_max_position_embeddings 2048 ... 131072); other per-frequency factors are not supported"));
}

// What a Gemma 3 GGUF leaves to the architecture (llama.cpp's loader fixes the same):
// every sixth layer global, the other five sliding over attention.sliding_window
// positions with RoPE base 1e4 (rope.freq_base is the global layers'); the attention
// scale head_dim^-0.5, except for the 27B (62 layers) whose HF query_pre_attn_scalar
// is hidden / heads. Without a window (0 or absent) every layer is global.
absl::Status ReadGemma3(const GgufFile& f, elf::ModelShape& s) {
  s.set_qk_norm(true);
  s.set_ffn_activation(elf::ModelShape::GELU_TANH);
  s.set_norm_plus_one(true);
  s.set_sandwich_norms(true);
  s.set_embedding_scale(true);
  s.set_rope_local_theta(10000.0f);
  s.set_query_pre_attn_scalar(
      static_cast<float>(s.n_layers() == 62 ? s.hidden() / s.n_heads() : s.head_dim()));
  int32_t window = 0;
  if (f.Find("gemma3.attention.sliding_window") != nullptr) {
    DK_ASSIGN_OR_RETURN(int64_t v, f.GetInt("gemma3.attention.sliding_window"));
    if (v < 0 || v > elf::kMaxDimension) {
      return absl::InvalidArgumentError(absl::StrCat(
          f.name(), ": metadata gemma3.attention.sliding_window = ", v, " is out of [0, ", elf::kMaxDimension, "]"));
    }
    window = static_cast<int32_t>(v);
  }
  if (window == 0) return absl::OkStatus();
  s.set_sliding_window(window);
  constexpr int kPattern = 6;
  for (int i = 0; i < s.n_layers(); ++i) {
    s.add_layer_types((i + 1) % kPattern == 0 ? elf::ModelShape::FULL_ATTENTION : elf::ModelShape::SLIDING_ATTENTION);
  }
  return absl::OkStatus();
}

// general.basename + "_" + general.size_label in lower case, else the file stem.
absl::StatusOr<std::string> ShapeName(const GgufFile& f, const std::string& path) {
  std::string name;
  if (f.Find("general.basename") != nullptr) {
    DK_ASSIGN_OR_RETURN(name, f.GetString("general.basename"));
    if (f.Find("general.size_label") != nullptr) {
      DK_ASSIGN_OR_RETURN(std::string size, f.GetString("general.size_label"));
      name = absl::StrCat(name, "_", size);
    }
  } else {
    name = Basename(path);
    if (absl::EndsWith(name, ".gguf")) name.resize(name.size() - 5);
  }
  return ToLowerSnake(name);
}

struct NameRule {
  const char* gguf;
  const char* hf;
};
// Per layer, every family (a family without q/k norms or biases has no such tensor
// in ExpectedTensors, so the loader skips them).
constexpr NameRule kLayerNames[] = {
    {"attn_norm", "input_layernorm"},   {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},     {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},          {"ffn_down", "mlp.down_proj"},
};
// Llama and Qwen: the norm before the FFN is HF's post_attention_layernorm.
constexpr NameRule kTwoNorms[] = {{"ffn_norm", "post_attention_layernorm"}};
// Gemma 3's sandwich: post_attention_norm after attention, ffn_norm before the FFN,
// post_ffw_norm after it.
constexpr NameRule kSandwichNorms[] = {{"post_attention_norm", "post_attention_layernorm"},
                                       {"ffn_norm", "pre_feedforward_layernorm"},
                                       {"post_ffw_norm", "post_feedforward_layernorm"}};

}  // namespace

absl::StatusOr<elf::ModelShape> ShapeFromGguf(const GgufFile& f, const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  // The architecture names are the families' names; the string stays the metadata keys' prefix.
  const std::optional<elf::ModelShape::Family> family = elf::ParseFamily(arch);
  if (!family) {
    return absl::UnimplementedError(absl::StrCat(path, ": GGUF general.architecture \"", Printable(arch),
                                                 "\" is not supported (llama, qwen2, qwen3, gemma3)"));
  }
  DK_RETURN_IF_ERROR(RefuseUnsupported(f, arch, path));
  elf::ModelShape s;
  DK_ASSIGN_OR_RETURN(std::string name, ShapeName(f, path));
  s.set_name(name);
  s.set_family(*family);
  DK_RETURN_IF_ERROR(ReadSizes(f, arch, path, s));
  // The defaults are each family's HF config defaults; the converters write both keys.
  DK_ASSIGN_OR_RETURN(double theta, GgufNumber(f, arch + ".rope.freq_base", *family == elf::ModelShape::GEMMA3 ? 1e6 : 1e4));
  DK_ASSIGN_OR_RETURN(double eps,
                      GgufNumber(f, arch + ".attention.layer_norm_rms_epsilon", *family == elf::ModelShape::LLAMA ? 1e-5 : 1e-6));
  s.set_rms_eps(static_cast<float>(eps));
  s.set_rope_theta(static_cast<float>(theta));
  DK_RETURN_IF_ERROR(ReadRopeFreqs(f, path, s));
  s.set_tied_embeddings(f.FindTensor("output.weight") == nullptr);
  s.set_attention_bias(*family == elf::ModelShape::QWEN2);  // Qwen2: q/k/v biases (attn_q.bias, ...), o without
  s.set_qk_norm(*family == elf::ModelShape::QWEN3);        // Qwen3: attn_q_norm / attn_k_norm per head
  if (*family == elf::ModelShape::GEMMA3) DK_RETURN_IF_ERROR(ReadGemma3(f, s));
  // What the sizes imply together (heads dividing, the KV cache's size, ...).
  if (absl::Status st = elf::ValidateModelShape(s); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": metadata: ", st.message()));
  }
  return s;
}

std::string GgufNameToHf(const elf::ModelShape& shape, absl::string_view name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (!absl::ConsumePrefix(&name, "blk.")) return "";
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos) return "";
  int layer = 0;
  if (!absl::SimpleAtoi(name.substr(0, dot), &layer) || layer < 0) return "";
  absl::string_view stem = name.substr(dot + 1);
  absl::string_view suffix;
  for (absl::string_view s : {".weight", ".bias"}) {
    if (absl::ConsumeSuffix(&stem, s)) suffix = s;
  }
  if (suffix.empty()) return "";
  auto find = [&](const auto& rules) -> std::string {
    for (const NameRule& r : rules) {
      if (stem == r.gguf) return absl::StrCat("model.layers.", layer, ".", r.hf, suffix);
    }
    return "";
  };
  std::string hf = find(kLayerNames);
  if (hf.empty()) hf = shape.sandwich_norms() ? find(kSandwichNorms) : find(kTwoNorms);
  return hf;
}

int64_t GgufQkPermutedHeads(const elf::ModelShape& shape, absl::string_view hf_name) {
  if (shape.family() != elf::ModelShape::LLAMA) return 0;
  if (absl::EndsWith(hf_name, "q_proj.weight")) return shape.n_heads();
  if (absl::EndsWith(hf_name, "k_proj.weight")) return shape.n_kv_heads();
  return 0;
}

float GgufStoredOffset(const elf::ModelShape& shape, absl::string_view hf_name) {
  return shape.norm_plus_one() && absl::EndsWith(hf_name, "norm.weight") ? 1.0f : 0.0f;
}

}  // namespace dk::weights
