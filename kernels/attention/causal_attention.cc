// CausalAttention: DecodeAttention for m consecutive query rows, sharing cache loads.
//
// Work splits into tasks of (kv head, block of rows). A task walks the union of its
// rows' position ranges in tiles of about kTileBytes of K (then of V), and within a
// tile runs every (row, query-head chunk) "unit" over its slice of the tile, so a
// tile is read from memory once per block and then from L1. Each unit runs the same
// helpers (attention-inl.h) as DecodeAttention, over consecutive slices of its own
// range: scores are per-position (slices that are multiples of ScorePairs' 4-groups,
// counted from the row's first position, reproduce its grouping), the softmax sees the
// whole row, and the V sum continues in position order across slices from the stored
// accumulators. So each row's floats are exactly DecodeAttention's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "kernels/attention/attention.h"
#include "util/status.h"

#ifndef DK_KERNELS_ATTENTION_CAUSAL_ATTENTION_CC_ONCE_
#define DK_KERNELS_ATTENTION_CAUSAL_ATTENTION_CC_ONCE_
namespace dk::kernels::causal_internal {

// K (or V) bytes of one tile: with the scores the tile's units write, it stays in L1.
inline constexpr size_t kTileBytes = 16 << 10;
// Rows per task, fewer when that leaves threads idle or the task's scratch (scores of
// every attended position for each row) would pass kMaxScratchBytes.
inline constexpr size_t kRowBlock = 16;
inline constexpr size_t kMaxScratchBytes = size_t{2} << 20;

// One call's inputs, shared by all targets.
struct RowsJob {
  const bf16* q;  // row i at q + i * q_stride: [n_heads][head_dim]
  size_t q_stride;
  const bf16* k;  // [n_kv_heads][max_ctx][head_dim]
  const bf16* v;
  size_t head_dim, max_ctx, group;
  size_t pos0, window;  // window 0: none
  float scale;
  size_t positions;  // most positions one row attends
  size_t tile;       // positions per tile, a multiple of 4

  size_t First(size_t r) const {
    const size_t end = End(r);
    return window != 0 && end > window ? end - window : 0;
  }
  size_t End(size_t r) const { return pos0 + r + 1; }
  // Row r's slice boundary for the tile boundary `t`: the first of the row's
  // 4-groups (from First(r)) at or after t, clamped to the row's range.
  size_t Cut(size_t r, size_t t) const {
    const size_t first = First(r);
    if (t <= first) return first;
    return std::min(End(r), first + (t - first + 3) / 4 * 4);
  }
};

}  // namespace dk::kernels::causal_internal
#endif  // DK_KERNELS_ATTENTION_CAUSAL_ATTENTION_CC_ONCE_

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/causal_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/attention/attention-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
using attention_internal::ScratchLayout;
using causal_internal::RowsJob;

// Calls fn(std::integral_constant<size_t, kh>) for kh in [1, kMaxBlock].
template <typename Fn>
HWY_INLINE void WithHeads(size_t kh, const Fn& fn) {
  static_assert(attention_internal::kMaxBlock == 4, "update the switch");
  switch (kh) {
    case 1: return fn(std::integral_constant<size_t, 1>());
    case 2: return fn(std::integral_constant<size_t, 2>());
    case 3: return fn(std::integral_constant<size_t, 3>());
    case 4: return fn(std::integral_constant<size_t, 4>());
  }
}

// One task: kv head g, rows [r0, r1), scratch for (r1 - r0) * chunks units.
template <typename OutT>
void RowBlock(const RowsJob& job, size_t g, size_t r0, size_t r1, float* scratch,
              OutT* out, size_t out_stride) {
  const HeadSplit split(job.head_dim);
  const ScratchLayout layout(job.positions, job.head_dim);
  const size_t hd = job.head_dim;
  const size_t chunks = (job.group + attention_internal::kMaxBlock - 1) /
                        attention_internal::kMaxBlock;
  const bf16* k = job.k + g * job.max_ctx * hd;
  const bf16* v = job.v + g * job.max_ctx * hd;
  // Visits every unit: fn(row, first query head of the unit, its heads, scratch).
  const auto units = [&](const auto& fn) {
    for (size_t r = r0; r < r1; ++r) {
      for (size_t c = 0; c < chunks; ++c) {
        const size_t lo = SplitPoint(job.group, chunks, c, 1);
        const size_t hi = SplitPoint(job.group, chunks, c + 1, 1);
        float* base = scratch + ((r - r0) * chunks + c) * layout.total;
        fn(r, g * job.group + lo, hi - lo, UnitScratch(layout, base));
      }
    }
  };
  // Visits tile by tile every unit's non-empty slice [a, b) of the tile:
  // fn(heads, scratch, a, b, the row's first position).
  const size_t begin = job.First(r0), end = job.End(r1 - 1);
  const auto slices = [&](const auto& fn) {
    for (size_t t0 = begin; t0 < end; t0 += job.tile) {
      const size_t t1 = std::min(end, t0 + job.tile);
      units([&](size_t r, size_t, size_t kh, const UnitScratch& u) {
        const size_t a = job.Cut(r, t0), b = job.Cut(r, t1);
        if (a != b) fn(kh, u, a, b, job.First(r));
      });
    }
  };

  units([&](size_t r, size_t h, size_t kh, const UnitScratch& u) {
    SplitQuery(kh, job.q + r * job.q_stride + h * hd, split, u);
  });
  slices([&](size_t kh, const UnitScratch& u, size_t a, size_t b, size_t first) {
    WithHeads(kh, [&](auto kH) {
      ScoreHeads<kH()>(k + a * hd, b - a, split, job.scale, u, u.scores + (a - first));
    });
  });
  units([&](size_t r, size_t h, size_t kh, const UnitScratch& u) {
    const size_t first = job.First(r), n = job.End(r) - first;
    if (split.tail) {
      ScoreTail(kh, job.q + r * job.q_stride + h * hd, k + first * hd, n, split,
                job.scale, u);
    }
    Softmax(kh, n, u, u.sums);
    std::fill(u.oe, u.oe + kh * u.half_stride, 0.0f);
    std::fill(u.oo, u.oo + kh * u.half_stride, 0.0f);
  });
  slices([&](size_t kh, const UnitScratch& u, size_t a, size_t b, size_t first) {
    WithHeads(kh, [&](auto kH) {
      ValueHeads<kH(), true>(v + a * hd, b - a, split, u.scores + (a - first), u);
    });
  });
  units([&](size_t r, size_t h, size_t kh, const UnitScratch& u) {
    const size_t first = job.First(r);
    if (split.tail) ValueTail(kh, v + first * hd, job.End(r) - first, split, u);
    StoreHeads(kh, split, u, u.sums, out + r * out_stride + h * hd);
  });
}

void RowBlockF32(const RowsJob& job, size_t g, size_t r0, size_t r1, float* scratch,
                 float* out, size_t out_stride) {
  RowBlock(job, g, r0, r1, scratch, out, out_stride);
}
void RowBlockBf16(const RowsJob& job, size_t g, size_t r0, size_t r1, float* scratch,
                  bf16* out, size_t out_stride) {
  RowBlock(job, g, r0, r1, scratch, out, out_stride);
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(RowBlockF32);
HWY_EXPORT(RowBlockBf16);

namespace {

using attention_internal::ScratchLayout;
using causal_internal::RowsJob;

absl::Status ValidateRows(const AttentionDims& dims, const bf16* q, size_t q_stride,
                          size_t m, size_t pos0, const bf16* k, const bf16* v,
                          const void* out, size_t out_stride, float scale) {
  if (m == 0) return absl::InvalidArgumentError("CausalAttention: no rows");
  if (m > dims.max_ctx || pos0 > dims.max_ctx - m) {
    return absl::InvalidArgumentError("CausalAttention: pos0 + m > max_ctx");
  }
  DK_RETURN_IF_ERROR(attention_internal::Validate("CausalAttention", dims, q, k, v,
                                                  pos0 + m - 1, out, scale));
  const size_t row = dims.n_heads * dims.head_dim;
  if (q_stride < row || out_stride < row) {
    return absl::InvalidArgumentError(
        "CausalAttention: a row stride is below n_heads * head_dim");
  }
  return absl::OkStatus();
}

template <typename OutT>
absl::Status AttendRows(const AttentionDims& dims, const bf16* q, size_t q_stride,
                        size_t m, size_t pos0, size_t window, const bf16* k,
                        const bf16* v, OutT* out, size_t out_stride, ThreadPool* pool,
                        std::optional<float> scale_opt, KernelScratch* given) {
  const float scale = scale_opt.has_value()
                          ? *scale_opt
                          : 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  DK_RETURN_IF_ERROR(
      ValidateRows(dims, q, q_stride, m, pos0, k, v, out, out_stride, scale));
  const size_t hd = dims.head_dim, group = dims.n_heads / dims.n_kv_heads;
  const size_t positions = window != 0 ? std::min(window, pos0 + m) : pos0 + m;
  const size_t tile = std::max<size_t>(4, causal_internal::kTileBytes / (hd * 2) / 4 * 4);
  const RowsJob job{q, q_stride, k, v, hd, dims.max_ctx, group, pos0, window, scale,
                    positions, tile};
  // Blocks of kRowBlock rows, smaller while there are fewer than 2 tasks per thread
  // or a block's scratch would pass kMaxScratchBytes.
  const size_t chunks = (group + attention_internal::kMaxBlock - 1) /
                        attention_internal::kMaxBlock;
  const size_t row_floats = chunks * ScratchLayout(positions, hd).total;
  const size_t block_rows = std::clamp<size_t>(
      causal_internal::kMaxScratchBytes / sizeof(float) / row_floats, 1,
      causal_internal::kRowBlock);
  const size_t threads = pool ? pool->num_threads() : 1;
  const size_t wanted = (2 * threads + dims.n_kv_heads - 1) / dims.n_kv_heads;
  const size_t blocks = std::min(m, std::max((m + block_rows - 1) / block_rows, wanted));
  const size_t scratch_floats = (m + blocks - 1) / blocks * row_floats;
  const size_t n_kv = dims.n_kv_heads;
  const CallScratch scratch_of(given, static_cast<int>(threads));
  auto body = [&](int64_t t, int thread) {
    // Later rows attend more positions: hand those out first.
    const size_t b = blocks - 1 - static_cast<size_t>(t) / n_kv;
    const size_t g = static_cast<size_t>(t) % n_kv;
    const size_t r0 = SplitPoint(m, blocks, b, 1), r1 = SplitPoint(m, blocks, b + 1, 1);
    if (r0 == r1) return;
    float* scratch = scratch_of->Get<float>(thread, kAttentionScratch, scratch_floats);
    if constexpr (std::is_same_v<OutT, float>) {
      HWY_DYNAMIC_DISPATCH(RowBlockF32)(job, g, r0, r1, scratch, out, out_stride);
    } else {
      HWY_DYNAMIC_DISPATCH(RowBlockBf16)(job, g, r0, r1, scratch, out, out_stride);
    }
  };
  attention_internal::RunTasks(pool, static_cast<int64_t>(n_kv * blocks), body);
  return absl::OkStatus();
}

}  // namespace

absl::Status CausalAttention(const AttentionDims& dims, const bf16* q, size_t q_stride,
                             size_t m, size_t pos0, size_t window, const bf16* k_cache,
                             const bf16* v_cache, bf16* out, size_t out_stride,
                             ThreadPool* pool, std::optional<float> scale,
                             KernelScratch* scratch) {
  return AttendRows(dims, q, q_stride, m, pos0, window, k_cache, v_cache, out,
                    out_stride, pool, scale, scratch);
}

absl::Status CausalAttention(const AttentionDims& dims, const bf16* q, size_t q_stride,
                             size_t m, size_t pos0, size_t window, const bf16* k_cache,
                             const bf16* v_cache, float* out, size_t out_stride,
                             ThreadPool* pool, std::optional<float> scale,
                             KernelScratch* scratch) {
  return AttendRows(dims, q, q_stride, m, pos0, window, k_cache, v_cache, out,
                    out_stride, pool, scale, scratch);
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
