// Attention building blocks, per Highway target, shared by DecodeAttention
// (attention.cc) and CausalAttention (causal_attention.cc). Every helper works on the
// query heads of one "unit" (up to kMaxBlock heads of one query row, all reading one
// kv head), so a row's float operations do not depend on which entry point or
// grouping runs them: CausalAttention's bit-identity with DecodeAttention rests on
// both composing exactly these helpers.

#ifndef DK_KERNELS_ATTENTION_ATTENTION_INL_ONCE_
#define DK_KERNELS_ATTENTION_ATTENTION_INL_ONCE_
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/attention/attention.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels::attention_internal {

// One call's inputs, shared by all targets.
struct Job {
  const bf16* q;  // [n_heads][head_dim]
  const bf16* k;  // [n_kv_heads][max_ctx][head_dim]
  const bf16* v;  // [n_kv_heads][max_ctx][head_dim]
  size_t head_dim;
  size_t max_ctx;
  size_t n;  // positions attended: pos + 1
  float scale;
};

// Refuses what DecodeAttention documents as invalid; `who` prefixes the message.
absl::Status Validate(const char* who, const AttentionDims& d, const void* q,
                      const void* k, const void* v, size_t pos, const void* out,
                      float scale);

// body(task, thread) for every task in [0, tasks), on `pool` or (nullptr) the caller.
template <typename F>
void RunTasks(ThreadPool* pool, int64_t tasks, const F& body) {
  if (pool) {
    pool->Run(tasks, body);
  } else {
    for (int64_t t = 0; t < tasks; ++t) body(t, 0);
  }
}

// Query heads processed together against one kv head: each K/V row is loaded once
// per block, and a block's accumulators fit the 32 AVX-512 registers.
inline constexpr size_t kMaxBlock = 4;
// Largest f32 vector of any x86 target; scratch rows are padded to it.
inline constexpr size_t kMaxLanes = 16;

inline size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// Per-thread scratch layout, in floats from a 64-byte aligned base; every row
// starts 64-byte aligned.
struct ScratchLayout {
  size_t score_stride;  // >= positions, multiple of kMaxLanes
  size_t half_stride;   // >= head_dim / 2 + 1, multiple of kMaxLanes
  size_t scores, q_even, q_odd, out_even, out_odd, out_tail, sums, total;
  // `positions`: the most positions one query attends.
  ScratchLayout(size_t positions, size_t head_dim)
      : score_stride(RoundUp(positions, kMaxLanes)),
        half_stride(RoundUp(head_dim / 2 + 1, kMaxLanes)) {
    scores = 0;
    q_even = scores + kMaxBlock * score_stride;
    q_odd = q_even + kMaxBlock * half_stride;
    out_even = q_odd + kMaxBlock * half_stride;
    out_odd = out_even + kMaxBlock * half_stride;
    out_tail = out_odd + kMaxBlock * half_stride;
    sums = out_tail + kMaxBlock * 2 * kMaxLanes;  // tail < one pair vector
    total = sums + kMaxLanes;
  }
};

}  // namespace dk::kernels::attention_internal
#endif  // DK_KERNELS_ATTENTION_ATTENTION_INL_ONCE_

// Per-target include guard (Highway's -inl.h convention).
#if defined(DK_KERNELS_ATTENTION_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DK_KERNELS_ATTENTION_ATTENTION_INL_H_
#undef DK_KERNELS_ATTENTION_ATTENTION_INL_H_
#else
#define DK_KERNELS_ATTENTION_ATTENTION_INL_H_
#endif

#include <limits>

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// As in gemv, bf16 pairs are widened without shuffles: a u32 lane holding
// (x[2j], x[2j+1]) yields x[2j] as (u32 << 16) and x[2j+1] as (u32 & 0xffff0000).
// q and the output accumulators are therefore kept as even / odd halves. A "pair
// vector" covers 2 * Lanes(df) bf16; head dims beyond the last whole pair vector
// (only for head_dim not a multiple of 8/16/32) take a scalar path.

// Register blocking: 16-register targets keep fewer accumulators live.
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kScoreHeads = 4;  // query heads per K pass
constexpr size_t kValueChunk = 2;  // pair vectors per V pass
#else
constexpr size_t kScoreHeads = 2;
constexpr size_t kValueChunk = 1;
#endif

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;

#if HWY_TARGET != HWY_SCALAR
// Stores the sums of each 128-bit block's lanes after folding the halves of `v`.
template <class D>
HWY_INLINE void StoreFoldedBlocks(D d, hn::Vec<D> v, float* out) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    StoreFoldedBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}
#endif

// out[i] = (sum of the lanes of v[i]) * scale for i < 4: one transposing reduction
// instead of four SumOfLanes.
HWY_INLINE void Sum4(const VF* v, float scale, float* out) {
#if HWY_TARGET == HWY_SCALAR
  for (int i = 0; i < 4; ++i) out[i] = hn::GetLane(v[i]) * scale;
#else
  const DF df;
  const hn::Repartition<uint64_t, DF> d64;
  const VF ab = hn::Add(hn::InterleaveLower(df, v[0], v[1]),
                        hn::InterleaveUpper(df, v[0], v[1]));  // a02 b02 a13 b13
  const VF cd = hn::Add(hn::InterleaveLower(df, v[2], v[3]),
                        hn::InterleaveUpper(df, v[2], v[3]));  // c02 d02 c13 d13
  const auto ab64 = hn::BitCast(d64, ab), cd64 = hn::BitCast(d64, cd);
  const VF abcd = hn::Add(hn::BitCast(df, hn::InterleaveLower(d64, ab64, cd64)),
                          hn::BitCast(df, hn::InterleaveUpper(d64, ab64, cd64)));
  StoreFoldedBlocks(df, hn::Mul(abcd, hn::Set(df, scale)), out);
#endif
}

// scores[h * stride + t] = (q_h . k_t over the whole pair vectors [0, pairs)) * scale
// for kH query heads and positions t in [0, n) of one kv head's K rows. Four
// positions at a time, so one transposing reduction serves four dot products.
template <size_t kH>
inline void ScorePairs(const bf16* HWY_RESTRICT k, size_t head_dim, size_t n, size_t pairs,
                const float* HWY_RESTRICT qe, const float* HWY_RESTRICT qo,
                size_t half_stride, float scale, float* HWY_RESTRICT scores,
                size_t stride) {
  const DF df;
  const DU du;
  const size_t nf = hn::Lanes(df);
  const auto hi_mask = hn::Set(du, 0xffff0000u);
  const auto row = [&](size_t t, size_t j) {
    return hn::LoadU(du, reinterpret_cast<const uint32_t*>(k + t * head_dim + j * 2 * nf));
  };
  size_t t = 0;
  for (; t + 4 <= n; t += 4) {
    VF acc[kH][4];
    for (size_t h = 0; h < kH; ++h) {
      for (size_t p = 0; p < 4; ++p) acc[h][p] = hn::Zero(df);
    }
    for (size_t j = 0; j < pairs; ++j) {
      VF even[4], odd[4];
      for (size_t p = 0; p < 4; ++p) {
        const auto pr = row(t + p, j);
        even[p] = hn::BitCast(df, hn::ShiftLeft<16>(pr));
        odd[p] = hn::BitCast(df, hn::And(pr, hi_mask));
      }
      for (size_t h = 0; h < kH; ++h) {
        const VF qev = hn::Load(df, qe + h * half_stride + j * nf);
        const VF qov = hn::Load(df, qo + h * half_stride + j * nf);
        for (size_t p = 0; p < 4; ++p) {
          acc[h][p] = hn::MulAdd(even[p], qev, acc[h][p]);
          acc[h][p] = hn::MulAdd(odd[p], qov, acc[h][p]);
        }
      }
    }
    for (size_t h = 0; h < kH; ++h) Sum4(acc[h], scale, scores + h * stride + t);
  }
  for (; t < n; ++t) {
    VF acc[kH];
    for (size_t h = 0; h < kH; ++h) acc[h] = hn::Zero(df);
    for (size_t j = 0; j < pairs; ++j) {
      const auto pr = row(t, j);
      const VF even = hn::BitCast(df, hn::ShiftLeft<16>(pr));
      const VF odd = hn::BitCast(df, hn::And(pr, hi_mask));
      for (size_t h = 0; h < kH; ++h) {
        acc[h] = hn::MulAdd(even, hn::Load(df, qe + h * half_stride + j * nf), acc[h]);
        acc[h] = hn::MulAdd(odd, hn::Load(df, qo + h * half_stride + j * nf), acc[h]);
      }
    }
    for (size_t h = 0; h < kH; ++h) {
      scores[h * stride + t] = hn::GetLane(hn::SumOfLanes(df, acc[h])) * scale;
    }
  }
}

// acc_even/odd[h] = sum_t p[h][t] * V[t] over the pair vectors [j0, j0 + kC), in t
// order; kAccumulate: the sum starts from oe/oo (a later slice of positions) instead
// of zero, which continues the same sequence of additions exactly.
template <size_t kH, size_t kC, bool kAccumulate>
HWY_INLINE void ValueChunk(const bf16* HWY_RESTRICT v, size_t head_dim, size_t n,
                           size_t j0, const float* HWY_RESTRICT probs, size_t stride,
                           float* HWY_RESTRICT oe, float* HWY_RESTRICT oo,
                           size_t half_stride) {
  const DF df;
  const DU du;
  const size_t nf = hn::Lanes(df);
  const auto hi_mask = hn::Set(du, 0xffff0000u);
  VF acc[kH][kC][2];
  for (size_t h = 0; h < kH; ++h) {
    for (size_t c = 0; c < kC; ++c) {
      if constexpr (kAccumulate) {
        acc[h][c][0] = hn::Load(df, oe + h * half_stride + (j0 + c) * nf);
        acc[h][c][1] = hn::Load(df, oo + h * half_stride + (j0 + c) * nf);
      } else {
        acc[h][c][0] = acc[h][c][1] = hn::Zero(df);
      }
    }
  }
  const bf16* row = v + j0 * 2 * nf;
  for (size_t t = 0; t < n; ++t, row += head_dim) {
    VF even[kC], odd[kC];
    for (size_t c = 0; c < kC; ++c) {
      const auto pr = hn::LoadU(du, reinterpret_cast<const uint32_t*>(row + c * 2 * nf));
      even[c] = hn::BitCast(df, hn::ShiftLeft<16>(pr));
      odd[c] = hn::BitCast(df, hn::And(pr, hi_mask));
    }
    for (size_t h = 0; h < kH; ++h) {
      const VF p = hn::Set(df, probs[h * stride + t]);
      for (size_t c = 0; c < kC; ++c) {
        acc[h][c][0] = hn::MulAdd(p, even[c], acc[h][c][0]);
        acc[h][c][1] = hn::MulAdd(p, odd[c], acc[h][c][1]);
      }
    }
  }
  for (size_t h = 0; h < kH; ++h) {
    for (size_t c = 0; c < kC; ++c) {
      hn::Store(acc[h][c][0], df, oe + h * half_stride + (j0 + c) * nf);
      hn::Store(acc[h][c][1], df, oo + h * half_stride + (j0 + c) * nf);
    }
  }
}

// In place: s[0, n) -> exp(s - max); s[n, padded) -> 0. Returns the sum.
inline float SoftmaxNumerators(float* HWY_RESTRICT s, size_t n, size_t padded) {
  const DF df;
  const size_t nf = hn::Lanes(df);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t t = n; t < padded; ++t) s[t] = neg_inf;  // exp(-inf) = 0 below
  auto mx = hn::Set(df, neg_inf);
  for (size_t t = 0; t < padded; t += nf) mx = hn::Max(mx, hn::Load(df, s + t));
  mx = hn::MaxOfLanes(df, mx);
  auto sum = hn::Zero(df);
  for (size_t t = 0; t < padded; t += nf) {
    const VF p = hn::Exp(df, hn::Sub(hn::Load(df, s + t), mx));
    hn::Store(p, df, s + t);
    sum = hn::Add(sum, p);
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

// One unit's scratch: kH heads' scores, split query and output accumulators.
struct UnitScratch {
  float* scores;  // [kH][score_stride]
  float* qe;      // [kH][half_stride]
  float* qo;
  float* oe;
  float* oo;
  float* ot;  // [kH][2 * kMaxLanes]
  size_t score_stride, half_stride;
  float* sums;  // [kH]
  UnitScratch(const attention_internal::ScratchLayout& l, float* base)
      : scores(base + l.scores), qe(base + l.q_even), qo(base + l.q_odd),
        oe(base + l.out_even), oo(base + l.out_odd), ot(base + l.out_tail),
        sums(base + l.sums),
        score_stride(l.score_stride), half_stride(l.half_stride) {}
};

// Splits of head_dim: whole pair vectors, then a scalar tail (< one pair vector).
struct HeadSplit {
  size_t hd, pairs, simd_dims, tail;
  explicit HeadSplit(size_t head_dim) : hd(head_dim) {
    const size_t nf = hn::Lanes(DF());
    pairs = hd / (2 * nf);
    simd_dims = pairs * 2 * nf;
    tail = hd - simd_dims;
  }
  // With a scalar tail the SIMD part is stored unscaled, the tail added, and the sum
  // scaled, so every score is (full dot) * scale as in PyTorch.
  float SimdScale(float scale) const { return tail ? 1.0f : scale; }
};

// q [kH][hd] -> the unit's even / odd halves of the SIMD dims.
inline void SplitQuery(size_t kh, const bf16* HWY_RESTRICT q, const HeadSplit& s,
                       const UnitScratch& u) {
  for (size_t h = 0; h < kh; ++h) {
    for (size_t j = 0; j < s.simd_dims / 2; ++j) {
      u.qe[h * u.half_stride + j] = Bf16ToF32(q[h * s.hd + 2 * j]);
      u.qo[h * u.half_stride + j] = Bf16ToF32(q[h * s.hd + 2 * j + 1]);
    }
  }
}

// SIMD part of the scores of positions [0, n) of `k` into scores[h][0, n). Slices
// of one row's positions give the same floats as one call if every slice but the
// last has a length that is a multiple of 4 (ScorePairs' groups).
template <size_t kH>
void ScoreHeads(const bf16* HWY_RESTRICT k, size_t n, const HeadSplit& s, float scale,
                const UnitScratch& u, float* HWY_RESTRICT scores) {
  constexpr size_t kFirst = kH < kScoreHeads ? kH : kScoreHeads;
  const float simd_scale = s.SimdScale(scale);
  ScorePairs<kFirst>(k, s.hd, n, s.pairs, u.qe, u.qo, u.half_stride, simd_scale, scores,
                     u.score_stride);
  if constexpr (kH > kFirst) {
    ScorePairs<kH - kFirst>(k, s.hd, n, s.pairs, u.qe + kFirst * u.half_stride,
                            u.qo + kFirst * u.half_stride, u.half_stride, simd_scale,
                            scores + kFirst * u.score_stride, u.score_stride);
  }
}

// Adds the scalar tail dims to the scores of positions [0, n) and scales them.
inline void ScoreTail(size_t kh, const bf16* HWY_RESTRICT q, const bf16* HWY_RESTRICT k,
                      size_t n, const HeadSplit& s, float scale, const UnitScratch& u) {
  for (size_t h = 0; h < kh; ++h) {
    float* sc = u.scores + h * u.score_stride;
    const bf16* qh = q + h * s.hd + s.simd_dims;
    for (size_t t = 0; t < n; ++t) {
      const bf16* kt = k + t * s.hd + s.simd_dims;
      float dot = 0.0f;
      for (size_t d = 0; d < s.tail; ++d) dot += Bf16ToF32(qh[d]) * Bf16ToF32(kt[d]);
      sc[t] = (sc[t] + dot) * scale;
    }
  }
}

// Scores of positions [0, n) -> softmax numerators; sums[h] = their sum.
inline void Softmax(size_t kh, size_t n, const UnitScratch& u, float* sums) {
  const size_t padded = attention_internal::RoundUp(n, hn::Lanes(DF()));
  for (size_t h = 0; h < kh; ++h) {
    sums[h] = SoftmaxNumerators(u.scores + h * u.score_stride, n, padded);
  }
}

// Output accumulators (+)= sum over positions [0, n) of `v` of probs[h][t] * V[t]
// (SIMD dims). kAccumulate continues a sum over earlier slices of the row.
template <size_t kH, bool kAccumulate>
void ValueHeads(const bf16* HWY_RESTRICT v, size_t n, const HeadSplit& s,
                const float* HWY_RESTRICT probs, const UnitScratch& u) {
  size_t j = 0;
  for (; j + kValueChunk <= s.pairs; j += kValueChunk) {
    ValueChunk<kH, kValueChunk, kAccumulate>(v, s.hd, n, j, probs, u.score_stride, u.oe,
                                             u.oo, u.half_stride);
  }
  for (; j < s.pairs; ++j) {
    ValueChunk<kH, 1, kAccumulate>(v, s.hd, n, j, probs, u.score_stride, u.oe, u.oo,
                                   u.half_stride);
  }
}

// The scalar tail dims of the weighted V sum over positions [0, n).
inline void ValueTail(size_t kh, const bf16* HWY_RESTRICT v, size_t n,
                      const HeadSplit& s, const UnitScratch& u) {
  for (size_t h = 0; h < kh; ++h) {
    float* acc = u.ot + h * 2 * attention_internal::kMaxLanes;
    for (size_t d = 0; d < s.tail; ++d) acc[d] = 0.0f;
    const float* p = u.scores + h * u.score_stride;
    for (size_t t = 0; t < n; ++t) {
      const bf16* vt = v + t * s.hd + s.simd_dims;
      for (size_t d = 0; d < s.tail; ++d) acc[d] += p[t] * Bf16ToF32(vt[d]);
    }
  }
}

inline void StoreOut(float v, float* y) { *y = v; }
inline void StoreOut(float v, bf16* y) { *y = F32ToBf16(v); }

// out[h][hd] = accumulators / sums[h] for the unit's kh heads.
template <typename OutT>
void StoreHeads(size_t kh, const HeadSplit& s, const UnitScratch& u,
                const float* sums, OutT* HWY_RESTRICT out) {
  for (size_t h = 0; h < kh; ++h) {
    OutT* o = out + h * s.hd;
    const float sum = sums[h];
    for (size_t i = 0; i < s.simd_dims / 2; ++i) {
      StoreOut(u.oe[h * u.half_stride + i] / sum, o + 2 * i);
      StoreOut(u.oo[h * u.half_stride + i] / sum, o + 2 * i + 1);
    }
    const float* acc = u.ot + h * 2 * attention_internal::kMaxLanes;
    for (size_t d = 0; d < s.tail; ++d) StoreOut(acc[d] / sum, o + s.simd_dims + d);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
