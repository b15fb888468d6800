#include "verify/reference/reference_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/bf16.h"

namespace dk::verify {

ReferenceDecoder::ReferenceDecoder(const elf::ModelShape& m, const weights::Weights& w) : m_(m), w_(w) {
  k_.assign(m.n_layers(), {});
  v_.assign(m.n_layers(), {});
}

std::vector<double> ReferenceDecoder::Step(uint32_t token) {
  const int H = m_.hidden();
  std::vector<double> h = Row("model.embed_tokens.weight", token, H);
  if (m_.embedding_scale()) {  // Gemma: times bf16(sqrt(hidden)), in bf16
    for (double& x : h) x = R(x * R(std::sqrt(static_cast<double>(H))));
  }
  for (int l = 0; l < m_.n_layers(); ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    auto o = Attention(l, Norm(h, p + "input_layernorm.weight"));
    if (m_.sandwich_norms()) o = Norm(o, p + "post_attention_layernorm.weight");
    for (int i = 0; i < H; ++i) h[i] = R(h[i] + o[i]);
    auto xn2 = Norm(h, p + (m_.sandwich_norms() ? "pre_feedforward_layernorm.weight"
                                                : "post_attention_layernorm.weight"));
    auto g = Linear(xn2, p + "mlp.gate_proj.weight");
    auto u = Linear(xn2, p + "mlp.up_proj.weight");
    for (size_t i = 0; i < g.size(); ++i) g[i] = R(R(Act(g[i])) * u[i]);
    auto d = Linear(g, p + "mlp.down_proj.weight");
    if (m_.sandwich_norms()) d = Norm(d, p + "post_feedforward_layernorm.weight");
    for (int i = 0; i < H; ++i) h[i] = R(h[i] + d[i]);
  }
  auto xf = Norm(h, "model.norm.weight");
  ++pos_;
  return Linear(xf, m_.tied_embeddings() ? "model.embed_tokens.weight" : "lm_head.weight",
                /*round=*/false);
}

double ReferenceDecoder::R(double x) { return RoundToBf16(static_cast<float>(x)); }
const weights::Tensor& ReferenceDecoder::T(const std::string& name) const { return *w_.Find(name); }
double ReferenceDecoder::At(const std::string& name, int64_t i) const { return Bf16ToF32(T(name).data[i]); }
bool ReferenceDecoder::Sliding(int l) const {
  return l < m_.layer_types_size() && m_.layer_types(l) == elf::ModelShape::SLIDING_ATTENTION;
}

// Layer l's attention of the normed hidden state `xn`, through o_proj.
std::vector<double> ReferenceDecoder::Attention(int l, const std::vector<double>& xn) {
  const int hd = m_.head_dim(), nh = m_.n_heads(), nkv = m_.n_kv_heads();
  const std::string p = absl::StrCat("model.layers.", l, ".self_attn.");
  auto q = Projection(xn, p + "q_proj"), k = Projection(xn, p + "k_proj");
  if (m_.qk_norm()) {  // each head normed by a [head_dim] weight before RoPE
    q = HeadNorm(q, p + "q_norm.weight");
    k = HeadNorm(k, p + "k_norm.weight");
  }
  q = Rope(q, nh, Sliding(l));
  k_[l].push_back(Rope(k, nkv, Sliding(l)));
  v_[l].push_back(Projection(xn, p + "v_proj"));
  // A sliding layer sees the last sliding_window positions, the current one included.
  const int n = static_cast<int>(k_[l].size());
  const int first = Sliding(l) ? std::max(0, n - m_.sliding_window()) : 0;
  const double scalar = m_.query_pre_attn_scalar() > 0 ? m_.query_pre_attn_scalar() : hd;
  std::vector<double> attn(nh * hd);
  const int group = nh / nkv;
  for (int head = 0; head < nh; ++head) {
    const int kvh = head / group;
    std::vector<double> s(n - first);
    double mx = -1e300;
    for (int t = first; t < n; ++t) {
      double dot = 0;
      for (int i = 0; i < hd; ++i) dot += q[head * hd + i] * k_[l][t][kvh * hd + i];
      s[t - first] = dot / std::sqrt(scalar);
      mx = std::max(mx, s[t - first]);
    }
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int i = 0; i < hd; ++i) {
      double acc = 0;
      for (int t = first; t < n; ++t) acc += s[t - first] / sum * v_[l][t][kvh * hd + i];
      attn[head * hd + i] = R(acc);
    }
  }
  return Linear(attn, p + "o_proj.weight");
}

// FFN activation: SiLU, or Gemma's GELU with the tanh approximation.
double ReferenceDecoder::Act(double g) const {
  if (m_.ffn_activation() != elf::ModelShape::GELU_TANH) return g / (1 + std::exp(-g));
  return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
}

std::vector<double> ReferenceDecoder::Row(const std::string& name, int64_t row, int n) const {
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = At(name, row * n + i);
  return out;
}

std::vector<double> ReferenceDecoder::Linear(const std::vector<double>& x, const std::string& name,
                                             bool round) const {
  const auto& t = T(name);
  const int64_t rows = t.shape[0], cols = t.shape[1];
  std::vector<double> y(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += Bf16ToF32(t.data[r * cols + c]) * x[c];
    y[r] = round ? R(acc) : static_cast<float>(acc);
  }
  return y;
}

// q/k/v: Qwen2's bias is added to the f32 product, rounded once (torch's addmm).
std::vector<double> ReferenceDecoder::Projection(const std::vector<double>& x, const std::string& name) const {
  if (!m_.attention_bias()) return Linear(x, name + ".weight");
  auto y = Linear(x, name + ".weight", /*round=*/false);
  for (size_t i = 0; i < y.size(); ++i) y[i] = R(y[i] + At(name + ".bias", i));
  return y;
}

// RMSNorm of x[at, at + n) by weight `name`: Llama's bf16(w * bf16(x / rms)), or
// Gemma's bf16(x / rms * (1 + w)), rounded once.
void ReferenceDecoder::NormInto(std::vector<double>& x, size_t at, size_t n, const std::string& name) const {
  double ss = 0;
  for (size_t i = at; i < at + n; ++i) ss += x[i] * x[i];
  const double inv = 1 / std::sqrt(ss / n + m_.rms_eps());
  for (size_t i = at; i < at + n; ++i) {
    x[i] = m_.norm_plus_one() ? R(x[i] * inv * (1 + At(name, i - at))) : R(At(name, i - at) * R(x[i] * inv));
  }
}

std::vector<double> ReferenceDecoder::Norm(std::vector<double> x, const std::string& name) const {
  NormInto(x, 0, x.size(), name);
  return x;
}

std::vector<double> ReferenceDecoder::HeadNorm(std::vector<double> x, const std::string& name) const {
  for (size_t at = 0; at < x.size(); at += m_.head_dim()) NormInto(x, at, m_.head_dim(), name);
  return x;
}

// Half-split RoPE at the current position; sliding layers use rope_local_theta,
// unscaled (HF's local rotary embedding), full ones rope_theta with its scaling.
std::vector<double> ReferenceDecoder::Rope(std::vector<double> x, int heads, bool local) const {
  const int hd = m_.head_dim(), half = hd / 2;
  const double theta = local ? m_.rope_local_theta() : m_.rope_theta();
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < half; ++i) {
      double inv = 1 / std::pow(theta, 2.0 * i / hd);
      if (!local && m_.rope_scaling().type() == "llama3") inv = Llama3Scaled(inv);
      const double c = R(std::cos(inv * pos_)), sn = R(std::sin(inv * pos_));
      double& a = x[h * hd + i];
      double& b = x[h * hd + i + half];
      const double na = R(R(a * c) - R(b * sn)), nb = R(R(b * c) + R(a * sn));
      a = na;
      b = nb;
    }
  }
  return x;
}

// Llama 3's frequency scaling: long wavelengths slowed by `factor`, short ones kept,
// a smooth blend between.
double ReferenceDecoder::Llama3Scaled(double inv) const {
  const auto& s = m_.rope_scaling();
  const double wl = 2 * M_PI / inv, lo = s.original_max_position() / s.low_freq_factor(),
               hi = s.original_max_position() / s.high_freq_factor();
  if (wl > lo) return inv / s.factor();
  if (wl < hi) return inv;
  const double sm = (s.original_max_position() / wl - s.low_freq_factor()) /
                    (s.high_freq_factor() - s.low_freq_factor());
  return (1 - sm) * inv / s.factor() + sm * inv;
}

}  // namespace dk::verify
