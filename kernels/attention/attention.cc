#include "kernels/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "util/aligned_buffer.h"
#include "util/status.h"

#ifndef DK_KERNELS_ATTENTION_ATTENTION_CC_ONCE_
#define DK_KERNELS_ATTENTION_ATTENTION_CC_ONCE_
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

// Query heads processed together against one kv head: each K/V row is loaded once
// per block, and a block's accumulators fit the 32 AVX-512 registers.
inline constexpr size_t kMaxBlock = 4;
// Largest f32 vector of any x86 target; scratch rows are padded to it.
inline constexpr size_t kMaxLanes = 16;

inline size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// Per-thread scratch layout, in floats from a 64-byte aligned base; every row
// starts 64-byte aligned.
struct ScratchLayout {
  size_t score_stride;  // >= max_ctx, multiple of kMaxLanes
  size_t half_stride;   // >= head_dim / 2 + 1, multiple of kMaxLanes
  size_t scores, q_even, q_odd, out_even, out_odd, out_tail, total;
  ScratchLayout(size_t max_ctx, size_t head_dim)
      : score_stride(RoundUp(max_ctx, kMaxLanes)),
        half_stride(RoundUp(head_dim / 2 + 1, kMaxLanes)) {
    scores = 0;
    q_even = scores + kMaxBlock * score_stride;
    q_odd = q_even + kMaxBlock * half_stride;
    out_even = q_odd + kMaxBlock * half_stride;
    out_odd = out_even + kMaxBlock * half_stride;
    out_tail = out_odd + kMaxBlock * half_stride;
    total = out_tail + kMaxBlock * 2 * kMaxLanes;  // tail < one pair vector
  }
};

}  // namespace dk::kernels::attention_internal
#endif  // DK_KERNELS_ATTENTION_ATTENTION_CC_ONCE_

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using attention_internal::Job;
using attention_internal::ScratchLayout;

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
void ScorePairs(const bf16* HWY_RESTRICT k, size_t head_dim, size_t n, size_t pairs,
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

// acc_even/odd[h] += sum_t p[h][t] * V[t] over the pair vectors [j0, j0 + kC).
template <size_t kH, size_t kC>
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
    for (size_t c = 0; c < kC; ++c) acc[h][c][0] = acc[h][c][1] = hn::Zero(df);
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
float SoftmaxNumerators(float* HWY_RESTRICT s, size_t n, size_t padded) {
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

inline void StoreOut(float v, float* y) { *y = v; }
inline void StoreOut(float v, bf16* y) { *y = F32ToBf16(v); }

// Attention of the kH query heads [h0, h0 + kH), all reading kv head `g`.
template <size_t kH, typename OutT>
void HeadBlock(const Job& job, size_t g, size_t h0, float* HWY_RESTRICT scratch,
               OutT* HWY_RESTRICT out) {
  const DF df;
  const size_t nf = hn::Lanes(df);
  const size_t hd = job.head_dim, n = job.n;
  const ScratchLayout L(job.max_ctx, hd);
  const size_t pairs = hd / (2 * nf);   // whole pair vectors per row
  const size_t simd_dims = pairs * 2 * nf;
  const size_t tail = hd - simd_dims;  // < 2 * nf
  float* scores = scratch + L.scores;
  float* qe = scratch + L.q_even;
  float* qo = scratch + L.q_odd;
  float* oe = scratch + L.out_even;
  float* oo = scratch + L.out_odd;
  float* ot = scratch + L.out_tail;
  const bf16* k = job.k + g * job.max_ctx * hd;
  const bf16* v = job.v + g * job.max_ctx * hd;
  const bf16* q = job.q + h0 * hd;

  for (size_t h = 0; h < kH; ++h) {
    for (size_t j = 0; j < simd_dims / 2; ++j) {
      qe[h * L.half_stride + j] = Bf16ToF32(q[h * hd + 2 * j]);
      qo[h * L.half_stride + j] = Bf16ToF32(q[h * hd + 2 * j + 1]);
    }
  }

  // Scores. With a scalar tail the SIMD part is stored unscaled, the tail added,
  // and the sum scaled, so every score is (full dot) * scale as in PyTorch.
  const float simd_scale = tail ? 1.0f : job.scale;
  constexpr size_t kFirst = kH < kScoreHeads ? kH : kScoreHeads;
  ScorePairs<kFirst>(k, hd, n, pairs, qe, qo, L.half_stride, simd_scale, scores,
                     L.score_stride);
  if constexpr (kH > kFirst) {
    ScorePairs<kH - kFirst>(k, hd, n, pairs, qe + kFirst * L.half_stride,
                            qo + kFirst * L.half_stride, L.half_stride, simd_scale,
                            scores + kFirst * L.score_stride, L.score_stride);
  }
  if (tail) {
    for (size_t h = 0; h < kH; ++h) {
      float* s = scores + h * L.score_stride;
      const bf16* qh = q + h * hd + simd_dims;
      for (size_t t = 0; t < n; ++t) {
        const bf16* kt = k + t * hd + simd_dims;
        float dot = 0.0f;
        for (size_t d = 0; d < tail; ++d) dot += Bf16ToF32(qh[d]) * Bf16ToF32(kt[d]);
        s[t] = (s[t] + dot) * job.scale;
      }
    }
  }

  float sums[kH];
  const size_t padded = attention_internal::RoundUp(n, nf);
  for (size_t h = 0; h < kH; ++h) {
    sums[h] = SoftmaxNumerators(scores + h * L.score_stride, n, padded);
  }

  // Weighted sum of V rows.
  size_t j = 0;
  for (; j + kValueChunk <= pairs; j += kValueChunk) {
    ValueChunk<kH, kValueChunk>(v, hd, n, j, scores, L.score_stride, oe, oo,
                                L.half_stride);
  }
  for (; j < pairs; ++j) {
    ValueChunk<kH, 1>(v, hd, n, j, scores, L.score_stride, oe, oo, L.half_stride);
  }
  if (tail) {
    for (size_t h = 0; h < kH; ++h) {
      float* acc = ot + h * 2 * attention_internal::kMaxLanes;
      for (size_t d = 0; d < tail; ++d) acc[d] = 0.0f;
      const float* p = scores + h * L.score_stride;
      for (size_t t = 0; t < n; ++t) {
        const bf16* vt = v + t * hd + simd_dims;
        for (size_t d = 0; d < tail; ++d) acc[d] += p[t] * Bf16ToF32(vt[d]);
      }
    }
  }

  for (size_t h = 0; h < kH; ++h) {
    OutT* o = out + (h0 + h) * hd;
    const float sum = sums[h];
    for (size_t i = 0; i < simd_dims / 2; ++i) {
      StoreOut(oe[h * L.half_stride + i] / sum, o + 2 * i);
      StoreOut(oo[h * L.half_stride + i] / sum, o + 2 * i + 1);
    }
    const float* acc = ot + h * 2 * attention_internal::kMaxLanes;
    for (size_t d = 0; d < tail; ++d) StoreOut(acc[d] / sum, o + simd_dims + d);
  }
}

template <typename OutT>
void Heads(const Job& job, size_t g, size_t h0, size_t count, float* scratch,
           OutT* out) {
  static_assert(attention_internal::kMaxBlock == 4, "update the switch");
  switch (count) {
    case 1: return HeadBlock<1>(job, g, h0, scratch, out);
    case 2: return HeadBlock<2>(job, g, h0, scratch, out);
    case 3: return HeadBlock<3>(job, g, h0, scratch, out);
    case 4: return HeadBlock<4>(job, g, h0, scratch, out);
  }
}

void HeadsF32(const Job& job, size_t g, size_t h0, size_t count, float* scratch,
              float* out) {
  Heads(job, g, h0, count, scratch, out);
}
void HeadsBf16(const Job& job, size_t g, size_t h0, size_t count, float* scratch,
               bf16* out) {
  Heads(job, g, h0, count, scratch, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(HeadsF32);
HWY_EXPORT(HeadsBf16);

namespace {

using attention_internal::Job;
using attention_internal::kMaxBlock;
using attention_internal::ScratchLayout;

absl::Status Validate(const AttentionDims& d, const void* q, const void* k,
                      const void* v, size_t pos, const void* out, float scale) {
  if (d.n_heads == 0 || d.n_kv_heads == 0 || d.head_dim == 0 || d.max_ctx == 0) {
    return absl::InvalidArgumentError("DecodeAttention: a dimension is zero");
  }
  if (d.n_heads % d.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        "DecodeAttention: n_heads is not a multiple of n_kv_heads");
  }
  if (pos >= d.max_ctx) {
    return absl::InvalidArgumentError("DecodeAttention: pos >= max_ctx");
  }
  if (!q || !k || !v || !out) {
    return absl::InvalidArgumentError("DecodeAttention: null pointer");
  }
  if (!std::isfinite(scale)) {
    return absl::InvalidArgumentError("DecodeAttention: scale is not finite");
  }
  return absl::OkStatus();
}

// The calling thread's scratch (grown, never shrunk).
float* ThreadScratch(size_t floats) {
  thread_local AlignedBuffer<float> scratch;
  if (scratch.size() < floats) scratch = AlignedBuffer<float>(floats);
  return scratch.data();
}

template <typename OutT>
absl::Status Attend(const AttentionDims& dims, const bf16* q, const bf16* k,
                    const bf16* v, size_t pos, OutT* out, ThreadPool* pool,
                    std::optional<float> scale_opt) {
  const float scale = scale_opt.has_value()
                          ? *scale_opt
                          : 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  DK_RETURN_IF_ERROR(Validate(dims, q, k, v, pos, out, scale));
  const Job job{q, k, v, dims.head_dim, dims.max_ctx, pos + 1, scale};
  const size_t group = dims.n_heads / dims.n_kv_heads;
  const size_t threads = pool ? pool->num_threads() : 1;
  // Blocks of <= kMaxBlock query heads per kv head; more (smaller) blocks only when
  // there are fewer kv heads than threads.
  size_t blocks = (group + kMaxBlock - 1) / kMaxBlock;
  if (dims.n_kv_heads * blocks < threads) {
    blocks = std::min(group, (threads + dims.n_kv_heads - 1) / dims.n_kv_heads);
  }
  const size_t scratch_floats = ScratchLayout(dims.max_ctx, dims.head_dim).total;
  const int64_t tasks = static_cast<int64_t>(dims.n_kv_heads * blocks);
  auto body = [&](int64_t t, int) {
    const size_t g = static_cast<size_t>(t) / blocks, b = static_cast<size_t>(t) % blocks;
    const size_t lo = SplitPoint(group, blocks, b, 1);
    const size_t hi = SplitPoint(group, blocks, b + 1, 1);
    if (lo == hi) return;
    float* scratch = ThreadScratch(scratch_floats);
    if constexpr (std::is_same_v<OutT, float>) {
      HWY_DYNAMIC_DISPATCH(HeadsF32)(job, g, g * group + lo, hi - lo, scratch, out);
    } else {
      HWY_DYNAMIC_DISPATCH(HeadsBf16)(job, g, g * group + lo, hi - lo, scratch, out);
    }
  };
  if (pool) {
    pool->Run(tasks, body);
  } else {
    for (int64_t t = 0; t < tasks; ++t) body(t, 0);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeAttention(const AttentionDims& dims, const bf16* q,
                             const bf16* k_cache, const bf16* v_cache, size_t pos,
                             bf16* out, ThreadPool* pool, std::optional<float> scale) {
  return Attend(dims, q, k_cache, v_cache, pos, out, pool, scale);
}

absl::Status DecodeAttention(const AttentionDims& dims, const bf16* q,
                             const bf16* k_cache, const bf16* v_cache, size_t pos,
                             float* out, ThreadPool* pool, std::optional<float> scale) {
  return Attend(dims, q, k_cache, v_cache, pos, out, pool, scale);
}

const char* AttentionTargetName() {
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(targets & -targets);
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
