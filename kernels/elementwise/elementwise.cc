#include "kernels/elementwise/elementwise.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/common/bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SiluMulImpl(const bf16* gate, const bf16* up, size_t n, bf16* out) {
  const hn::ScalableTag<float> df;
  const size_t nf = hn::Lanes(df);
  const auto one = hn::Set(df, 1.0f);
  size_t i = 0;
  for (; i + nf <= n; i += nf) {
    const auto g = LoadBf16(df, gate + i);
    // silu(g) = g / (1 + exp(-g)), rounded to bf16 as torch's bf16 silu does.
    const auto silu = hn::Div(g, hn::Add(one, hn::CallExp(df, hn::Neg(g))));
    StoreRoundedBf16(df, hn::Mul(RoundToBf16(df, silu), LoadBf16(df, up + i)), out + i);
  }
  for (; i < n; ++i) {
    const float g = Bf16ToF32(gate[i]);
    const float silu = dk::RoundToBf16(g / (1.0f + std::exp(-g)));
    out[i] = F32ToBf16(silu * Bf16ToF32(up[i]));
  }
}

// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))), in f32 as torch's
// CPU kernel computes it for bf16, rounded to bf16 before the product with up.
constexpr float kGeluBeta = 0.7978845608028654f, kGeluKappa = 0.044715f;

void GeluTanhMulImpl(const bf16* gate, const bf16* up, size_t n, bf16* out) {
  const hn::ScalableTag<float> df;
  const size_t nf = hn::Lanes(df);
  const auto half = hn::Set(df, 0.5f), one = hn::Set(df, 1.0f);
  const auto beta = hn::Set(df, kGeluBeta), kappa = hn::Set(df, kGeluKappa);
  size_t i = 0;
  for (; i + nf <= n; i += nf) {
    const auto g = LoadBf16(df, gate + i);
    const auto inner = hn::Mul(beta, hn::MulAdd(hn::Mul(kappa, g), hn::Mul(g, g), g));
    const auto gelu = hn::Mul(hn::Mul(half, g), hn::Add(one, hn::CallTanh(df, inner)));
    StoreRoundedBf16(df, hn::Mul(RoundToBf16(df, gelu), LoadBf16(df, up + i)), out + i);
  }
  for (; i < n; ++i) {
    const float g = Bf16ToF32(gate[i]);
    const float gelu = 0.5f * g * (1.0f + std::tanh(kGeluBeta * (g + kGeluKappa * g * g * g)));
    out[i] = F32ToBf16(dk::RoundToBf16(gelu) * Bf16ToF32(up[i]));
  }
}

void AddImpl(const bf16* a, const bf16* b, size_t n, bf16* out) {
  const hn::ScalableTag<float> df;
  const size_t nf = hn::Lanes(df);
  size_t i = 0;
  for (; i + nf <= n; i += nf) {
    StoreRoundedBf16(df, hn::Add(LoadBf16(df, a + i), LoadBf16(df, b + i)), out + i);
  }
  for (; i < n; ++i) out[i] = F32ToBf16(Bf16ToF32(a[i]) + Bf16ToF32(b[i]));
}

void AddBiasImpl(const float* x, const bf16* bias, size_t n, bf16* out) {
  const hn::ScalableTag<float> df;
  const size_t nf = hn::Lanes(df);
  size_t i = 0;
  for (; i + nf <= n; i += nf) {
    StoreRoundedBf16(df, hn::Add(hn::LoadU(df, x + i), LoadBf16(df, bias + i)), out + i);
  }
  for (; i < n; ++i) out[i] = F32ToBf16(x[i] + Bf16ToF32(bias[i]));
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(SiluMulImpl);
HWY_EXPORT(AddImpl);
HWY_EXPORT(GeluTanhMulImpl);
HWY_EXPORT(AddBiasImpl);

void SiluMul(const bf16* gate, const bf16* up, size_t n, bf16* out) {
  HWY_DYNAMIC_DISPATCH(SiluMulImpl)(gate, up, n, out);
}

void GeluTanhMul(const bf16* gate, const bf16* up, size_t n, bf16* out) {
  HWY_DYNAMIC_DISPATCH(GeluTanhMulImpl)(gate, up, n, out);
}

void Add(const bf16* a, const bf16* b, size_t n, bf16* out) {
  HWY_DYNAMIC_DISPATCH(AddImpl)(a, b, n, out);
}

void AddBias(const float* x, const bf16* bias, size_t n, bf16* out) {
  HWY_DYNAMIC_DISPATCH(AddBiasImpl)(x, bias, n, out);
}

absl::Status EmbeddingLookup(const bf16* table, size_t vocab, size_t dim, uint32_t id,
                             bf16* out) {
  if (id >= vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is out of range for a vocabulary of ", vocab));
  }
  std::memmove(out, table + static_cast<size_t>(id) * dim, dim * sizeof(bf16));
  return absl::OkStatus();
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
