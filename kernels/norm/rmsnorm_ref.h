// Scalar f64 reference for RMSNorm (tests only).
#ifndef DK_KERNELS_NORM_RMSNORM_REF_H_
#define DK_KERNELS_NORM_RMSNORM_REF_H_

#include <cmath>
#include <vector>

#include "util/bf16.h"

namespace dk::kernels::ref {

inline std::vector<float> RmsNorm(const bf16* x, const bf16* w, size_t n, double eps) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(Bf16ToF32(x[i])) * Bf16ToF32(x[i]);
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const float normed = RoundToBf16(static_cast<float>(Bf16ToF32(x[i]) * inv));
    out[i] = RoundToBf16(static_cast<float>(static_cast<double>(Bf16ToF32(w[i])) * normed));
  }
  return out;
}

// Gemma3RMSNorm: ((x * inv) * (1 + w)) rounded once.
inline std::vector<float> RmsNormPlusOne(const bf16* x, const bf16* w, size_t n, double eps) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(Bf16ToF32(x[i])) * Bf16ToF32(x[i]);
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = RoundToBf16(static_cast<float>(Bf16ToF32(x[i]) * inv * (1.0 + Bf16ToF32(w[i]))));
  }
  return out;
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_NORM_RMSNORM_REF_H_
