// ValidateModelShape and ParseModelShapeText: a model's sizes and features.
#include <cmath>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "elf/internal.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "util/status.h"

namespace dk::elf {
namespace {

// InvalidArgument "model \"<name>\": <parts>".
template <typename... Parts>
absl::Status BadModel(const ModelShape& m, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat("model \"", m.name(), "\": ", parts...));
}

// Every size positive and within its limit, heads dividing, the KV cache within
// kMaxBytes.
absl::Status CheckSizes(const ModelShape& m) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"n_layers", kMaxLayers},    {"hidden", kMaxDimension},  {"n_heads", kMaxHeads},
      {"n_kv_heads", kMaxHeads},   {"head_dim", kMaxHeadDim},  {"ffn", kMaxDimension},
      {"vocab", kMaxDimension},    {"max_context", kMaxDimension},
  };
  const int64_t values[] = {m.n_layers(), m.hidden(), m.n_heads(), m.n_kv_heads(),
                            m.head_dim(), m.ffn(),    m.vocab(),   m.max_context()};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    if (values[i] <= 0) return BadModel(m, sizes[i].first, " is ", values[i], ", must be positive");
    if (values[i] > sizes[i].second) {
      return BadModel(m, sizes[i].first, " ", values[i], " exceeds the limit ", sizes[i].second);
    }
  }
  if (m.n_heads() % m.n_kv_heads() != 0) {
    return BadModel(m, "n_heads ", m.n_heads(), " is not a multiple of n_kv_heads ", m.n_kv_heads());
  }
  if (m.head_dim() % 2 != 0) return BadModel(m, "head_dim ", m.head_dim(), " must be even for RoPE");
  int64_t kv = 0;
  if (!internal::MulWithinLimit(int64_t{m.n_layers()} * m.n_kv_heads(), int64_t{m.head_dim()} * 2, &kv) ||
      !internal::MulWithinLimit(kv, m.max_context(), &kv)) {
    return BadModel(m, "the KV cache (n_layers ", m.n_layers(), " x n_kv_heads ", m.n_kv_heads(),
                    " x head_dim ", m.head_dim(), " x max_context ", m.max_context(),
                    " x 2 bytes) exceeds ", kMaxBytes, " bytes");
  }
  return absl::OkStatus();
}

// rms_eps, the RoPE thetas and Llama 3's rope scaling.
absl::Status CheckNormAndRope(const ModelShape& m) {
  // Infinite values pass "> 0" but turn every RoPE angle or norm into NaN.
  if (!(m.rms_eps() > 0) || !std::isfinite(m.rms_eps())) {
    return BadModel(m, "rms_eps ", m.rms_eps(), " must be finite and > 0");
  }
  if (!(m.rope_theta() > 0) || !std::isfinite(m.rope_theta())) {
    return BadModel(m, "rope_theta ", m.rope_theta(), " must be finite and > 0");
  }
  if (!std::isfinite(m.rope_local_theta())) {
    return BadModel(m, "rope_local_theta ", m.rope_local_theta(), " must be finite");
  }
  if (!m.rope_scaling().type().empty() && m.rope_scaling().type() != "llama3") {
    return BadModel(m, "unsupported rope_scaling type \"", m.rope_scaling().type(), "\"");
  }
  if (m.rope_scaling().type() == "llama3") {
    const RopeScaling& r = m.rope_scaling();
    const std::pair<const char*, float> factors[] = {
        {"factor", r.factor()}, {"low_freq_factor", r.low_freq_factor()}, {"high_freq_factor", r.high_freq_factor()}};
    for (const auto& [field, value] : factors) {
      if (!(value > 0) || !std::isfinite(value)) {
        return BadModel(m, "rope_scaling.", field, " ", value, " must be finite and > 0");
      }
    }
    // Llama 3's smoothing divides by high_freq_factor - low_freq_factor.
    if (!(r.low_freq_factor() < r.high_freq_factor())) {
      return BadModel(m, "rope_scaling.low_freq_factor ", r.low_freq_factor(), " must be below high_freq_factor ",
                      r.high_freq_factor());
    }
  }
  return absl::OkStatus();
}

// The family, and the features its HF model fixes.
absl::Status CheckFamily(const ModelShape& m) {
  if (!ModelShape::Family_IsValid(m.family())) {
    return BadModel(m, "unsupported family ", FamilyName(m.family()), " (supported: llama, qwen2, qwen3, gemma3)");
  }
  // Each family's HF model fixes which features it has (config.json does not say).
  const bool qwen2 = m.family() == ModelShape::QWEN2;
  if (m.attention_bias() != qwen2) {
    return BadModel(m, qwen2 ? "family qwen2 has q/k/v biases: set attention_bias: true"
                             : "attention_bias needs family qwen2 (an HF Llama with attention_bias "
                               "also biases o_proj, which is not supported)");
  }
  const bool qwen3 = m.family() == ModelShape::QWEN3, gemma3 = m.family() == ModelShape::GEMMA3;
  if (m.qk_norm() != (qwen3 || gemma3)) {
    return BadModel(m, m.qk_norm() ? "qk_norm needs family qwen3 or gemma3"
                                   : "families qwen3 and gemma3 norm q and k per head: set qk_norm: true");
  }
  return absl::OkStatus();
}

// Gemma 3's other features (GELU-tanh, (1 + w) norms, sandwich norms, the embedding
// scale, sliding layers) are independent fields: config.json reading sets them all for
// gemma3_text, and the verify mutations switch single ones off in a candidate.
absl::Status CheckGemmaFeatures(const ModelShape& m) {
  if (!ModelShape::FfnActivation_IsValid(m.ffn_activation())) {
    return BadModel(m, "unsupported ffn_activation ", ActivationName(m.ffn_activation()), " (silu, gelu_tanh)");
  }
  bool sliding = false;
  if (m.layer_types_size() != 0 && m.layer_types_size() != m.n_layers()) {
    return BadModel(m, "layer_types has ", m.layer_types_size(), " entries for ", m.n_layers(), " layers");
  }
  for (int l = 0; l < m.layer_types_size(); ++l) {
    if (!ModelShape::AttentionType_IsValid(m.layer_types(l))) {
      return BadModel(m, "layer ", l, "'s type ", AttentionTypeName(m.layer_types(l)),
                      " is neither full_attention nor sliding_attention");
    }
    sliding |= SlidingLayer(m, l);
  }
  if (sliding && !(m.sliding_window() > 0 && m.rope_local_theta() > 0)) {
    return BadModel(m, "sliding_attention layers need sliding_window > 0 and rope_local_theta > 0");
  }
  if (m.sliding_window() < 0 || !(m.query_pre_attn_scalar() >= 0)) {
    return BadModel(m, "sliding_window and query_pre_attn_scalar must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// An enum value's lower-case name, or "<what>(<number>)" for a number the enum lacks.
std::string LowerName(const google::protobuf::EnumDescriptor* e, const char* what, int value) {
  const google::protobuf::EnumValueDescriptor* v = e->FindValueByNumber(value);
  return v == nullptr ? absl::StrCat(what, "(", value, ")") : absl::AsciiStrToLower(v->name());
}

// The value whose lower-case name is `name` (never a number, never upper case).
template <typename Enum>
std::optional<Enum> ParseLower(const google::protobuf::EnumDescriptor* e, absl::string_view name) {
  if (name != absl::AsciiStrToLower(name)) return std::nullopt;
  const google::protobuf::EnumValueDescriptor* v = e->FindValueByName(absl::AsciiStrToUpper(name));
  if (v == nullptr) return std::nullopt;
  return static_cast<Enum>(v->number());
}

}  // namespace

std::string FamilyName(ModelShape::Family f) { return LowerName(ModelShape::Family_descriptor(), "family", f); }
std::string ActivationName(ModelShape::FfnActivation a) {
  return LowerName(ModelShape::FfnActivation_descriptor(), "ffn_activation", a);
}
std::string AttentionTypeName(ModelShape::AttentionType t) {
  return LowerName(ModelShape::AttentionType_descriptor(), "attention_type", t);
}
std::string HostStepName(HostStep::Kind k) { return LowerName(HostStep::Kind_descriptor(), "host_step", k); }
std::optional<ModelShape::Family> ParseFamily(absl::string_view name) {
  return ParseLower<ModelShape::Family>(ModelShape::Family_descriptor(), name);
}
std::optional<ModelShape::FfnActivation> ParseActivation(absl::string_view name) {
  return ParseLower<ModelShape::FfnActivation>(ModelShape::FfnActivation_descriptor(), name);
}
std::optional<ModelShape::AttentionType> ParseAttentionType(absl::string_view name) {
  return ParseLower<ModelShape::AttentionType>(ModelShape::AttentionType_descriptor(), name);
}

absl::Status ValidateModelShape(const ModelShape& m) {
  DK_RETURN_IF_ERROR(CheckSizes(m));
  DK_RETURN_IF_ERROR(CheckNormAndRope(m));
  DK_RETURN_IF_ERROR(CheckFamily(m));
  DK_RETURN_IF_ERROR(CheckGemmaFeatures(m));
  if (m.rope_scaling().original_max_position() < 0 ||
      m.rope_scaling().original_max_position() > kMaxDimension) {
    return BadModel(m, "rope_scaling.original_max_position ", m.rope_scaling().original_max_position(),
                    " is outside [0, ", kMaxDimension, "]");
  }
  return absl::OkStatus();
}

namespace {

// Keeps the first parse error instead of logging it.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

absl::StatusOr<ModelShape> ParseModelShapeText(absl::string_view text, absl::string_view file) {
  ModelShape shape;
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (text.size() > (size_t{1} << 30) || !parser.Parse(&input, &shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ":", errors.error().empty() ? " too large" : errors.error(),
        " (not a valid dk.elf.ModelShape text proto)"));
  }
  if (absl::Status s = ValidateModelShape(shape); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", s.message()));
  }
  return shape;
}

}  // namespace dk::elf
