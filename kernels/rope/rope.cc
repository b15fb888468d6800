#include "kernels/rope/rope.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/rope/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/common/bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RopeImpl(bf16* x, size_t n_heads, size_t head_dim, const bf16* cos,
              const bf16* sin) {
  const hn::ScalableTag<float> df;
  const size_t nf = hn::Lanes(df);
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < n_heads; ++h) {
    bf16* lo = x + h * head_dim;
    bf16* hi = lo + half;
    size_t i = 0;
    for (; i + nf <= half; i += nf) {
      const auto a = LoadBf16(df, lo + i), b = LoadBf16(df, hi + i);
      const auto c = LoadBf16(df, cos + i), s = LoadBf16(df, sin + i);
      const auto ac = RoundToBf16(df, hn::Mul(a, c)), bs = RoundToBf16(df, hn::Mul(b, s));
      const auto bc = RoundToBf16(df, hn::Mul(b, c)), as = RoundToBf16(df, hn::Mul(a, s));
      StoreRoundedBf16(df, hn::Sub(ac, bs), lo + i);
      StoreRoundedBf16(df, hn::Add(bc, as), hi + i);
    }
    for (; i < half; ++i) {
      const float a = Bf16ToF32(lo[i]), b = Bf16ToF32(hi[i]);
      const float c = Bf16ToF32(cos[i]), s = Bf16ToF32(sin[i]);
      lo[i] = F32ToBf16(dk::RoundToBf16(a * c) - dk::RoundToBf16(b * s));
      hi[i] = F32ToBf16(dk::RoundToBf16(b * c) + dk::RoundToBf16(a * s));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(RopeImpl);

void RopeHalfSplit(bf16* x, size_t n_heads, size_t head_dim, const bf16* cos,
                   const bf16* sin) {
  HWY_DYNAMIC_DISPATCH(RopeImpl)(x, n_heads, head_dim, cos, sin);
}

std::vector<float> RopeInverseFrequencies(const RopeConfig& config) {
  const size_t half = config.head_dim / 2;
  std::vector<float> inv(half);
  for (size_t i = 0; i < half; ++i) {
    // torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in f32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.head_dim);
    inv[i] = 1.0f / std::pow(config.theta, exponent);
  }
  if (!config.llama3_scaling) return inv;
  const Llama3RopeScaling& s = config.llama3;
  const float low_freq_wavelen = s.original_max_position / s.low_freq_factor;
  const float high_freq_wavelen = s.original_max_position / s.high_freq_factor;
  const float two_pi = static_cast<float>(2.0 * M_PI);
  for (float& f : inv) {
    const float wavelen = two_pi / f;
    if (wavelen > low_freq_wavelen) {
      f = f / s.factor;  // low frequencies: fully scaled
    } else if (wavelen >= high_freq_wavelen) {
      // medium band: interpolate between scaled and unscaled
      const float smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                           (s.high_freq_factor - s.low_freq_factor);
      f = (1.0f - smooth) * f / s.factor + smooth * f;
    }  // high frequencies: unchanged
  }
  return inv;
}

absl::StatusOr<RopeTable> RopeTable::Create(const RopeConfig& config,
                                            size_t max_positions) {
  if (config.head_dim == 0 || config.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RoPE head_dim must be even and positive, got ", config.head_dim));
  }
  if (!(config.theta > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("RoPE theta must be > 0, got ", config.theta));
  }
  if (max_positions == 0) {
    return absl::InvalidArgumentError("RoPE table needs at least one position");
  }
  if (config.llama3_scaling) {
    const Llama3RopeScaling& s = config.llama3;
    if (!(s.factor > 0.0f) || !(s.low_freq_factor > 0.0f) ||
        !(s.high_freq_factor > s.low_freq_factor) || !(s.original_max_position > 0.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid llama3 RoPE scaling: factor=", s.factor, " low_freq_factor=",
          s.low_freq_factor, " high_freq_factor=", s.high_freq_factor,
          " original_max_position_embeddings=", s.original_max_position));
    }
  }
  const std::vector<float> inv = RopeInverseFrequencies(config);
  const size_t half = config.head_dim / 2;
  RopeTable table;
  table.head_dim_ = config.head_dim;
  table.max_positions_ = max_positions;
  table.cos_ = AlignedBuffer<bf16>(max_positions * half);
  table.sin_ = AlignedBuffer<bf16>(max_positions * half);
  if (table.cos_.size() != max_positions * half || table.sin_.size() != max_positions * half) {
    return absl::ResourceExhaustedError("out of memory for the RoPE table");
  }
  for (size_t p = 0; p < max_positions; ++p) {
    for (size_t i = 0; i < half; ++i) {
      // torch: freqs = inv_freq (f32) * position (f32); cos/sin in f32, then bf16.
      const float angle = inv[i] * static_cast<float>(p);
      table.cos_[p * half + i] = F32ToBf16(static_cast<float>(std::cos(static_cast<double>(angle))));
      table.sin_[p * half + i] = F32ToBf16(static_cast<float>(std::sin(static_cast<double>(angle))));
    }
  }
  return table;
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
