// Scalar f64 references for RoPE (tests only).
#ifndef DK_KERNELS_ROPE_ROPE_REF_H_
#define DK_KERNELS_ROPE_ROPE_REF_H_

#include <cmath>
#include <vector>

#include "kernels/rope/rope.h"
#include "util/bf16.h"

namespace dk::kernels::ref {

// HF's _compute_llama3_parameters written as its torch.where formulation, in f64.
inline std::vector<double> InverseFrequencies(const RopeConfig& c) {
  std::vector<double> inv(c.head_dim / 2);
  for (size_t i = 0; i < inv.size(); ++i) {
    inv[i] = 1.0 / std::pow(static_cast<double>(c.theta), 2.0 * i / c.head_dim);
  }
  if (!c.llama3_scaling) return inv;
  const auto& s = c.llama3;
  for (double& f : inv) {
    const double wavelen = 2 * M_PI / f;
    const double scaled = wavelen > s.original_max_position / s.low_freq_factor ? f / s.factor : f;
    const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                          (s.high_freq_factor - s.low_freq_factor);
    const double smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    const bool medium = !(wavelen < s.original_max_position / s.high_freq_factor) &&
                        !(wavelen > s.original_max_position / s.low_freq_factor);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

// One head, in f64 with the bf16 rounding points of HF's bf16 forward.
inline std::vector<float> RotateHead(const bf16* x, size_t head_dim, const bf16* cos,
                                     const bf16* sin) {
  const size_t h = head_dim / 2;
  std::vector<float> out(head_dim);
  auto mul = [](bf16 a, bf16 b) {
    return static_cast<double>(RoundToBf16(static_cast<float>(
        static_cast<double>(Bf16ToF32(a)) * Bf16ToF32(b))));
  };
  for (size_t i = 0; i < h; ++i) {
    out[i] = RoundToBf16(static_cast<float>(mul(x[i], cos[i]) - mul(x[i + h], sin[i])));
    out[i + h] = RoundToBf16(static_cast<float>(mul(x[i + h], cos[i]) + mul(x[i], sin[i])));
  }
  return out;
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_ROPE_ROPE_REF_H_
