// bfloat16 storage type and conversions that match PyTorch's float -> bf16 cast
// (round to nearest, ties to even; NaN stays NaN).
#ifndef DK_UTIL_BF16_H_
#define DK_UTIL_BF16_H_

#include <cstdint>
#include <cstring>

namespace dk {

// A bfloat16 value: the upper 16 bits of an IEEE-754 binary32. Layout-compatible
// with hwy::bfloat16_t and with torch.bfloat16 storage. Thread-safe (a value type).
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 must be 2 bytes");

inline float Bf16ToF32(bf16 v) {
  const uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline bf16 F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet, keep the sign.
    return bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>((u + rounding_bias) >> 16)};
}

// Rounds an f32 to the nearest bf16 and back: what a bf16 tensor stores.
inline float RoundToBf16(float f) { return Bf16ToF32(F32ToBf16(f)); }

}  // namespace dk

#endif  // DK_UTIL_BF16_H_
