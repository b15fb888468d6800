// The portable rows of Q5_0 / Q4_K / Q6_K (gemv_kquant.h): each block unpacked to
// signed bytes and per-16-element scales by scalar code, then the SIMD dot products.
#include "kernels/gemv/gemv_kquant.h"

#include <cstring>

#include "util/ggml_blocks.h"

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemv/gemv_kquant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// Target-independent: compiled once.
#ifndef DK_KERNELS_GEMV_GEMV_KQUANT_UNPACK_
#define DK_KERNELS_GEMV_GEMV_KQUANT_UNPACK_
namespace dk::kernels::internal {
namespace {

// One block: w[i] = scale[i / 16] * q[i] - min[i / 32], exactly the format's values
// up to the f32 rounding of scale and min.
struct Unpacked {
  int8_t q[ggml::kSuperBlockElems];
  float scale[ggml::kSuperBlockElems / 16];
  float min[ggml::kSuperBlockElems / 32];
};

inline void UnpackQ5_0(const uint8_t* b, Unpacked* u) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ5_0*>(b);
  const uint32_t qh = uint32_t{blk->qh[0]} | (uint32_t{blk->qh[1]} << 8) | (uint32_t{blk->qh[2]} << 16) |
                      (uint32_t{blk->qh[3]} << 24);
  for (size_t i = 0; i < ggml::kBlockElems; ++i) {
    u->q[i] = static_cast<int8_t>((ggml::Nibble(blk->qs, i) | (((qh >> i) & 1u) << 4)) - 16);
  }
  u->scale[0] = u->scale[1] = ggml::F16FieldToF32(blk->d);
  u->min[0] = 0.0f;
}

// 64 elements per 32 bytes of qs: the low nibbles are sub-block 2j, the high 2j + 1.
inline void UnpackQ4_K(const uint8_t* b, Unpacked* u) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ4_K*>(b);
  const float d = ggml::F16FieldToF32(blk->d), dmin = ggml::F16FieldToF32(blk->dmin);
  for (size_t j = 0; j < 4; ++j) {
    for (size_t l = 0; l < 32; ++l) {
      u->q[64 * j + l] = static_cast<int8_t>(blk->qs[32 * j + l] & 0x0F);
      u->q[64 * j + 32 + l] = static_cast<int8_t>(blk->qs[32 * j + l] >> 4);
    }
  }
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    ggml::UnpackScaleMinK4(blk->scales, s, &sc, &m);
    u->scale[2 * s] = u->scale[2 * s + 1] = d * sc;
    u->min[s] = dmin * m;
  }
}

// Each 128-element half: ql's 64 bytes give the low 4 bits (low nibbles elements
// 0..63, high nibbles 64..127), qh's 32 bytes the top 2 bits of elements l, l + 32,
// l + 64, l + 96 in bit pairs 0, 2, 4, 6 of byte l.
inline void UnpackQ6_K(const uint8_t* b, Unpacked* u) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ6_K*>(b);
  for (size_t n = 0; n < 2; ++n) {
    const uint8_t* ql = blk->ql + 64 * n;
    const uint8_t* qh = blk->qh + 32 * n;
    int8_t* q = u->q + 128 * n;
    for (size_t l = 0; l < 32; ++l) {
      q[l] = static_cast<int8_t>(((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32);
      q[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
      q[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      q[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  const float d = ggml::F16FieldToF32(blk->d);
  for (size_t g = 0; g < 16; ++g) u->scale[g] = d * blk->scales[g];
  for (float& m : u->min) m = 0.0f;
}

template <WeightFormat F>
inline void Unpack(const uint8_t* b, Unpacked* u) {
  if constexpr (F == WeightFormat::kQ5_0) UnpackQ5_0(b, u);
  if constexpr (F == WeightFormat::kQ4_K) UnpackQ4_K(b, u);
  if constexpr (F == WeightFormat::kQ6_K) UnpackQ6_K(b, u);
}

}  // namespace
}  // namespace dk::kernels::internal
#endif  // DK_KERNELS_GEMV_GEMV_KQUANT_UNPACK_

HWY_BEFORE_NAMESPACE();
namespace dk::kernels::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline void StoreOut(float v, float* y) { *y = v; }
inline void StoreOut(float v, bf16* y) { *y = F32ToBf16(v); }

// kInt8: each 16-element sub-block's dot product exact in i32 (i16 multiply-adds),
// scaled by its scale times its activation block's dx into accumulator g % 2; the
// minimums (Q4_K) through dx * sum(q_x) per 32.
template <WeightFormat F, typename YT>
void Int8Rows(const uint8_t* HWY_RESTRICT w, size_t cols, size_t r0, size_t r1, const Q8Activations& x,
              YT* HWY_RESTRICT y) {
  constexpr size_t kElems = formats::BlockElems(F), kBytes = formats::BlockBytes(F);
  const hn::CappedTag<int16_t, 16> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::RebindToFloat<decltype(d32)> df;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const size_t n = hn::Lanes(d16);
  const size_t blocks = cols / kElems;
  Unpacked u;
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * kBytes;
    auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    float mins = 0.0f;
    for (size_t b = 0; b < blocks; ++b) {
      Unpack<F>(row + b * kBytes, &u);
      const int8_t* xq = x.q + b * kElems;
      const size_t xb = b * (kElems / 32);  // the block's first activation block
      for (size_t g = 0; g < kElems / 16; ++g) {
        auto isum0 = hn::Zero(d32), isum1 = hn::Zero(d32);
        for (size_t j = 16 * g; j < 16 * g + 16; j += n) {
          isum0 = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LoadU(d8, u.q + j)),
                                                hn::PromoteTo(d16, hn::LoadU(d8, xq + j)), isum0, isum1);
        }
        const auto dot = hn::ConvertTo(df, hn::Add(isum0, isum1));
        const auto scale = hn::Set(df, u.scale[g] * x.d[xb + g / 2]);
        if (g % 2 == 0) {
          acc0 = hn::MulAdd(dot, scale, acc0);
        } else {
          acc1 = hn::MulAdd(dot, scale, acc1);
        }
      }
      if constexpr (F == WeightFormat::kQ4_K) {
        for (size_t s = 0; s < kElems / 32; ++s) mins += u.min[s] * x.sx[xb + s];
      }
    }
    StoreOut(hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1))) - mins, y + r);
  }
}

// kFloat: w = scale * q - min per element in f32, FMA'd with x.
template <WeightFormat F, typename YT>
void FloatRows(const uint8_t* HWY_RESTRICT w, size_t cols, size_t r0, size_t r1, const float* HWY_RESTRICT x,
               YT* HWY_RESTRICT y) {
  constexpr size_t kElems = formats::BlockElems(F), kBytes = formats::BlockBytes(F);
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t n = hn::Lanes(df);
  const size_t blocks = cols / kElems;
  Unpacked u;
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * kBytes;
    auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    for (size_t b = 0; b < blocks; ++b) {
      Unpack<F>(row + b * kBytes, &u);
      const float* xb = x + b * kElems;
      for (size_t g = 0; g < kElems / 16; ++g) {
        const auto scale = hn::Set(df, u.scale[g]);
        const auto min = hn::Set(df, u.min[g / 2]);
        for (size_t j = 16 * g; j < 16 * g + 16; j += n) {
          const auto q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, u.q + j)));
          const auto wv = hn::MulSub(q, scale, min);
          if (g % 2 == 0) {
            acc0 = hn::MulAdd(wv, hn::LoadU(df, xb + j), acc0);
          } else {
            acc1 = hn::MulAdd(wv, hn::LoadU(df, xb + j), acc1);
          }
        }
      }
    }
    StoreOut(hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1))), y + r);
  }
}

template <typename YT>
void Int8Any(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations& x,
             YT* y) {
  switch (format) {
    case WeightFormat::kQ5_0: return Int8Rows<WeightFormat::kQ5_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_K: return Int8Rows<WeightFormat::kQ4_K>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ6_K: return Int8Rows<WeightFormat::kQ6_K>(w, cols, r0, r1, x, y);
    default: break;  // not one of these formats (gemv_quant.cc dispatches)
  }
}

template <typename YT>
void FloatAny(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const float* x, YT* y) {
  switch (format) {
    case WeightFormat::kQ5_0: return FloatRows<WeightFormat::kQ5_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_K: return FloatRows<WeightFormat::kQ4_K>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ6_K: return FloatRows<WeightFormat::kQ6_K>(w, cols, r0, r1, x, y);
    default: break;
  }
}

void KInt8F32(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations& x,
              float* y) {
  Int8Any(format, w, cols, r0, r1, x, y);
}
void KInt8Bf16(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations& x,
               bf16* y) {
  Int8Any(format, w, cols, r0, r1, x, y);
}
void KFloatF32(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const float* x,
               float* y) {
  FloatAny(format, w, cols, r0, r1, x, y);
}
void KFloatBf16(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const float* x,
                bf16* y) {
  FloatAny(format, w, cols, r0, r1, x, y);
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels::internal {

HWY_EXPORT(KInt8F32);
HWY_EXPORT(KInt8Bf16);
HWY_EXPORT(KFloatF32);
HWY_EXPORT(KFloatBf16);

void KQuantInt8RowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                       const Q8Activations& x, float* y) {
  HWY_DYNAMIC_DISPATCH(KInt8F32)(format, w, cols, r0, r1, x, y);
}
void KQuantInt8RowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                       const Q8Activations& x, bf16* y) {
  HWY_DYNAMIC_DISPATCH(KInt8Bf16)(format, w, cols, r0, r1, x, y);
}
void KQuantFloatRowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                        const float* x, float* y) {
  HWY_DYNAMIC_DISPATCH(KFloatF32)(format, w, cols, r0, r1, x, y);
}
void KQuantFloatRowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                        const float* x, bf16* y) {
  HWY_DYNAMIC_DISPATCH(KFloatBf16)(format, w, cols, r0, r1, x, y);
}

}  // namespace dk::kernels::internal
#endif  // HWY_ONCE
