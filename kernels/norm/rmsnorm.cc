#include "kernels/norm/rmsnorm.h"

#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/norm/rmsnorm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/common/bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// plus_one: Gemma's out = bf16((x * inv) * (1 + w)), all in f32.
void RmsNormImpl(const bf16* x, const bf16* weight, size_t n, float eps, bf16* out, bool plus_one) {
  if (n == 0) return;
  const hn::ScalableTag<float> df;
  const size_t nf = hn::Lanes(df);
  auto s0 = hn::Zero(df), s1 = hn::Zero(df);
  size_t i = 0;
  for (; i + 2 * nf <= n; i += 2 * nf) {
    const auto a = LoadBf16(df, x + i), b = LoadBf16(df, x + i + nf);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
  }
  for (; i + nf <= n; i += nf) {
    const auto a = LoadBf16(df, x + i);
    s0 = hn::MulAdd(a, a, s0);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += Bf16ToF32(x[i]) * Bf16ToF32(x[i]);
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);

  const auto vinv = hn::Set(df, inv);
  if (plus_one) {
    const auto one = hn::Set(df, 1.0f);
    for (i = 0; i + nf <= n; i += nf) {
      const auto normed = hn::Mul(LoadBf16(df, x + i), vinv);
      StoreRoundedBf16(df, hn::Mul(normed, hn::Add(one, LoadBf16(df, weight + i))), out + i);
    }
    for (; i < n; ++i) out[i] = F32ToBf16((Bf16ToF32(x[i]) * inv) * (1.0f + Bf16ToF32(weight[i])));
    return;
  }
  for (i = 0; i + nf <= n; i += nf) {
    const auto normed = RoundToBf16(df, hn::Mul(LoadBf16(df, x + i), vinv));
    StoreRoundedBf16(df, hn::Mul(LoadBf16(df, weight + i), normed), out + i);
  }
  for (; i < n; ++i) {
    const float normed = dk::RoundToBf16(Bf16ToF32(x[i]) * inv);
    out[i] = F32ToBf16(Bf16ToF32(weight[i]) * normed);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(RmsNormImpl);

void RmsNorm(const bf16* x, const bf16* weight, size_t n, float eps, bf16* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, weight, n, eps, out, false);
}

void RmsNormPlusOne(const bf16* x, const bf16* weight, size_t n, float eps, bf16* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, weight, n, eps, out, true);
}

void RmsNormHeads(const bf16* x, const bf16* weight, size_t heads, size_t head_dim, float eps,
                  bf16* out, bool plus_one) {
  for (size_t h = 0; h < heads; ++h) {
    HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x + h * head_dim, weight, head_dim, eps, out + h * head_dim, plus_one);
  }
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
