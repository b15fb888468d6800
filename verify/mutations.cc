#include "elf/elf.h"
#include "verify/mutations.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/bf16.h"
#include "util/status.h"

namespace dk::verify {
namespace {

// Plain (unscaled) RoPE cos/sin, bf16, [position][head_dim / 2], inverse frequencies
// theta^(-2i/d) as HF computes them (in f32), the angles in double.
struct PlainRope {
  PlainRope(int head_dim, float theta, int positions) : half(head_dim / 2) {
    cos_.resize(static_cast<size_t>(positions) * half);
    sin_.resize(cos_.size());
    for (int i = 0; i < half; ++i) {
      const float inv = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
      for (int p = 0; p < positions; ++p) {
        const float angle = static_cast<float>(p) * inv;
        cos_[static_cast<size_t>(p) * half + i] = F32ToBf16(std::cos(angle));
        sin_[static_cast<size_t>(p) * half + i] = F32ToBf16(std::sin(angle));
      }
    }
  }
  const bf16* cos(int pos) const { return cos_.data() + static_cast<size_t>(pos) * half; }
  const bf16* sin(int pos) const { return sin_.data() + static_cast<size_t>(pos) * half; }
  int half;
  std::vector<bf16> cos_, sin_;
};

// Host ops that forward to the real ones, with hooks around kv_write, attention and
// rope_lookup.
class MutatedHostOps final : public runtime::HostOps {
 public:
  struct Hooks {
    int k_no_rope_layer = -1;                  // un-rotate K before this layer's kv_write
    bool attention_off_by_one = false;
    std::optional<PlainRope> rope;             // replaces the RoPE tables
  };
  MutatedHostOps(std::unique_ptr<runtime::HostOps> inner, const elf::ModelShape& m, Hooks hooks)
      : inner_(std::move(inner)), m_(m), hooks_(std::move(hooks)) {}

  absl::StatusOr<int> BindHostStep(const elf::HostStep& step,
                                   const std::vector<std::pair<std::string, Value>>& values) override {
    absl::StatusOr<int> handle = inner_->BindHostStep(step, values);
    if (handle.ok()) bound_[*handle] = {&step, values};
    return handle;
  }

  // Token by token (row by row), so that each hook sees one position: the inner
  // host ops give each row what a one-token call at its position would.
  absl::Status RunHostStep(int handle, absl::Span<const uint32_t> tokens, int position, int first_row) override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      DK_RETURN_IF_ERROR(RunRow(handle, tokens[i], position + static_cast<int>(i), first_row + static_cast<int>(i)));
    }
    return absl::OkStatus();
  }
  void Reset() override { inner_->Reset(); }

 private:
  absl::Status RunRow(int handle, uint32_t token, int position, int row) {
    const auto found = bound_.find(handle);
    if (found == bound_.end()) return absl::InvalidArgumentError("mutation: unbound host step");
    const elf::HostStep& step = *found->second.step;
    auto get = [&](const char* param) -> void* {
      for (const auto& [name, v] : found->second.values) {
        if (name == param) return static_cast<uint8_t*>(v.data) + row * v.row_bytes;
      }
      return nullptr;
    };
    const size_t half = m_.head_dim() / 2;
    if (static_cast<int>(cos_.size()) <= row) {
      cos_.resize(row + 1, std::vector<float>(half));
      sin_.resize(row + 1, std::vector<float>(half));
    }
    if (step.kind() == elf::HostStep::KV_WRITE && step.layer() == hooks_.k_no_rope_layer) {
      // k_rot[i] = k[i] c - k[i+h] s, k_rot[i+h] = k[i+h] c + k[i] s: rotate back.
      bf16* k = static_cast<bf16*>(get("k"));
      if (k == nullptr) return absl::InvalidArgumentError("mutation: kv_write without k");
      const std::vector<float>&c = cos_[row], &s = sin_[row];
      for (int h = 0; h < m_.n_kv_heads(); ++h) {
        bf16* x = k + h * m_.head_dim();
        for (size_t i = 0; i < half; ++i) {
          const float a = Bf16ToF32(x[i]), b = Bf16ToF32(x[i + half]);
          x[i] = F32ToBf16(a * c[i] + b * s[i]);
          x[i + half] = F32ToBf16(b * c[i] - a * s[i]);
        }
      }
    }
    const uint32_t one[1] = {token};
    if (step.kind() == elf::HostStep::ATTENTION && hooks_.attention_off_by_one && position > 0) {
      return inner_->RunHostStep(handle, one, position - 1, row);
    }
    DK_RETURN_IF_ERROR(inner_->RunHostStep(handle, one, position, row));
    if (step.kind() == elf::HostStep::ROPE_LOOKUP) {
      bf16* c = static_cast<bf16*>(get("cos"));
      bf16* s = static_cast<bf16*>(get("sin"));
      if (c == nullptr || s == nullptr) return absl::InvalidArgumentError("mutation: rope_lookup bindings");
      if (hooks_.rope) {
        std::memcpy(c, hooks_.rope->cos(position), half * sizeof(bf16));
        std::memcpy(s, hooks_.rope->sin(position), half * sizeof(bf16));
      }
      for (size_t i = 0; i < half; ++i) {
        cos_[row][i] = Bf16ToF32(c[i]);
        sin_[row][i] = Bf16ToF32(s[i]);
      }
    }
    return absl::OkStatus();
  }


  struct BoundStep {
    const elf::HostStep* step;
    std::vector<std::pair<std::string, Value>> values;
  };
  std::unique_ptr<runtime::HostOps> inner_;
  const elf::ModelShape m_;
  Hooks hooks_;
  std::map<int, BoundStep> bound_;  // by the inner host ops' handle
  std::vector<std::vector<float>> cos_, sin_;  // each token row's tables (for un-rotating K)
};

absl::StatusOr<weights::Tensor*> Mutable(weights::Weights* w, const std::string& name) {
  const weights::Tensor* t = w->Find(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("mutation: no tensor ", name));
  return const_cast<weights::Tensor*>(t);  // the verify tool owns the only reference
}

// A GGUF stage (quantize_weights scheme gguf) reads a tensor's own blocks from the
// file (Tensor::stored, blocks_as_stored), not its bf16 values: a weight mutation must
// break those too, or it never reaches that stage. Points `t`'s stored blocks at a
// writable copy (kept for the process's life: test only) and returns it; nullptr for a
// tensor without stored blocks.
uint8_t* MutableStored(weights::Tensor* t) {
  if (t->stored.format == elf::BLOCK_FORMAT_NONE || t->stored.data == nullptr || t->shape.empty()) return nullptr;
  static auto* copies = new std::vector<std::unique_ptr<uint8_t[]>>();
  const size_t bytes = static_cast<size_t>(t->shape[0]) * t->stored.row_bytes;
  copies->push_back(std::make_unique<uint8_t[]>(bytes));
  uint8_t* copy = copies->back().get();
  std::memcpy(copy, t->stored.data, bytes);
  t->stored.data = copy;
  return copy;
}

runtime::HostOpsWrapper Wrap(MutatedHostOps::Hooks hooks) {
  auto shared = std::make_shared<MutatedHostOps::Hooks>(std::move(hooks));
  return [shared](std::unique_ptr<runtime::HostOps> inner, const elf::ModelShape& m) {
    return std::unique_ptr<runtime::HostOps>(new MutatedHostOps(std::move(inner), m, *shared));
  };
}

// Removes every launch of kernel symbol `symbol` (x -> y; with `weight_suffix`, only those
// whose weight "w" is a tensor named so) and makes whatever read its y read its x: the
// model without that step. y must be an INTERMEDIATE BO (a merged stage).
absl::Status DropLaunches(elf::Program* p, const std::string& symbol, const std::string& weight_suffix = "") {
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p->bos()) bos[b.name()] = &b;
  std::map<std::string, std::string> replace;  // y BO -> x BO
  for (auto& step : *p->mutable_steps()) {
    if (!step.has_group()) continue;
    auto* launches = step.mutable_group()->mutable_launches();
    for (int i = launches->size() - 1; i >= 0; --i) {
      if (launches->Get(i).kernel_symbol() != symbol) continue;
      std::string x, y, w;
      for (const auto& b : launches->Get(i).bindings()) {
        if (b.param() == "x") x = b.bo();
        if (b.param() == "y") y = b.bo();
        if (b.param() == "w") w = b.bo();
      }
      if (!weight_suffix.empty() &&
          (bos.count(w) == 0 || !absl::EndsWith(bos[w]->weight_tensor(), weight_suffix))) {
        continue;
      }
      if (x.empty() || y.empty() || bos.count(y) == 0 || bos[y]->category() != elf::INTERMEDIATE) {
        return absl::FailedPreconditionError(absl::StrCat(
            "dropping ", symbol, " needs a stage where its output is an INTERMEDIATE BO (a merged stage)"));
      }
      replace[y] = x;
      launches->DeleteSubrange(i, 1);
    }
  }
  if (replace.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("the program has no ", symbol, " launch", weight_suffix.empty() ? "" : " of ", weight_suffix));
  }
  for (auto& step : *p->mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      for (auto& b : *l.mutable_bindings()) {
        if (auto it = replace.find(b.bo()); it != replace.end()) b.set_bo(it->second);
      }
    }
  }
  return absl::OkStatus();
}

// Every launch of kernel symbol `from` made a launch of `to` (the same parameters).
absl::Status SwapSymbol(elf::Program* p, const std::string& from, const std::string& to) {
  int swapped = 0;
  for (auto& step : *p->mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      if (l.kernel_symbol() != from) continue;
      l.set_kernel_symbol(to);
      ++swapped;
    }
  }
  if (swapped == 0) return absl::FailedPreconditionError(absl::StrCat("the program has no ", from, " launch"));
  return absl::OkStatus();
}

}  // namespace

constexpr char kNoiseTensor[] = "model.layers.0.self_attn.v_proj.weight";

std::vector<std::string> MutationNames() {
  return {"k_no_rope_last_layer", "drop_last_layer", "rope_unscaled",      "rope_theta_10000",
          "swap_kv_heads",        "noise_1pct",      "attention_off_by_one", "no_qkv_bias",
          "no_qk_norm",           "no_gelu",         "no_norm_plus_one",     "no_post_ffn_norm",
          "no_embedding_scale",   "no_sliding_window", "no_local_rope",   "qk_norm_weights_one",
          "no_post_attention_norm", "no_pre_ffn_norm", "rope_bases_swapped"};
}

namespace {

// The mutations of norms and RoPE bases that real (trained) weights expose: synthetic
// models whose every norm weight was 1 could not tell them from the correct model.
// nullopt when `name` is none of them.
std::optional<absl::Status> ApplyNormMutation(const std::string& name, elf::Program* program,
                                              weights::Weights* w) {
  const elf::ModelShape& m = program->model();
  if (name == "qk_norm_weights_one") {
    if (!m.qk_norm()) return absl::InvalidArgumentError("qk_norm_weights_one: the model has no QK-norm");
    const bf16 identity = m.norm_plus_one() ? bf16{0x0000} : bf16{0x3F80};
    for (int l = 0; l < m.n_layers(); ++l) {
      for (const char* t : {"q_norm", "k_norm"}) {
        auto tensor = Mutable(w, absl::StrCat("model.layers.", l, ".self_attn.", t, ".weight"));
        if (!tensor.ok()) return tensor.status();
        std::fill((*tensor)->data.data(), (*tensor)->data.data() + (*tensor)->numel(), identity);
      }
    }
    return absl::OkStatus();
  }
  if (name == "no_post_attention_norm") {
    return DropLaunches(program, "dk_rmsnorm_plus1_bf16", "post_attention_layernorm.weight");
  }
  if (name == "no_pre_ffn_norm") {
    return DropLaunches(program, "dk_rmsnorm_plus1_bf16", "pre_feedforward_layernorm.weight");
  }
  if (name == "rope_bases_swapped") {
    elf::ModelShape* shape = program->mutable_model();
    if (!(shape->rope_local_theta() > 0)) return absl::InvalidArgumentError("rope_bases_swapped: one RoPE base only");
    const float global = shape->rope_theta();
    shape->set_rope_theta(shape->rope_local_theta());
    shape->set_rope_local_theta(global);
    return absl::OkStatus();
  }
  return std::nullopt;
}

}  // namespace

absl::Status ApplyMutation(const std::string& name, elf::Program* program, weights::Weights* w,
                           runtime::HostOpsWrapper* wrap_host) {
  const elf::ModelShape& m = program->model();
  const int last = m.n_layers() - 1;
  const std::string L = absl::StrCat("model.layers.", last, ".");
  const int max_context = m.max_context();
  if (std::optional<absl::Status> s = ApplyNormMutation(name, program, w)) return *s;
  if (name == "k_no_rope_last_layer") {
    MutatedHostOps::Hooks hooks;
    hooks.k_no_rope_layer = last;
    *wrap_host = Wrap(std::move(hooks));
    return absl::OkStatus();
  }
  if (name == "attention_off_by_one") {
    MutatedHostOps::Hooks hooks;
    hooks.attention_off_by_one = true;
    *wrap_host = Wrap(std::move(hooks));
    return absl::OkStatus();
  }
  if (name == "rope_unscaled" || name == "rope_theta_10000") {
    const bool scaled = m.rope_scaling().type() == "llama3";
    float theta = m.rope_theta();
    if (name == "rope_unscaled") {
      if (!scaled) return absl::InvalidArgumentError("rope_unscaled: the model has no RoPE scaling");
    } else {
      if (scaled) {
        return absl::InvalidArgumentError("rope_theta_10000 is for models without scaling (use rope_unscaled)");
      }
      theta = 10000.0f;
    }
    MutatedHostOps::Hooks hooks;
    hooks.rope.emplace(m.head_dim(), theta, max_context);
    *wrap_host = Wrap(std::move(hooks));
    return absl::OkStatus();
  }
  if (name == "drop_last_layer") {
    for (const char* t : {"self_attn.o_proj.weight", "mlp.down_proj.weight"}) {
      auto tensor = Mutable(w, L + t);
      if (!tensor.ok()) return tensor.status();
      std::memset((*tensor)->data.data(), 0, (*tensor)->numel() * sizeof(bf16));
      // Every GGUF block format's scales are its leading bytes: all-zero blocks are zeros.
      if (uint8_t* blocks = MutableStored(*tensor)) {
        std::memset(blocks, 0, static_cast<size_t>((*tensor)->shape[0]) * (*tensor)->stored.row_bytes);
      }
    }
    return absl::OkStatus();
  }
  if (name == "no_qk_norm") {
    if (!m.qk_norm()) return absl::InvalidArgumentError("no_qk_norm: the model has no QK-norm");
    return DropLaunches(program, m.norm_plus_one() ? "dk_head_rmsnorm_plus1_bf16" : "dk_head_rmsnorm_bf16");
  }
  // Gemma 3's features, each switched off alone.
  if (name == "no_gelu") return SwapSymbol(program, "dk_gelu_tanh_mul_bf16", "dk_silu_mul_bf16");
  if (name == "no_norm_plus_one") {
    DK_RETURN_IF_ERROR(SwapSymbol(program, "dk_rmsnorm_plus1_bf16", "dk_rmsnorm_bf16"));
    return m.qk_norm() ? SwapSymbol(program, "dk_head_rmsnorm_plus1_bf16", "dk_head_rmsnorm_bf16")
                       : absl::OkStatus();
  }
  if (name == "no_post_ffn_norm") {
    return DropLaunches(program, "dk_rmsnorm_plus1_bf16", "post_feedforward_layernorm.weight");
  }
  if (name == "no_embedding_scale" || name == "no_sliding_window" || name == "no_local_rope") {
    // Read by the host ops from the program's model shape.
    elf::ModelShape* shape = program->mutable_model();
    if (name == "no_embedding_scale") {
      if (!shape->embedding_scale()) return absl::InvalidArgumentError("no_embedding_scale: the model has none");
      shape->set_embedding_scale(false);
    } else if (name == "no_sliding_window") {
      if (shape->sliding_window() == 0) return absl::InvalidArgumentError("no_sliding_window: the model has none");
      for (int l = 0; l < shape->layer_types_size(); ++l) shape->set_layer_types(l, elf::ModelShape::FULL_ATTENTION);
    } else {
      if (!(shape->rope_local_theta() > 0)) return absl::InvalidArgumentError("no_local_rope: the model has none");
      shape->set_rope_local_theta(shape->rope_theta());
    }
    return absl::OkStatus();
  }
  if (name == "no_qkv_bias") {
    if (!m.attention_bias()) return absl::InvalidArgumentError("no_qkv_bias: the model has no q/k/v biases");
    for (int l = 0; l < m.n_layers(); ++l) {
      for (const char* t : {"q_proj", "k_proj", "v_proj"}) {
        auto tensor = Mutable(w, absl::StrCat("model.layers.", l, ".self_attn.", t, ".bias"));
        if (!tensor.ok()) return tensor.status();
        std::memset((*tensor)->data.data(), 0, (*tensor)->numel() * sizeof(bf16));
      }
    }
    return absl::OkStatus();
  }
  if (name == "swap_kv_heads") {
    // With one KV head (Gemma 3 270M) there is no second head: swapping past the
    // tensor's end would write out of bounds.
    if (m.n_kv_heads() < 2) return absl::InvalidArgumentError("swap_kv_heads: the model has one KV head");
    const int64_t rows = m.head_dim(), cols = m.hidden();
    for (const char* t : {"self_attn.k_proj.weight", "self_attn.v_proj.weight"}) {
      auto tensor = Mutable(w, L + t);
      if (!tensor.ok()) return tensor.status();
      bf16* d = (*tensor)->data.data();
      std::swap_ranges(d, d + rows * cols, d + rows * cols);
      // The file's rows too: GGUF's Q/K permutation (stored.qk_heads) moves rows only
      // within a head, so heads 0 and 1 are the same two runs of rows there.
      if (uint8_t* blocks = MutableStored(*tensor)) {
        const size_t head = static_cast<size_t>(rows) * (*tensor)->stored.row_bytes;
        std::swap_ranges(blocks, blocks + head, blocks + head);
      }
    }
    return absl::OkStatus();
  }
  if (absl::StartsWith(name, "noise_")) {
    // noise_<P>pct[:TENSOR]: N(0, (P/100 * rms)^2) added to TENSOR (default kNoiseTensor).
    std::vector<std::string> parts = absl::StrSplit(name.substr(6), absl::MaxSplits(':', 1));
    double percent = 0;
    if (!absl::EndsWith(parts[0], "pct") ||
        !absl::SimpleAtod(parts[0].substr(0, parts[0].size() - 3), &percent) || !(percent > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("bad mutation \"", name, "\": noise_<P>pct[:TENSOR]"));
    }
    const std::string target = parts.size() > 1 ? parts[1] : std::string(kNoiseTensor);
    auto tensor = Mutable(w, target);
    if (!tensor.ok()) return tensor.status();
    bf16* d = (*tensor)->data.data();
    const int64_t n = (*tensor)->numel();
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += double{Bf16ToF32(d[i])} * Bf16ToF32(d[i]);
    const double sigma = percent / 100 * std::sqrt(sq / std::max<int64_t>(n, 1));
    std::mt19937_64 rng(1234);
    std::normal_distribution<double> noise(0.0, sigma);
    for (int64_t i = 0; i < n; ++i) d[i] = F32ToBf16(static_cast<float>(Bf16ToF32(d[i]) + noise(rng)));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --test_mutation \"", name, "\"; one of ", absl::StrJoin(MutationNames(), ", ")));
}

}  // namespace dk::verify
