// A scalar reference forward pass of a Llama-architecture model for tests: f64
// math with bf16 rounding where HF's bf16 forward rounds (after every op that
// produces a bf16 tensor). Independent of kernels/ and runtime/; slow; tiny
// models only.
#ifndef DK_TESTS_E2E_REFERENCE_LLAMA_H_
#define DK_TESTS_E2E_REFERENCE_LLAMA_H_

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "elf/program.pb.h"
#include "util/bf16.h"
#include "weights/weights.h"

namespace dk::testing {

class ReferenceLlama {
 public:
  ReferenceLlama(const elf::ModelShape& m, const weights::Weights& w) : m_(m), w_(w) {
    k_.assign(m.n_layers(), {});
    v_.assign(m.n_layers(), {});
  }

  // Logits (f32, as HF's lm_head in bf16 then .float(): rounded to bf16) for the
  // next token after `token` at the next position.
  std::vector<double> Step(uint32_t token) {
    const int H = m_.hidden(), hd = m_.head_dim(), nh = m_.n_heads(), nkv = m_.n_kv_heads();
    std::vector<double> h = Row("model.embed_tokens.weight", token, H);
    for (int l = 0; l < m_.n_layers(); ++l) {
      const std::string p = absl::StrCat("model.layers.", l, ".");
      auto xn = Norm(h, p + "input_layernorm.weight");
      auto q = Rope(Linear(xn, p + "self_attn.q_proj.weight"), nh);
      auto k = Rope(Linear(xn, p + "self_attn.k_proj.weight"), nkv);
      auto v = Linear(xn, p + "self_attn.v_proj.weight");
      k_[l].push_back(k);
      v_[l].push_back(v);
      std::vector<double> attn(nh * hd);
      const int group = nh / nkv, n = static_cast<int>(k_[l].size());
      for (int head = 0; head < nh; ++head) {
        const int kvh = head / group;
        std::vector<double> s(n);
        double mx = -1e300;
        for (int t = 0; t < n; ++t) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[head * hd + i] * k_[l][t][kvh * hd + i];
          s[t] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (int t = 0; t < n; ++t) acc += s[t] / sum * v_[l][t][kvh * hd + i];
          attn[head * hd + i] = R(acc);
        }
      }
      auto o = Linear(attn, p + "self_attn.o_proj.weight");
      for (int i = 0; i < H; ++i) h[i] = R(h[i] + o[i]);
      auto xn2 = Norm(h, p + "post_attention_layernorm.weight");
      auto g = Linear(xn2, p + "mlp.gate_proj.weight");
      auto u = Linear(xn2, p + "mlp.up_proj.weight");
      for (size_t i = 0; i < g.size(); ++i) g[i] = R(R(g[i] / (1 + std::exp(-g[i]))) * u[i]);
      auto d = Linear(g, p + "mlp.down_proj.weight");
      for (int i = 0; i < H; ++i) h[i] = R(h[i] + d[i]);
    }
    auto xf = Norm(h, "model.norm.weight");
    ++pos_;
    return Linear(xf, m_.tied_embeddings() ? "model.embed_tokens.weight" : "lm_head.weight",
                  /*round=*/false);
  }

 private:
  static double R(double x) { return RoundToBf16(static_cast<float>(x)); }
  const weights::Tensor& T(const std::string& name) const { return *w_.Find(name); }

  std::vector<double> Row(const std::string& name, int64_t row, int n) const {
    std::vector<double> out(n);
    for (int i = 0; i < n; ++i) out[i] = Bf16ToF32(T(name).data[row * n + i]);
    return out;
  }
  std::vector<double> Linear(const std::vector<double>& x, const std::string& name,
                             bool round = true) const {
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
  std::vector<double> Norm(const std::vector<double>& x, const std::string& name) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1 / std::sqrt(ss / x.size() + m_.rms_eps());
    const auto& w = T(name);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = R(Bf16ToF32(w.data[i]) * R(x[i] * inv));
    return y;
  }
  std::vector<double> Rope(std::vector<double> x, int heads) const {
    const int hd = m_.head_dim(), half = hd / 2;
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < half; ++i) {
        double inv = 1 / std::pow(static_cast<double>(m_.rope_theta()), 2.0 * i / hd);
        if (m_.rope_scaling().type() == "llama3") {
          const auto& s = m_.rope_scaling();
          const double wl = 2 * M_PI / inv, lo = s.original_max_position() / s.low_freq_factor(),
                       hi = s.original_max_position() / s.high_freq_factor();
          if (wl > lo) {
            inv /= s.factor();
          } else if (wl >= hi) {
            const double sm = (s.original_max_position() / wl - s.low_freq_factor()) /
                              (s.high_freq_factor() - s.low_freq_factor());
            inv = (1 - sm) * inv / s.factor() + sm * inv;
          }
        }
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

  const elf::ModelShape m_;
  const weights::Weights& w_;
  int pos_ = 0;
  std::vector<std::vector<std::vector<double>>> k_, v_;  // [layer][pos][kv_dim]
};

}  // namespace dk::testing

#endif  // DK_TESTS_E2E_REFERENCE_LLAMA_H_
