#include "kernels/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/aligned_buffer.h"
#include "util/status.h"

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/attention/attention-inl.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
using attention_internal::Job;
using attention_internal::ScratchLayout;

// Attention of the kH query heads [h0, h0 + kH), all reading kv head `g`.
template <size_t kH, typename OutT>
void HeadBlock(const Job& job, size_t g, size_t h0, float* HWY_RESTRICT scratch,
               OutT* HWY_RESTRICT out) {
  const HeadSplit split(job.head_dim);
  const UnitScratch u(ScratchLayout(job.max_ctx, job.head_dim), scratch);
  const size_t hd = job.head_dim, n = job.n;
  const bf16* k = job.k + g * job.max_ctx * hd;
  const bf16* v = job.v + g * job.max_ctx * hd;
  const bf16* q = job.q + h0 * hd;
  SplitQuery(kH, q, split, u);
  ScoreHeads<kH>(k, n, split, job.scale, u, u.scores);
  if (split.tail) ScoreTail(kH, q, k, n, split, job.scale, u);
  Softmax(kH, n, u, u.sums);
  ValueHeads<kH, false>(v, n, split, u.scores, u);
  if (split.tail) ValueTail(kH, v, n, split, u);
  StoreHeads(kH, split, u, u.sums, out + h0 * hd);
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

namespace attention_internal {

absl::Status Validate(const char* who, const AttentionDims& d, const void* q,
                      const void* k, const void* v, size_t pos, const void* out,
                      float scale) {
  if (d.n_heads == 0 || d.n_kv_heads == 0 || d.head_dim == 0 || d.max_ctx == 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": a dimension is zero"));
  }
  if (d.n_heads % d.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": n_heads is not a multiple of n_kv_heads"));
  }
  if (pos >= d.max_ctx) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": pos >= max_ctx"));
  }
  if (!q || !k || !v || !out) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": null pointer"));
  }
  if (!std::isfinite(scale)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": scale is not finite"));
  }
  return absl::OkStatus();
}

}  // namespace attention_internal

namespace {

using attention_internal::Job;
using attention_internal::kMaxBlock;
using attention_internal::ScratchLayout;
using attention_internal::Validate;

template <typename OutT>
absl::Status Attend(const AttentionDims& dims, const bf16* q, const bf16* k,
                    const bf16* v, size_t pos, OutT* out, ThreadPool* pool,
                    std::optional<float> scale_opt, KernelScratch* given) {
  const float scale = scale_opt.has_value()
                          ? *scale_opt
                          : 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  DK_RETURN_IF_ERROR(Validate("DecodeAttention", dims, q, k, v, pos, out, scale));
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
  const CallScratch scratch_of(given, static_cast<int>(threads));
  auto body = [&](int64_t t, int thread) {
    const size_t g = static_cast<size_t>(t) / blocks, b = static_cast<size_t>(t) % blocks;
    const size_t lo = SplitPoint(group, blocks, b, 1);
    const size_t hi = SplitPoint(group, blocks, b + 1, 1);
    if (lo == hi) return;
    float* scratch = scratch_of->Get<float>(thread, kAttentionScratch, scratch_floats);
    if constexpr (std::is_same_v<OutT, float>) {
      HWY_DYNAMIC_DISPATCH(HeadsF32)(job, g, g * group + lo, hi - lo, scratch, out);
    } else {
      HWY_DYNAMIC_DISPATCH(HeadsBf16)(job, g, g * group + lo, hi - lo, scratch, out);
    }
  };
  attention_internal::RunTasks(pool, tasks, body);
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeAttention(const AttentionDims& dims, const bf16* q,
                             const bf16* k_cache, const bf16* v_cache, size_t pos,
                             bf16* out, ThreadPool* pool, std::optional<float> scale,
                             KernelScratch* scratch) {
  return Attend(dims, q, k_cache, v_cache, pos, out, pool, scale, scratch);
}

absl::Status DecodeAttention(const AttentionDims& dims, const bf16* q,
                             const bf16* k_cache, const bf16* v_cache, size_t pos,
                             float* out, ThreadPool* pool, std::optional<float> scale,
                             KernelScratch* scratch) {
  return Attend(dims, q, k_cache, v_cache, pos, out, pool, scale, scratch);
}

const char* AttentionTargetName() {
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(targets & -targets);
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
