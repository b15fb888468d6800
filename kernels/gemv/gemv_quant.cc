#include "kernels/gemv/gemv_quant.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/gemv/gemv_kquant.h"
#include "kernels/gemv/gemv_quant_vnni.h"
#include "kernels/gemv/gemv_rows.h"
#include "util/aligned_buffer.h"
#include "util/check.h"
#include "util/ggml_blocks.h"

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemv/gemv_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using internal::Q8Activations;

inline void StoreOut(float v, float* y) { *y = v; }
inline void StoreOut(float v, bf16* y) { *y = F32ToBf16(v); }

// A block's f16 scale field (any alignment) as f32: vcvtph2ps where the target has
// F16C, Highway's exact software conversion elsewhere.
HWY_INLINE float F16Field(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
}

// Vectors cover at most half a block (16 elements), so every target walks a block
// as [low half | high half], which is also how Q4's nibbles split it.
constexpr size_t kHalf = ggml::kBlockElems / 2;

// x (f32) -> per-block int8 q, scale d = max|x| / 127 and sum(q), with
// q = round-to-nearest-even(x * (1 / d)) (0 for an all-zero block).
void QuantizeX(const float* HWY_RESTRICT x, size_t blocks, int8_t* HWY_RESTRICT q,
               float* HWY_RESTRICT d, int32_t* HWY_RESTRICT sum) {
  const hn::CappedTag<float, kHalf> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t n = hn::Lanes(df);
  for (size_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * ggml::kBlockElems;
    auto amax = hn::Zero(df);
    for (size_t j = 0; j < ggml::kBlockElems; j += n) {
      amax = hn::Max(amax, hn::Abs(hn::LoadU(df, xb + j)));
    }
    const float scale = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
    const auto inv = hn::Set(df, scale != 0.0f ? 1.0f / scale : 0.0f);
    auto s = hn::Zero(di);
    for (size_t j = 0; j < ggml::kBlockElems; j += n) {
      const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + j), inv));
      s = hn::Add(s, qi);
      hn::StoreU(hn::DemoteTo(d8, qi), d8, q + b * ggml::kBlockElems + j);
    }
    d[b] = scale;
    sum[b] = hn::GetLane(hn::SumOfLanes(di, s));
  }
}

// Strategy kInt8 without VNNI: int8 weights and activations widened to i16, pairs
// multiplied and added into i32 (pmaddwd), so each block's dot product is exact.
template <WeightFormat F, typename YT>
void Int8Rows(const uint8_t* HWY_RESTRICT w, size_t cols, size_t r0, size_t r1,
              const Q8Activations& x, YT* HWY_RESTRICT y) {
  const hn::CappedTag<int16_t, kHalf> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::RebindToFloat<decltype(d32)> df;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const hn::Rebind<uint8_t, decltype(d16)> du8;
  const size_t n = hn::Lanes(d16);
  const size_t blocks = cols / ggml::kBlockElems;
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * formats::BlockBytes(F);
    auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    float min_acc = 0.0f;  // Q4_1: sum_b m_b * dx_b * sum(q_x)
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * formats::BlockBytes(F);
      const int8_t* xq = x.q + b * ggml::kBlockElems;
      auto isum0 = hn::Zero(d32), isum1 = hn::Zero(d32);
      float dw;
      for (size_t j = 0; j < kHalf; j += n) {
        decltype(hn::Zero(d16)) lo, hi;
        if constexpr (F == WeightFormat::kQ8_0) {
          const auto* q8 = reinterpret_cast<const ggml::BlockQ8_0*>(blk);
          lo = hn::PromoteTo(d16, hn::LoadU(d8, q8->qs + j));
          hi = hn::PromoteTo(d16, hn::LoadU(d8, q8->qs + kHalf + j));
        } else {
          const uint8_t* qs = F == WeightFormat::kQ4_0
                                  ? reinterpret_cast<const ggml::BlockQ4_0*>(blk)->qs
                                  : reinterpret_cast<const ggml::BlockQ4_1*>(blk)->qs;
          const auto raw = hn::BitCast(d16, hn::PromoteTo(hn::RebindToUnsigned<decltype(d16)>(),
                                                          hn::LoadU(du8, qs + j)));
          lo = hn::And(raw, hn::Set(d16, 0x0F));
          hi = hn::ShiftRight<4>(raw);
          if constexpr (F == WeightFormat::kQ4_0) {
            lo = hn::Sub(lo, hn::Set(d16, 8));
            hi = hn::Sub(hi, hn::Set(d16, 8));
          }
        }
        isum0 = hn::ReorderWidenMulAccumulate(d32, lo, hn::PromoteTo(d16, hn::LoadU(d8, xq + j)),
                                              isum0, isum1);
        isum0 = hn::ReorderWidenMulAccumulate(
            d32, hi, hn::PromoteTo(d16, hn::LoadU(d8, xq + kHalf + j)), isum0, isum1);
      }
      if constexpr (F == WeightFormat::kQ4_1) {
        const auto* q4 = reinterpret_cast<const ggml::BlockQ4_1*>(blk);
        dw = F16Field(q4->d);
        min_acc += F16Field(q4->m) * x.sx[b];
      } else {
        dw = F16Field(blk);  // d is the first field of Q8_0 and Q4_0
      }
      const auto dot = hn::ConvertTo(df, hn::Add(isum0, isum1));
      const auto scale = hn::Set(df, dw * x.d[b]);
      if (b % 2 == 0) {
        acc0 = hn::MulAdd(dot, scale, acc0);
      } else {
        acc1 = hn::MulAdd(dot, scale, acc1);
      }
    }
    StoreOut(hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1))) + min_acc, y + r);
  }
}

// Strategy kFloat: each block's weights dequantized to f32 in registers and FMA'd
// with f32 x; the low and high halves of a block go to separate accumulators.
template <WeightFormat F, typename YT>
void FloatRows(const uint8_t* HWY_RESTRICT w, size_t cols, size_t r0, size_t r1,
               const float* HWY_RESTRICT x, YT* HWY_RESTRICT y) {
  const hn::CappedTag<float, kHalf> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t n = hn::Lanes(df);
  const size_t blocks = cols / ggml::kBlockElems;
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * formats::BlockBytes(F);
    auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * formats::BlockBytes(F);
      const float* xb = x + b * ggml::kBlockElems;
      const auto d = hn::Set(df, F16Field(blk));  // d comes first in all three
      for (size_t j = 0; j < kHalf; j += n) {
        decltype(hn::Zero(df)) lo, hi;
        if constexpr (F == WeightFormat::kQ8_0) {
          const auto* q8 = reinterpret_cast<const ggml::BlockQ8_0*>(blk);
          lo = hn::Mul(d, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, q8->qs + j))));
          hi = hn::Mul(d, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, q8->qs + kHalf + j))));
        } else {
          const uint8_t* qs = F == WeightFormat::kQ4_0
                                  ? reinterpret_cast<const ggml::BlockQ4_0*>(blk)->qs
                                  : reinterpret_cast<const ggml::BlockQ4_1*>(blk)->qs;
          const auto raw = hn::BitCast(
              di, hn::PromoteTo(hn::RebindToUnsigned<decltype(di)>(), hn::LoadU(du8, qs + j)));
          const auto qlo = hn::And(raw, hn::Set(di, 0x0F));
          const auto qhi = hn::ShiftRight<4>(raw);
          if constexpr (F == WeightFormat::kQ4_0) {
            lo = hn::Mul(d, hn::ConvertTo(df, hn::Sub(qlo, hn::Set(di, 8))));
            hi = hn::Mul(d, hn::ConvertTo(df, hn::Sub(qhi, hn::Set(di, 8))));
          } else {
            const auto m = hn::Set(df, F16Field(reinterpret_cast<const ggml::BlockQ4_1*>(blk)->m));
            lo = hn::MulAdd(d, hn::ConvertTo(df, qlo), m);
            hi = hn::MulAdd(d, hn::ConvertTo(df, qhi), m);
          }
        }
        acc0 = hn::MulAdd(lo, hn::LoadU(df, xb + j), acc0);
        acc1 = hn::MulAdd(hi, hn::LoadU(df, xb + kHalf + j), acc1);
      }
    }
    StoreOut(hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1))), y + r);
  }
}

template <typename YT>
void Int8RowsAny(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                 const Q8Activations& x, YT* y) {
  switch (format) {
    case WeightFormat::kQ8_0:
      return Int8Rows<WeightFormat::kQ8_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_0:
      return Int8Rows<WeightFormat::kQ4_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_1:
      return Int8Rows<WeightFormat::kQ4_1>(w, cols, r0, r1, x, y);
    default: break;  // not a block format
  }
}

template <typename YT>
void FloatRowsAny(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                  const float* x, YT* y) {
  switch (format) {
    case WeightFormat::kQ8_0:
      return FloatRows<WeightFormat::kQ8_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_0:
      return FloatRows<WeightFormat::kQ4_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_1:
      return FloatRows<WeightFormat::kQ4_1>(w, cols, r0, r1, x, y);
    default: break;  // not a block format
  }
}

// This target's HWY_TARGET bit: which of the VNNI paths it may take.
int64_t QuantTarget() { return HWY_TARGET; }

void Int8RowsF32(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                 const Q8Activations& x, float* y) {
  Int8RowsAny(format, w, cols, r0, r1, x, y);
}
void Int8RowsBf16(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                  const Q8Activations& x, bf16* y) {
  Int8RowsAny(format, w, cols, r0, r1, x, y);
}
void FloatRowsF32(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                  const float* x, float* y) {
  FloatRowsAny(format, w, cols, r0, r1, x, y);
}
void FloatRowsBf16(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                   const float* x, bf16* y) {
  FloatRowsAny(format, w, cols, r0, r1, x, y);
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(QuantizeX);
HWY_EXPORT(QuantTarget);
HWY_EXPORT(Int8RowsF32);
HWY_EXPORT(Int8RowsBf16);
HWY_EXPORT(FloatRowsF32);
HWY_EXPORT(FloatRowsBf16);

namespace {

// The kInt8 inner loop: EVEX vpdpbusd on AVX-512 targets of AVX512-VNNI CPUs, VEX
// vpdpbusd on AVX2 / AVX-512 targets of AVX-VNNI CPUs, Highway's i16
// multiply-adds otherwise. As UseBf16Dot in gemv.cc, the target is asked through
// the dispatch table, so per-target tests stay per-target.
enum class Int8Path { kHighway, kAvx512Vnni, kAvxVnni };
Int8Path ChooseInt8Path(const GemvVariants& v) {
  if (!v.vnni) return Int8Path::kHighway;
  const int64_t target = HWY_DYNAMIC_DISPATCH(QuantTarget)();
  const bool avx512 = target == HWY_AVX3 || target == HWY_AVX3_DL;
  if (avx512 && internal::CpuHasAvx512Vnni()) return Int8Path::kAvx512Vnni;
  if ((avx512 || target == HWY_AVX2) && internal::CpuHasAvxVnni()) return Int8Path::kAvxVnni;
  return Int8Path::kHighway;
}

// x as f32: f32 x is used in place, bf16 x widened (exactly) into thread `thread`'s
// buffer kQuantXF32 of `scratch`.
const float* XAsF32(const float* x, size_t, KernelScratch&, int) { return x; }
const float* XAsF32(const bf16* x, size_t cols, KernelScratch& scratch, int thread) {
  float* out = scratch.Get<float>(thread, kQuantXF32, cols);
  for (size_t k = 0; k < cols; ++k) out[k] = Bf16ToF32(x[k]);
  return out;
}

// x quantized per block into thread `thread`'s buffers of `scratch` (kQuantQ, kQuantD,
// kQuantSum, kQuantSx).
internal::Q8Activations QuantizeActivations(const float* x, size_t cols, KernelScratch& scratch, int thread) {
  const size_t blocks = cols / ggml::kBlockElems;
  int8_t* q = scratch.Get<int8_t>(thread, kQuantQ, cols);
  float* d = scratch.Get<float>(thread, kQuantD, blocks);
  int32_t* sum = scratch.Get<int32_t>(thread, kQuantSum, blocks);
  float* sx = scratch.Get<float>(thread, kQuantSx, blocks);
  HWY_DYNAMIC_DISPATCH(QuantizeX)(x, blocks, q, d, sum);
  for (size_t b = 0; b < blocks; ++b) {
    sx[b] = d[b] * static_cast<float>(sum[b]);
  }
  return {q, d, sum, sx};
}

// The activations the K-quant rows of `path` read besides q, d and sx.
void CompleteKQuantActivations(WeightFormat format, Int8Path path, size_t cols, internal::Q8Activations* xq,
                               KernelScratch& scratch, int thread) {
  if (format == WeightFormat::kQ6_K && path == Int8Path::kAvx512Vnni) {
    xq->sum16 = internal::Sums16(xq->q, cols, scratch, thread);
  }
}

// Rows in units of 4, one stream per thread: rows_fn(r0, r1).
template <typename Fn>
void ForRowUnits(size_t rows, ThreadPool* pool, const Fn& rows_fn) {
  ParallelRanges(pool, (rows + 3) / 4, [&](size_t b0, size_t b1, int) {
    rows_fn(std::min(rows, 4 * b0), std::min(rows, 4 * b1));
  });
}

// Q5_0, Q4_K, Q6_K (gemv_kquant.h): AVX512-VNNI or the portable loops.
template <typename YT>
void RunKQuant(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows, size_t cols,
               const float* xf, YT* y, ThreadPool* pool, const GemvVariants& v, KernelScratch& scratch) {
  if (act == QuantActivations::kFloat) {
    ForRowUnits(rows, pool,
                [&](size_t r0, size_t r1) { internal::KQuantFloatRowsHwy(format, w, cols, r0, r1, xf, y); });
    return;
  }
  const int thread = CallerThread();
  internal::Q8Activations xq = QuantizeActivations(xf, cols, scratch, thread);
  const Int8Path path = ChooseInt8Path(v);
  CompleteKQuantActivations(format, path, cols, &xq, scratch, thread);
  ForRowUnits(rows, pool, [&](size_t r0, size_t r1) {
    if (path == Int8Path::kAvx512Vnni) return internal::KQuantRowsVnni(format, w, cols, r0, r1, xq, y);
    internal::KQuantInt8RowsHwy(format, w, cols, r0, r1, xq, y);
  });
}

template <typename XT, typename YT>
void Run(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
         size_t cols, const XT* x, YT* y, ThreadPool* pool, const GemvVariants& v, KernelScratch* given) {
  DK_CHECK(formats::IsBlockFormat(format));
  DK_CHECK(cols % formats::BlockElems(format) == 0);
  if (rows == 0) return;
  const CallScratch scratch(given, pool != nullptr ? pool->num_threads() : 1);
  const int thread = CallerThread();
  const float* xf = XAsF32(x, cols, *scratch, thread);
  if (internal::IsKQuantKernelFormat(format)) return RunKQuant(format, act, w, rows, cols, xf, y, pool, v, *scratch);
  auto run = [&](const auto& rows_fn) { ForRowUnits(rows, pool, rows_fn); };
  if (act == QuantActivations::kFloat) {
    run([&](size_t r0, size_t r1) {
      if constexpr (std::is_same_v<YT, float>) {
        HWY_DYNAMIC_DISPATCH(FloatRowsF32)(format, w, cols, r0, r1, xf, y);
      } else {
        HWY_DYNAMIC_DISPATCH(FloatRowsBf16)(format, w, cols, r0, r1, xf, y);
      }
    });
    return;
  }
  internal::Q8Activations xq = QuantizeActivations(xf, cols, *scratch, thread);
  switch (ChooseInt8Path(v)) {
    case Int8Path::kAvx512Vnni:
      // Re-arranged once here for every task's Q4 rows.
      if (format != WeightFormat::kQ8_0) xq.quad = internal::QuadActivations(xq.q, cols, *scratch, thread);
      run([&](size_t r0, size_t r1) { internal::QuantRowsVnni(format, w, cols, r0, r1, xq, y); });
      return;
    case Int8Path::kAvxVnni:
      run([&](size_t r0, size_t r1) {
        internal::QuantRowsAvxVnni(format, w, cols, r0, r1, xq, y);
      });
      return;
    case Int8Path::kHighway:
      break;
  }
  run([&](size_t r0, size_t r1) {
    if constexpr (std::is_same_v<YT, float>) {
      HWY_DYNAMIC_DISPATCH(Int8RowsF32)(format, w, cols, r0, r1, xq, y);
    } else {
      HWY_DYNAMIC_DISPATCH(Int8RowsBf16)(format, w, cols, r0, r1, xq, y);
    }
  });
}

}  // namespace

namespace internal {

QuantX PrepareQuantX(WeightFormat format, const bf16* x, size_t cols, const GemvVariants& v,
                     KernelScratch& scratch, int thread) {
  DK_CHECK(cols % formats::BlockElems(format) == 0);
  // The activations themselves sit in the scratch too: the QuantX points at them.
  Q8Activations& xq = *new (scratch.Get<Q8Activations>(thread, kQuantActs, 1))
      Q8Activations(QuantizeActivations(XAsF32(x, cols, scratch, thread), cols, scratch, thread));
  QuantX p;
  p.format = format;
  p.cols = cols;
  p.path = static_cast<int>(ChooseInt8Path(v));
  p.avx512_vnni = p.path == static_cast<int>(Int8Path::kAvx512Vnni);
  const bool q4 = format == WeightFormat::kQ4_0 || format == WeightFormat::kQ4_1;
  if (p.path == static_cast<int>(Int8Path::kAvx512Vnni) && q4) xq.quad = QuadActivations(xq.q, cols, scratch, thread);
  CompleteKQuantActivations(format, static_cast<Int8Path>(p.path), cols, &xq, scratch, thread);
  p.act = &xq;
  return p;
}

void QuantRows(const uint8_t* w, const QuantX& x, size_t r0, size_t r1, float* y) {
  const Q8Activations& xq = *static_cast<const Q8Activations*>(x.act);
  if (IsKQuantKernelFormat(x.format)) {
    if (static_cast<Int8Path>(x.path) == Int8Path::kAvx512Vnni) {
      return KQuantRowsVnni(x.format, w, x.cols, r0, r1, xq, y);
    }
    return KQuantInt8RowsHwy(x.format, w, x.cols, r0, r1, xq, y);
  }
  switch (static_cast<Int8Path>(x.path)) {
    case Int8Path::kAvx512Vnni:
      return QuantRowsVnni(x.format, w, x.cols, r0, r1, xq, y);
    case Int8Path::kAvxVnni:
      return QuantRowsAvxVnni(x.format, w, x.cols, r0, r1, xq, y);
    case Int8Path::kHighway:
      break;
  }
  HWY_DYNAMIC_DISPATCH(Int8RowsF32)(x.format, w, x.cols, r0, r1, xq, y);
}

}  // namespace internal

void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const float* x, float* y, ThreadPool* pool,
               const GemvVariants& variants, KernelScratch* scratch) {
  Run(format, act, w, rows, cols, x, y, pool, variants, scratch);
}
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const bf16* x, float* y, ThreadPool* pool,
               const GemvVariants& variants, KernelScratch* scratch) {
  Run(format, act, w, rows, cols, x, y, pool, variants, scratch);
}
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const float* x, bf16* y, ThreadPool* pool,
               const GemvVariants& variants, KernelScratch* scratch) {
  Run(format, act, w, rows, cols, x, y, pool, variants, scratch);
}
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const bf16* x, bf16* y, ThreadPool* pool,
               const GemvVariants& variants, KernelScratch* scratch) {
  Run(format, act, w, rows, cols, x, y, pool, variants, scratch);
}

const char* QuantGemvTargetName(QuantActivations act, const GemvVariants& variants) {
  const int64_t target = HWY_DYNAMIC_DISPATCH(QuantTarget)();
  const Int8Path path = act == QuantActivations::kInt8 ? ChooseInt8Path(variants) : Int8Path::kHighway;
  if (path == Int8Path::kHighway) return hwy::TargetName(target);  // a string literal
  // Every VNNI name there can be, made once and constant afterwards, so that any thread
  // may call this and keep the pointer (the target is looked up on each call: tests
  // switch it with hwy::SetSupportedTargetsForTest).
  static const auto* const names = [] {
    auto* m = new std::map<std::pair<int64_t, Int8Path>, std::string>();
    for (int64_t rest = HWY_TARGETS; rest != 0; rest &= rest - 1) {
      const int64_t t = rest & -rest;
      (*m)[{t, Int8Path::kAvx512Vnni}] = std::string(hwy::TargetName(t)) + "+VNNI";
      (*m)[{t, Int8Path::kAvxVnni}] = std::string(hwy::TargetName(t)) + "+AVXVNNI";
    }
    return m;
  }();
  const auto it = names->find({target, path});
  return it != names->end() ? it->second.c_str() : hwy::TargetName(target);
}

bool QuantGemvUsesVnni(const GemvVariants& variants) { return ChooseInt8Path(variants) != Int8Path::kHighway; }

}  // namespace dk::kernels
#endif  // HWY_ONCE
