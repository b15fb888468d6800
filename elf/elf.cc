#include "elf/elf.h"

#include <elf.h>
#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "formats/weight_format.h"
#include "registry/registry.h"
#include "util/read_file.h"
#include "util/status.h"

namespace dk::elf {
namespace {

// a * b for non-negative a, b; false when the product exceeds kMaxBytes (or int64).
bool MulWithinLimit(int64_t a, int64_t b, int64_t* out) {
  if (__builtin_mul_overflow(a, b, out)) return false;
  return *out <= kMaxBytes;
}

// Elements of a shape with positive dimensions, at most kMaxBytes; an error naming
// `what` otherwise.
absl::StatusOr<int64_t> CheckedNumel(const google::protobuf::RepeatedField<int64_t>& shape,
                                     const std::string& what) {
  if (shape.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " has no shape"));
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has a non-positive dimension ", d));
    }
    if (!MulWithinLimit(n, d, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has a shape of more than ", kMaxBytes, " elements"));
    }
  }
  return n;
}

// OK when `layer` is -1 (model-wide) or a layer of the model.
absl::Status CheckLayer(int64_t layer, const ModelShape& m, const std::string& what) {
  if (layer < -1 || layer >= m.n_layers()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has layer ", layer, ", outside [-1, ",
                                                   m.n_layers(), ")"));
  }
  return absl::OkStatus();
}

// Integer parameters of a launch or host step: each in [0, kMaxDimension].
absl::Status CheckParams(const google::protobuf::Map<std::string, int64_t>& params,
                         const std::string& where) {
  for (const auto& [key, value] : params) {
    if (value < 0 || value > kMaxDimension) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"", key, "\" = ", value,
                                                     " is outside [0, ", kMaxDimension, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBinding(const Binding& b, const std::map<std::string, const BufferObject*>& bos,
                          absl::string_view where) {
  if (bos.count(b.bo()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"", b.param(),
                                                   "\" is bound to unknown BO \"", b.bo(), "\""));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t DTypeBytes(DType t) {
  switch (t) {
    case BF16: return 2;
    case F32: return 4;
    case I32: return 4;
    default: return 0;
  }
}

std::optional<formats::WeightFormat> WeightFormatOfBlocks(BlockFormat format) {
  switch (format) {
    case Q8_0: return formats::WeightFormat::kQ8_0;
    case Q4_0: return formats::WeightFormat::kQ4_0;
    case Q4_1: return formats::WeightFormat::kQ4_1;
    default: return std::nullopt;
  }
}

BlockFormat BlockFormatOf(formats::WeightFormat format) {
  switch (format) {
    case formats::WeightFormat::kQ8_0: return Q8_0;
    case formats::WeightFormat::kQ4_0: return Q4_0;
    case formats::WeightFormat::kQ4_1: return Q4_1;
    default: return BLOCK_FORMAT_NONE;
  }
}

std::string BlockFormatName(BlockFormat format) {
  const std::optional<formats::WeightFormat> f = WeightFormatOfBlocks(format);
  return f ? std::string(formats::Name(*f)) : "";
}

absl::StatusOr<formats::WeightFormat> WeightFormatOf(const BufferObject& bo) {
  if (bo.block_format() != BLOCK_FORMAT_NONE) {
    if (const std::optional<formats::WeightFormat> f = WeightFormatOfBlocks(bo.block_format())) return *f;
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\" has unknown block format ",
                                                   static_cast<int>(bo.block_format())));
  }
  const absl::StatusOr<formats::WeightFormat> f =
      formats::FromRegistry(bo.layout().empty() ? formats::kRowMajorName : bo.layout(), "");
  if (!f.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("BO \"", bo.name(), "\" has unknown layout \"", bo.layout(), "\""));
  }
  return *f;
}

int64_t X12StreamedBytes(const BufferObject& bo) {
  if (bo.layout() != formats::kPackedPanelX12V1Name) return bo.size_bytes();
  return formats::X12StreamedBytesOfTensor(bo.size_bytes());
}

namespace {

// Bytes of a BO in a block format: a 2-D row-major BF16 weight, cols % 32 == 0.
absl::StatusOr<int64_t> BlockBoBytes(const BufferObject& bo) {
  DK_ASSIGN_OR_RETURN(const formats::WeightFormat f, WeightFormatOf(bo));
  const std::string format(formats::Name(f));
  const std::string& layout = bo.layout();
  if (bo.weight_tensor().empty() || bo.dtype() != BF16 || bo.shape_size() != 2 ||
      !(layout.empty() || layout == formats::kRowMajorName)) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\": block format ", format,
                                                   " needs a 2-D row_major BF16 weight"));
  }
  if (bo.shape(1) % formats::kBlockElems != 0) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\": block format ", format,
                                                   " needs cols % ", formats::kBlockElems, " == 0, cols is ",
                                                   bo.shape(1)));
  }
  return formats::TensorBytes(f, bo.shape(0), bo.shape(1));
}

}  // namespace

absl::StatusOr<int64_t> BoBytes(const BufferObject& bo) {
  const int64_t elem = DTypeBytes(bo.dtype());
  if (elem == 0) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\" has no dtype"));
  }
  if (bo.shape().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\" has no shape"));
  }
  const std::string what = absl::StrCat("BO \"", bo.name(), "\"");
  auto n = CheckedNumel(bo.shape(), what);
  if (!n.ok()) return n.status();
  if (bo.blocks_as_stored() && bo.block_format() == BLOCK_FORMAT_NONE) {
    return absl::InvalidArgumentError(
        absl::StrCat("BO \"", bo.name(), "\": blocks_as_stored without a block format"));
  }
  if (bo.block_format() != BLOCK_FORMAT_NONE) return BlockBoBytes(bo);
  DK_ASSIGN_OR_RETURN(const formats::WeightFormat f, WeightFormatOf(bo));
  int64_t bytes = 0;
  if (f == formats::WeightFormat::kBf16Packed) {
    if (bo.shape_size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("BO \"", bo.name(), "\": packed_panel_v1 needs a 2-D shape"));
    }
    // Both dimensions are at most kMaxBytes (CheckedNumel), so the padded element
    // count (at most 8 x 32 times the BO's) fits an int64.
    if (MulWithinLimit(formats::PackedPanelElements(bo.shape(0), bo.shape(1)), elem, &bytes)) return bytes;
  } else if (f == formats::WeightFormat::kBf16X12) {
    if (bo.shape_size() != 2 || bo.dtype() != BF16) {
      return absl::InvalidArgumentError(
          absl::StrCat("BO \"", bo.name(), "\": packed_panel_x12_v1 needs a 2-D BF16 shape"));
    }
    DK_ASSIGN_OR_RETURN(bytes, formats::TensorBytes(f, bo.shape(0), bo.shape(1)));
    if (bytes <= kMaxBytes) return bytes;
  } else if (MulWithinLimit(*n, elem, &bytes)) {  // row_major, any rank and dtype
    return bytes;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " would be more than ", kMaxBytes, " bytes"));
}

absl::Status ValidateModelShape(const ModelShape& m) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("model \"", m.name(), "\": ", parts...));
  };
  const std::pair<const char*, int64_t> sizes[] = {
      {"n_layers", kMaxLayers},    {"hidden", kMaxDimension},  {"n_heads", kMaxHeads},
      {"n_kv_heads", kMaxHeads},   {"head_dim", kMaxHeadDim},  {"ffn", kMaxDimension},
      {"vocab", kMaxDimension},    {"max_context", kMaxDimension},
  };
  const int64_t values[] = {m.n_layers(), m.hidden(), m.n_heads(), m.n_kv_heads(),
                            m.head_dim(), m.ffn(),    m.vocab(),   m.max_context()};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    if (values[i] <= 0) return bad(sizes[i].first, " is ", values[i], ", must be positive");
    if (values[i] > sizes[i].second) {
      return bad(sizes[i].first, " ", values[i], " exceeds the limit ", sizes[i].second);
    }
  }
  if (m.n_heads() % m.n_kv_heads() != 0) {
    return bad("n_heads ", m.n_heads(), " is not a multiple of n_kv_heads ", m.n_kv_heads());
  }
  if (m.head_dim() % 2 != 0) return bad("head_dim ", m.head_dim(), " must be even for RoPE");
  int64_t kv = 0;
  if (!MulWithinLimit(int64_t{m.n_layers()} * m.n_kv_heads(), int64_t{m.head_dim()} * 2, &kv) ||
      !MulWithinLimit(kv, m.max_context(), &kv)) {
    return bad("the KV cache (n_layers ", m.n_layers(), " x n_kv_heads ", m.n_kv_heads(),
               " x head_dim ", m.head_dim(), " x max_context ", m.max_context(),
               " x 2 bytes) exceeds ", kMaxBytes, " bytes");
  }
  // Infinite values pass "> 0" but turn every RoPE angle or norm into NaN.
  if (!(m.rms_eps() > 0) || !std::isfinite(m.rms_eps())) {
    return bad("rms_eps ", m.rms_eps(), " must be finite and > 0");
  }
  if (!(m.rope_theta() > 0) || !std::isfinite(m.rope_theta())) {
    return bad("rope_theta ", m.rope_theta(), " must be finite and > 0");
  }
  if (!std::isfinite(m.rope_local_theta())) {
    return bad("rope_local_theta ", m.rope_local_theta(), " must be finite");
  }
  if (!m.rope_scaling().type().empty() && m.rope_scaling().type() != "llama3") {
    return bad("unsupported rope_scaling type \"", m.rope_scaling().type(), "\"");
  }
  if (m.rope_scaling().type() == "llama3") {
    const RopeScaling& r = m.rope_scaling();
    const std::pair<const char*, float> factors[] = {
        {"factor", r.factor()}, {"low_freq_factor", r.low_freq_factor()}, {"high_freq_factor", r.high_freq_factor()}};
    for (const auto& [field, value] : factors) {
      if (!(value > 0) || !std::isfinite(value)) {
        return bad("rope_scaling.", field, " ", value, " must be finite and > 0");
      }
    }
    // Llama 3's smoothing divides by high_freq_factor - low_freq_factor.
    if (!(r.low_freq_factor() < r.high_freq_factor())) {
      return bad("rope_scaling.low_freq_factor ", r.low_freq_factor(), " must be below high_freq_factor ",
                 r.high_freq_factor());
    }
  }
  if (m.family() != "" && m.family() != "llama" && m.family() != "qwen2" && m.family() != "qwen3" &&
      m.family() != "gemma3") {
    return bad("unsupported family \"", m.family(), "\" (supported: llama, qwen2, qwen3, gemma3)");
  }
  // Each family's HF model fixes which features it has (config.json does not say).
  const bool qwen2 = m.family() == "qwen2";
  if (m.attention_bias() != qwen2) {
    return bad(qwen2 ? "family qwen2 has q/k/v biases: set attention_bias: true"
                     : "attention_bias needs family qwen2 (an HF Llama with attention_bias "
                       "also biases o_proj, which is not supported)");
  }
  const bool qwen3 = m.family() == "qwen3", gemma3 = m.family() == "gemma3";
  if (m.qk_norm() != (qwen3 || gemma3)) {
    return bad(m.qk_norm() ? "qk_norm needs family qwen3 or gemma3"
                           : "families qwen3 and gemma3 norm q and k per head: set qk_norm: true");
  }
  // Gemma 3's other features (GELU-tanh, (1 + w) norms, sandwich norms, the embedding
  // scale, sliding layers) are independent fields: config.json reading sets them all for
  // gemma3_text, and the verify mutations switch single ones off in a candidate.
  if (!m.ffn_activation().empty() && m.ffn_activation() != "silu" && m.ffn_activation() != "gelu_tanh") {
    return bad("unsupported ffn_activation \"", m.ffn_activation(), "\" (silu, gelu_tanh)");
  }
  bool sliding = false;
  if (m.layer_types_size() != 0 && m.layer_types_size() != m.n_layers()) {
    return bad("layer_types has ", m.layer_types_size(), " entries for ", m.n_layers(), " layers");
  }
  for (const std::string& t : m.layer_types()) {
    if (t != "full_attention" && t != "sliding_attention") {
      return bad("layer type \"", t, "\" is neither full_attention nor sliding_attention");
    }
    sliding |= t == "sliding_attention";
  }
  if (sliding && !(m.sliding_window() > 0 && m.rope_local_theta() > 0)) {
    return bad("sliding_attention layers need sliding_window > 0 and rope_local_theta > 0");
  }
  if (m.sliding_window() < 0 || !(m.query_pre_attn_scalar() >= 0)) {
    return bad("sliding_window and query_pre_attn_scalar must not be negative");
  }
  if (m.rope_scaling().original_max_position() < 0 ||
      m.rope_scaling().original_max_position() > kMaxDimension) {
    return bad("rope_scaling.original_max_position ", m.rope_scaling().original_max_position(),
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

namespace {

// What each kernel reads and writes, checked against its integer parameters: every
// input and output parameter bound, a weight [rows, cols] in the variant's layout
// (and of its specialized K), every other operand BF16 (F32 where the kernel takes
// it) and large enough for the launch. These are the kernels' contracts, the same
// for every device; a device checks them again at load only as a guard.
absl::Status CheckLaunchOperands(const Launch& l, const registry::Kernel& kernel,
                                 const registry::KernelVariant& variant,
                                 const std::map<std::string, const BufferObject*>& bos,
                                 const std::string& where) {
  auto bad = [&](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(where, ": ", parts...)); };
  std::map<std::string, const BufferObject*> bound;
  for (const Binding& b : l.bindings()) bound[b.param()] = bos.at(b.bo());
  for (const auto* params : {&kernel.inputs(), &kernel.outputs()}) {
    for (const std::string& p : *params) {
      if (bound.count(p) == 0) return bad("parameter \"", p, "\" is not bound");
    }
  }
  auto param = [&](const std::string& name) -> int64_t {
    const auto it = l.params().find(name);
    return it == l.params().end() ? 0 : it->second;
  };
  auto expect = [&](const std::string& p, int64_t elements, bool allow_f32) -> absl::Status {
    const BufferObject& b = *bound.at(p);
    const bool f32 = b.dtype() == F32;
    if (b.dtype() != BF16 && !(allow_f32 && f32)) {
      return bad("BO \"", b.name(), "\" (parameter \"", p, "\") has dtype ", DType_Name(b.dtype()),
                 ", expected BF16", allow_f32 ? " or F32" : "");
    }
    if (b.size_bytes() < elements * DTypeBytes(b.dtype())) {
      return bad("BO \"", b.name(), "\" (parameter \"", p, "\") holds ", b.size_bytes(),
                 " bytes, the launch needs ", elements * DTypeBytes(b.dtype()));
    }
    return absl::OkStatus();
  };
  auto weight = [&](const std::string& p, int64_t rows, int64_t cols) -> absl::Status {
    const BufferObject& w = *bound.at(p);
    const std::string layout = w.layout().empty() ? std::string(registry::kRowMajor) : w.layout();
    if (layout != variant.layout()) {
      return bad("weight BO \"", w.name(), "\" has layout ", layout, " but the kernel reads ", variant.layout());
    }
    if (variant.k() != 0 && variant.k() != cols) {
      return bad("symbol is specialized for K=", variant.k(), " but cols=", cols);
    }
    BufferObject need = w;
    need.clear_shape();
    need.add_shape(rows);
    need.add_shape(cols);
    const absl::StatusOr<int64_t> bytes = BoBytes(need);
    if (!bytes.ok()) return bad(bytes.status().message());
    if (w.dtype() != BF16 || w.size_bytes() < *bytes) {
      return bad("weight BO \"", w.name(), "\" (parameter \"", p, "\") must be BF16 of at least ", *bytes,
                 " bytes for [", rows, ", ", cols, "]");
    }
    return absl::OkStatus();
  };
  // Gemma's norms bind the sizes Llama's do.
  const std::string id = kernel.id() == "rmsnorm_plus1"        ? "rmsnorm"
                         : kernel.id() == "head_rmsnorm_plus1" ? "head_rmsnorm"
                                                               : kernel.id();
  if (id == "gemv" || id == "gemv_ksplit") {
    const int64_t rows = param("rows"), cols = param("cols");
    if (id == "gemv_ksplit") {
      const int64_t chunk = param("k_chunk");
      if (chunk % formats::kBlockElems != 0 || cols % chunk != 0) {
        return bad("K-split GEMV needs cols (", cols, ") a multiple of k_chunk (", chunk,
                   "), itself a multiple of ", formats::kBlockElems);
      }
    }
    DK_RETURN_IF_ERROR(weight("w", rows, cols));
    DK_RETURN_IF_ERROR(expect("x", cols, true));
    DK_RETURN_IF_ERROR(expect("y", rows, true));
    if (variant.layout() == registry::kPackedPanelX12V1 && bound.at("x")->dtype() == F32) {
      return bad("the ", registry::kPackedPanelX12V1, " GEMV reads bf16 x, BO \"", bound.at("x")->name(),
                 "\" is F32");
    }
    return absl::OkStatus();
  }
  if (id == "rms_gemv" || id == "gemv_add" || id == "rms_gemv_silu_mul") {
    const int64_t rows = param("rows"), cols = param("cols");
    const bool silu = id == "rms_gemv_silu_mul";
    DK_RETURN_IF_ERROR(weight(silu ? "w_gate" : "w", rows, cols));
    if (silu) DK_RETURN_IF_ERROR(weight("w_up", rows, cols));
    DK_RETURN_IF_ERROR(expect("x", cols, false));
    if (id == "gemv_add") {
      DK_RETURN_IF_ERROR(expect("residual", rows, false));
    } else {
      DK_RETURN_IF_ERROR(expect("norm", cols, false));
    }
    return expect("y", rows, id == "rms_gemv");
  }
  if (id == "rms_gemv3") {
    const int64_t cols = param("cols");
    DK_RETURN_IF_ERROR(expect("x", cols, false));
    DK_RETURN_IF_ERROR(expect("norm", cols, false));
    for (int i = 0; i < 3; ++i) {
      const int64_t rows = param(absl::StrCat("rows", i));
      DK_RETURN_IF_ERROR(weight(absl::StrCat("w", i), rows, cols));
      DK_RETURN_IF_ERROR(expect(absl::StrCat("y", i), rows, true));
    }
    if (bound.at("y1")->dtype() != bound.at("y0")->dtype() || bound.at("y2")->dtype() != bound.at("y0")->dtype()) {
      return bad("outputs y0, y1, y2 differ in dtype");
    }
    return absl::OkStatus();
  }
  if (id == "rmsnorm") {
    for (const char* p : {"x", "w", "y"}) DK_RETURN_IF_ERROR(expect(p, param("n"), false));
    return absl::OkStatus();
  }
  if (id == "rope") {
    const int64_t heads = param("heads"), head_dim = param("head_dim");
    if (head_dim % 2 != 0) return bad("head_dim ", head_dim, " must be even");
    DK_RETURN_IF_ERROR(expect("x", heads * head_dim, false));
    DK_RETURN_IF_ERROR(expect("y", heads * head_dim, false));
    DK_RETURN_IF_ERROR(expect("cos", head_dim / 2, false));
    return expect("sin", head_dim / 2, false);
  }
  if (id == "head_rmsnorm") {
    const int64_t n = param("heads") * param("head_dim");
    DK_RETURN_IF_ERROR(expect("x", n, false));
    DK_RETURN_IF_ERROR(expect("w", param("head_dim"), false));
    return expect("y", n, false);
  }
  if (id == "bias_add") {
    if (bound.at("x")->dtype() != F32) {
      return bad("BO \"", bound.at("x")->name(), "\" (parameter \"x\") has dtype ",
                 DType_Name(bound.at("x")->dtype()), ", expected F32");
    }
    DK_RETURN_IF_ERROR(expect("x", param("n"), true));
    DK_RETURN_IF_ERROR(expect("bias", param("n"), false));
    return expect("y", param("n"), false);
  }
  // silu_mul, gelu_tanh_mul, add: every BO holds n bf16.
  for (const auto& [p, bo] : bound) DK_RETURN_IF_ERROR(expect(p, param("n"), false));
  return absl::OkStatus();
}

// The logits (an F32 host value of vocab elements) are written whole, once per
// token: the OUTPUT BOs mirroring them (the LM head's partitions) cover every
// element and no two overlap. A gap leaves logits of the previous token (or zeros)
// that top-k would pick from; an overlap means a gap elsewhere.
absl::Status CheckLogits(const Program& p, const std::map<std::string, const HostValue*>& values,
                         const std::map<std::string, int64_t>& value_elements) {
  const auto v = values.find("logits");
  if (v == values.end() || v->second->dtype() != F32) {
    return absl::InvalidArgumentError("the program has no F32 host value \"logits\"");
  }
  const int64_t n = value_elements.at("logits");
  if (n != p.model().vocab()) {
    return absl::InvalidArgumentError(absl::StrCat("host value \"logits\" has ", n,
                                                   " elements, the model's vocab is ", p.model().vocab()));
  }
  std::vector<std::pair<int64_t, const BufferObject*>> parts;  // (host_offset, BO)
  for (const BufferObject& bo : p.bos()) {
    if (bo.category() == OUTPUT && bo.host_value() == "logits") parts.push_back({bo.host_offset(), &bo});
  }
  std::sort(parts.begin(), parts.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t covered = 0;  // logits [0, covered) are written
  const BufferObject* last = nullptr;
  for (const auto& [offset, bo] : parts) {
    const int64_t end = offset + bo->size_bytes() / DTypeBytes(F32);
    if (offset < covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OUTPUT BOs \"", last->name(), "\" and \"", bo->name(), "\" both write logits [", offset, ", ",
          std::min(covered, end), ") (the LM-head partitions overlap)"));
    }
    if (offset > covered) {
      return absl::InvalidArgumentError(absl::StrCat("logits [", covered, ", ", offset,
                                                     ") are written by no OUTPUT BO (the LM-head partitions "
                                                     "leave a gap)"));
    }
    covered = end;
    last = bo;
  }
  if (covered < n) {
    return absl::InvalidArgumentError(absl::StrCat("logits [", covered, ", ", n,
                                                   ") are written by no OUTPUT BO (the LM-head partitions "
                                                   "do not cover the vocab)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateProgram(const Program& p) {
  if (p.schema_version() != kSchemaVersion) {
    return absl::InvalidArgumentError(absl::StrCat("schema version ", p.schema_version(),
                                                   " is not the supported version ",
                                                   kSchemaVersion));
  }
  DK_RETURN_IF_ERROR(ValidateModelShape(p.model()));
  const ModelShape& m = p.model();
  std::map<std::string, const HostValue*> values;
  std::map<std::string, int64_t> value_elements;
  for (const HostValue& v : p.values()) {
    if (v.name().empty()) return absl::InvalidArgumentError("a host value has no name");
    if (!values.emplace(v.name(), &v).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate host value \"", v.name(), "\""));
    }
    const std::string what = absl::StrCat("host value \"", v.name(), "\"");
    if (DTypeBytes(v.dtype()) == 0) return absl::InvalidArgumentError(absl::StrCat(what, " has no dtype"));
    DK_ASSIGN_OR_RETURN(const int64_t n, CheckedNumel(v.shape(), what));
    int64_t bytes = 0;
    if (!MulWithinLimit(n, DTypeBytes(v.dtype()), &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " would be more than ", kMaxBytes, " bytes"));
    }
    value_elements[v.name()] = n;
  }
  std::map<std::string, const BufferObject*> bos;
  for (const BufferObject& bo : p.bos()) {
    if (bo.name().empty()) return absl::InvalidArgumentError("a BO has no name");
    if (!bos.emplace(bo.name(), &bo).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate BO name \"", bo.name(), "\""));
    }
    const std::string what = absl::StrCat("BO \"", bo.name(), "\"");
    auto bad = [&](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(what, parts...)); };
    if (bo.category() == CATEGORY_UNSPECIFIED) return bad(" has no category");
    if (!BoCategory_IsValid(bo.category())) return bad(" has unknown category ", bo.category());
    DK_RETURN_IF_ERROR(CheckLayer(bo.layer(), m, what));
    auto bytes = BoBytes(bo);
    if (!bytes.ok()) return bytes.status();
    if (*bytes != bo.size_bytes()) {
      return bad(" size_bytes ", bo.size_bytes(), " does not match its shape (", *bytes, " bytes)");
    }
    if (!bo.weight_tensor().empty() && bo.shape_size() > 2) {
      return bad(" mirrors weight tensor \"", bo.weight_tensor(), "\" but has rank ", bo.shape_size(),
                 " (a weight BO is 1-D or 2-D)");
    }
    // weight_row_begin/end: rows [begin, end) of the tensor, end 0 = all rows from 0.
    const int64_t begin = bo.weight_row_begin(), end = bo.weight_row_end();
    if (bo.weight_tensor().empty() && (begin != 0 || end != 0)) {
      return bad(" has a weight row range [", begin, ", ", end, ") but no weight_tensor");
    }
    if (begin < 0 || end < 0 || (end == 0 && begin != 0) || (end != 0 && begin >= end)) {
      return bad(" has an empty or negative weight row range [weight_row_begin ", begin,
                 ", weight_row_end ", end, ")");
    }
    if (end != 0 && end - begin != bo.shape(0)) {
      return bad(" weight rows [", begin, ", ", end, ") are ", end - begin, " rows but the BO has ",
                 bo.shape(0));
    }
    // host_value/host_offset: the BO is elements [offset, offset + numel) of the value.
    if (bo.host_value().empty()) {
      if (bo.host_offset() != 0) return bad(" has host_offset ", bo.host_offset(), " but no host_value");
      continue;
    }
    const auto v = values.find(bo.host_value());
    if (v == values.end()) return bad(" mirrors unknown host value \"", bo.host_value(), "\"");
    if (v->second->dtype() != bo.dtype()) {
      return bad(" is ", DType_Name(bo.dtype()), " but mirrors host value \"", bo.host_value(),
                 "\" of dtype ", DType_Name(v->second->dtype()));
    }
    const int64_t bo_elements = bo.size_bytes() / DTypeBytes(bo.dtype());
    const int64_t value_n = value_elements[bo.host_value()];
    if (bo.host_offset() < 0 || bo.host_offset() > value_n || bo_elements > value_n - bo.host_offset()) {
      return bad(" (", bo_elements, " elements) at host_offset ", bo.host_offset(),
                 " does not lie inside host value \"", bo.host_value(), "\" (", value_n, " elements)");
    }
  }
  std::set<std::string> groups, entries;
  for (int i = 0; i < p.steps_size(); ++i) {
    const Step& step = p.steps(i);
    if (step.has_group()) {
      const LaunchGroup& g = step.group();
      const std::string where = absl::StrCat("group \"", g.name(), "\"");
      if (!groups.insert(g.name()).second) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate ", where));
      }
      if (g.entry_symbol().empty() || !entries.insert(g.entry_symbol()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " has a missing or duplicate entry symbol \"", g.entry_symbol(), "\""));
      }
      DK_RETURN_IF_ERROR(CheckLayer(g.layer(), m, where));
      if (g.launches().empty()) return absl::InvalidArgumentError(absl::StrCat(where, " is empty"));
      for (int j = 0; j < g.launches_size(); ++j) {
        const Launch& l = g.launches(j);
        const std::string lwhere = absl::StrCat(where, " launch ", j, " (", l.kernel_symbol(), ")");
        const registry::Kernel* kernel = nullptr;
        auto variant = registry::FindSymbol(l.kernel_symbol(), &kernel);
        if (!variant.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(lwhere, ": unknown kernel symbol \"", l.kernel_symbol(), "\""));
        }
        if (kernel->host_only()) {
          return absl::InvalidArgumentError(
              absl::StrCat(lwhere, ": kernel \"", kernel->id(), "\" runs on the host, not in a launch group"));
        }
        const std::set<std::string> outputs(kernel->outputs().begin(), kernel->outputs().end());
        for (const Binding& b : l.bindings()) {
          auto s = CheckBinding(b, bos, lwhere);
          if (!s.ok()) return s;
          // Where each bound BO's bytes come from and go to: an OUTPUT BO is read
          // back into its host value, a WRITE BO the kernel reads is written from
          // a host value or a weight before each run.
          const BufferObject& bo = *bos.at(b.bo());
          if (outputs.count(b.param()) > 0) {
            if (bo.category() == OUTPUT && bo.host_value().empty()) {
              return absl::InvalidArgumentError(absl::StrCat(lwhere, ": OUTPUT BO \"", bo.name(),
                                                             "\" (parameter \"", b.param(),
                                                             "\") mirrors no host value"));
            }
          } else if (bo.category() == WRITE && bo.host_value().empty() && bo.weight_tensor().empty()) {
            return absl::InvalidArgumentError(absl::StrCat(lwhere, ": WRITE BO \"", bo.name(), "\" (parameter \"",
                                                           b.param(), "\") mirrors neither a host value nor a weight"));
          }
          // A weight's blocks are read only by a variant of that block format
          // (and a block-format variant reads only such a weight).
          if (!registry::IsWeightParam(*kernel, b.param())) continue;
          const std::string format = BlockFormatName(bos.at(b.bo())->block_format());
          if (format != (*variant)->block_format()) {
            return absl::InvalidArgumentError(absl::StrCat(
                lwhere, ": weight BO \"", b.bo(), "\" is ",
                format.empty() ? "plain bf16" : absl::StrCat("in block format ", format),
                " but the kernel reads ",
                (*variant)->block_format().empty() ? "plain bf16"
                                                   : absl::StrCat("block format ", (*variant)->block_format())));
          }
        }
        DK_RETURN_IF_ERROR(CheckParams(l.params(), lwhere));
        for (const std::string& param : kernel->int_params()) {
          const auto it = l.params().find(param);
          if (it == l.params().end() || it->second <= 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                lwhere, ": integer parameter \"", param, "\" is missing or not positive"));
          }
        }
        DK_RETURN_IF_ERROR(CheckLaunchOperands(l, *kernel, **variant, bos, lwhere));
      }
    } else if (step.has_host()) {
      const HostStep& h = step.host();
      const std::string where = absl::StrCat("host step ", i, " (", h.kind(), ")");
      if (h.kind().empty()) return absl::InvalidArgumentError(absl::StrCat(where, " has no kind"));
      DK_RETURN_IF_ERROR(CheckLayer(h.layer(), m, where));
      for (const Binding& b : h.bindings()) {
        if (values.count(b.value()) == 0) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"", b.param(),
                                                         "\" is bound to unknown host value \"",
                                                         b.value(), "\""));
        }
      }
      DK_RETURN_IF_ERROR(CheckParams(h.params(), where));
      const auto k = h.params().find("k");
      if (h.kind() == "topk" && k != h.params().end() && (k->second < 1 || k->second > m.vocab())) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": parameter \"k\" = ", k->second, " is outside [1, vocab ", m.vocab(), "]"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("step ", i, " is neither a group nor a host step"));
    }
  }
  return CheckLogits(p, values, value_elements);
}

absl::StatusOr<std::string> WriteElf(const Program& program) {
  if (auto s = ValidateProgram(program); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("refusing to write an invalid program: ", s.message()));
  }
  return WriteElfUnvalidatedForTesting(program);
}

absl::StatusOr<std::string> WriteElfUnvalidatedForTesting(const Program& program) {
  std::string payload;
  {
    // Deterministic: map fields (launch params) in key order, so the same program
    // always gives the same bytes (Bazel caches and reviews compare them).
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!program.SerializeToCodedStream(&coded)) {
      return absl::InternalError("cannot serialize program");
    }
  }

  // Symbols: entry points (defined in .dk.entries, value = group index * 4), then
  // the kernel symbols (undefined), each once, in first-use order.
  std::vector<std::string> entry_names, kernel_names;
  std::set<std::string> seen;
  for (const Step& s : program.steps()) {
    if (!s.has_group()) continue;
    entry_names.push_back(s.group().entry_symbol());
    for (const Launch& l : s.group().launches()) {
      if (seen.insert(l.kernel_symbol()).second) kernel_names.push_back(l.kernel_symbol());
    }
  }
  std::string strtab(1, '\0');
  auto add_str = [](std::string& tab, const std::string& s) {
    const uint32_t at = static_cast<uint32_t>(tab.size());
    tab += s;
    tab.push_back('\0');
    return at;
  };
  std::vector<Elf64_Sym> syms(1);
  std::memset(&syms[0], 0, sizeof(Elf64_Sym));
  std::string entries;
  for (size_t i = 0; i < entry_names.size(); ++i) {
    Elf64_Sym s{};
    s.st_name = add_str(strtab, entry_names[i]);
    s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    s.st_shndx = 2;
    s.st_value = i * 4;
    s.st_size = 4;
    syms.push_back(s);
    const uint32_t index = static_cast<uint32_t>(i);
    entries.append(reinterpret_cast<const char*>(&index), 4);
  }
  for (const std::string& k : kernel_names) {
    Elf64_Sym s{};
    s.st_name = add_str(strtab, k);
    s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    s.st_shndx = SHN_UNDEF;
    syms.push_back(s);
  }
  std::string shstrtab(1, '\0');
  const uint32_t n_program = add_str(shstrtab, kProgramSection);
  const uint32_t n_entries = add_str(shstrtab, kEntriesSection);
  const uint32_t n_symtab = add_str(shstrtab, ".symtab");
  const uint32_t n_strtab = add_str(shstrtab, ".strtab");
  const uint32_t n_shstrtab = add_str(shstrtab, ".shstrtab");

  std::string out(sizeof(Elf64_Ehdr), '\0');
  auto append = [&out](const void* data, size_t n, size_t align) {
    while (out.size() % align) out.push_back('\0');
    const uint64_t at = out.size();
    out.append(static_cast<const char*>(data), n);
    return at;
  };
  std::vector<Elf64_Shdr> sh(6);
  std::memset(sh.data(), 0, sh.size() * sizeof(Elf64_Shdr));
  sh[1] = {n_program, SHT_PROGBITS, 0, 0, append(payload.data(), payload.size(), 8),
           payload.size(), 0, 0, 8, 0};
  sh[2] = {n_entries, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0,
           append(entries.data(), entries.size(), 4), entries.size(), 0, 0, 4, 0};
  sh[3] = {n_symtab, SHT_SYMTAB, 0, 0,
           append(syms.data(), syms.size() * sizeof(Elf64_Sym), 8),
           syms.size() * sizeof(Elf64_Sym), 4, 1, 8, sizeof(Elf64_Sym)};
  sh[4] = {n_strtab, SHT_STRTAB, 0, 0, append(strtab.data(), strtab.size(), 1), strtab.size(),
           0, 0, 1, 0};
  sh[5] = {n_shstrtab, SHT_STRTAB, 0, 0, append(shstrtab.data(), shstrtab.size(), 1),
           shstrtab.size(), 0, 0, 1, 0};
  const uint64_t shoff = append(sh.data(), sh.size() * sizeof(Elf64_Shdr), 8);

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
  eh.e_type = ET_REL;
  eh.e_machine = EM_NONE;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shoff = shoff;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<uint16_t>(sh.size());
  eh.e_shstrndx = 5;
  std::memcpy(out.data(), &eh, sizeof(eh));
  return out;
}

absl::Status WriteElfFile(const Program& program, const std::string& path) {
  auto bytes = WriteElf(program);
  if (!bytes.ok()) return bytes.status();
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  f.close();
  if (!f) {
    return absl::UnavailableError(absl::StrCat("cannot write decode ELF ", path,
                                               errno != 0 ? ": " : "",
                                               errno != 0 ? std::strerror(errno) : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<Program> ReadElf(absl::string_view bytes, absl::string_view name) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("decode ELF ", name, ": ", parts...));
  };
  const uint64_t size = bytes.size();
  if (size < sizeof(Elf64_Ehdr)) {
    return bad("file is ", size, " bytes, shorter than an ELF64 header (truncated?)");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return bad("bad magic (not an ELF file)");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return bad("not a 64-bit ELF");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return bad("not little-endian");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return bad("unexpected section header size ", eh.e_shentsize);
  if (eh.e_shnum == 0 || eh.e_shoff > size ||
      eh.e_shnum * uint64_t{sizeof(Elf64_Shdr)} > size - eh.e_shoff) {
    return bad("section header table (offset ", eh.e_shoff, ", ", eh.e_shnum,
               " entries) lies outside the file (truncated?)");
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), bytes.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  for (size_t i = 0; i < sh.size(); ++i) {
    // (A NOBITS section occupies no file bytes; every other one, NULL included, must
    // lie inside the file: a NULL-typed .dk.program with an offset near 2^64 was
    // parsed from before the buffer. Found by //elf:elf_fuzzer.)
    if (sh[i].sh_type == SHT_NOBITS) continue;
    if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset) {
      return bad("section ", i, " (offset ", sh[i].sh_offset, ", size ", sh[i].sh_size,
                 ") extends past the end of the file (", size, " bytes)");
    }
  }
  if (eh.e_shstrndx >= sh.size() || sh[eh.e_shstrndx].sh_type != SHT_STRTAB) {
    return bad("section name table index ", eh.e_shstrndx, " is invalid");
  }
  auto string_at = [&](const Elf64_Shdr& tab, uint64_t off) -> absl::StatusOr<std::string> {
    if (off >= tab.sh_size) return bad("string offset ", off, " is outside its string table");
    const char* begin = bytes.data() + tab.sh_offset + off;
    const void* nul = std::memchr(begin, '\0', tab.sh_size - off);
    if (nul == nullptr) return bad("unterminated string in a string table");
    return std::string(begin, static_cast<const char*>(nul));
  };
  int program_idx = -1, entries_idx = -1, symtab_idx = -1;
  for (size_t i = 0; i < sh.size(); ++i) {
    auto n = string_at(sh[eh.e_shstrndx], sh[i].sh_name);
    if (!n.ok()) return n.status();
    if (*n == kProgramSection) program_idx = static_cast<int>(i);
    if (*n == kEntriesSection) entries_idx = static_cast<int>(i);
    if (sh[i].sh_type == SHT_SYMTAB) symtab_idx = static_cast<int>(i);
  }
  if (program_idx < 0) return bad("no ", kProgramSection, " section (not a decode ELF)");
  if (sh[program_idx].sh_type != SHT_PROGBITS) {
    return bad(kProgramSection, " has section type ", sh[program_idx].sh_type, ", not PROGBITS");
  }
  if (symtab_idx < 0) return bad("no symbol table");
  Program program;
  const Elf64_Shdr& ps = sh[program_idx];
  if (ps.sh_size > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return bad(kProgramSection, " is ", ps.sh_size, " bytes, more than a program message can be");
  }
  bool parsed = false;
  {
    // libprotobuf logs its own line for some malformed input (invalid UTF-8 in a
    // string field) before failing; the error below says it once, naming the file.
    google::protobuf::LogSilencer silence;
    parsed = program.ParseFromArray(bytes.data() + ps.sh_offset, static_cast<int>(ps.sh_size));
  }
  if (!parsed) {
    return bad(kProgramSection, " does not hold a valid program message (corrupt?)");
  }
  if (program.schema_version() != kSchemaVersion) {
    return bad("schema version ", program.schema_version(), " is not the supported version ",
               kSchemaVersion, "; rebuild the ELF with this toolkit");
  }
  if (auto s = ValidateProgram(program); !s.ok()) return bad(s.message());

  // The symbol table must match the program.
  const Elf64_Shdr& st = sh[symtab_idx];
  if (st.sh_entsize != sizeof(Elf64_Sym) || st.sh_size % sizeof(Elf64_Sym) != 0 ||
      st.sh_link >= sh.size() || sh[st.sh_link].sh_type != SHT_STRTAB) {
    return bad("malformed symbol table");
  }
  std::set<std::string> defined, undefined;
  for (uint64_t off = sizeof(Elf64_Sym); off < st.sh_size; off += sizeof(Elf64_Sym)) {
    Elf64_Sym sym;
    std::memcpy(&sym, bytes.data() + st.sh_offset + off, sizeof(sym));
    auto n = string_at(sh[st.sh_link], sym.st_name);
    if (!n.ok()) return n.status();
    if (sym.st_shndx == SHN_UNDEF) {
      undefined.insert(*n);
    } else if (static_cast<int>(sym.st_shndx) == entries_idx) {
      defined.insert(*n);
    }
  }
  for (const Step& s : program.steps()) {
    if (!s.has_group()) continue;
    if (defined.count(s.group().entry_symbol()) == 0) {
      return bad("entry symbol \"", s.group().entry_symbol(), "\" of group \"", s.group().name(),
                 "\" is missing from the symbol table");
    }
    for (const Launch& l : s.group().launches()) {
      if (undefined.count(l.kernel_symbol()) == 0) {
        return bad("kernel symbol \"", l.kernel_symbol(), "\" is missing from the symbol table");
      }
    }
  }
  return program;
}

absl::StatusOr<Program> ReadElfFile(const std::string& path) {
  DK_ASSIGN_OR_RETURN(const std::string bytes, ReadRegularFile(path, "decode ELF", kMaxElfFileBytes));
  return ReadElf(bytes, path);
}

}  // namespace dk::elf
