// Scalar f64 references for the elementwise kernels (tests only): the same bf16
// rounding points as torch, with the math done in double.
#ifndef DK_KERNELS_ELEMENTWISE_ELEMENTWISE_REF_H_
#define DK_KERNELS_ELEMENTWISE_ELEMENTWISE_REF_H_

#include <cmath>

#include "util/bf16.h"

namespace dk::kernels::ref {

inline float SiluMul(bf16 gate, bf16 up) {
  const double g = Bf16ToF32(gate);
  const float silu = RoundToBf16(static_cast<float>(g / (1.0 + std::exp(-g))));
  return RoundToBf16(static_cast<float>(static_cast<double>(silu) * Bf16ToF32(up)));
}

inline float GeluTanhMul(bf16 gate, bf16 up) {
  const double g = Bf16ToF32(gate);
  const double gelu = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
  return RoundToBf16(static_cast<float>(static_cast<double>(RoundToBf16(static_cast<float>(gelu))) * Bf16ToF32(up)));
}

inline float Add(bf16 a, bf16 b) {
  return RoundToBf16(static_cast<float>(static_cast<double>(Bf16ToF32(a)) + Bf16ToF32(b)));
}

// x + bias is exact in double while their exponents differ by less than 29 (the
// tests' values); the kernel's f32 sum is that sum rounded to f32, then to bf16.
inline float AddBias(float x, bf16 bias) {
  return RoundToBf16(static_cast<float>(static_cast<double>(x) + Bf16ToF32(bias)));
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_ELEMENTWISE_ELEMENTWISE_REF_H_
