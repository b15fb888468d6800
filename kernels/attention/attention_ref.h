// Scalar f64 reference for DecodeAttention (tests only).
#ifndef DK_KERNELS_ATTENTION_ATTENTION_REF_H_
#define DK_KERNELS_ATTENTION_ATTENTION_REF_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/attention/attention.h"
#include "util/bf16.h"

namespace dk::kernels::ref {

// Returns out[n_heads * head_dim] of softmax(q k^T * scale) v over positions
// 0..pos, computed in double from the bf16 inputs (same layouts as DecodeAttention).
inline std::vector<double> DecodeAttention(const AttentionDims& d, const bf16* q,
                                           const bf16* k, const bf16* v, size_t pos,
                                           double scale) {
  const size_t hd = d.head_dim, n = pos + 1, group = d.n_heads / d.n_kv_heads;
  std::vector<double> out(d.n_heads * hd, 0.0), s(n);
  for (size_t h = 0; h < d.n_heads; ++h) {
    const size_t g = h / group;
    const bf16* kg = k + g * d.max_ctx * hd;
    const bf16* vg = v + g * d.max_ctx * hd;
    double mx = -HUGE_VAL;
    for (size_t t = 0; t < n; ++t) {
      double dot = 0.0;
      for (size_t i = 0; i < hd; ++i) {
        dot += static_cast<double>(Bf16ToF32(q[h * hd + i])) * Bf16ToF32(kg[t * hd + i]);
      }
      s[t] = dot * scale;
      mx = std::max(mx, s[t]);
    }
    double sum = 0.0;
    for (size_t t = 0; t < n; ++t) sum += (s[t] = std::exp(s[t] - mx));
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < hd; ++i) {
        out[h * hd + i] += s[t] / sum * Bf16ToF32(vg[t * hd + i]);
      }
    }
  }
  return out;
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_ATTENTION_ATTENTION_REF_H_
