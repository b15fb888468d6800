// Decode attention: one query position against a bf16 KV cache, with grouped-query
// heads (GQA). Numerics follow PyTorch's bf16 scaled_dot_product_attention on CPU:
//   s[t]  = (q_h . k_t) * scale            f32 accumulation of bf16 products
//   p[t]  = exp(s[t] - max_t s[t])          f32
//   out_h = (sum_t p[t] * v_t) / sum_t p[t] f32, rounded once to the output type
// for t in [0, pos]. Query head h reads kv head h / (n_heads / n_kv_heads).
//
// Layouts (row-major, element strides):
//   q      [n_heads][head_dim]
//   cache  [n_kv_heads][max_ctx][head_dim]  (K and V alike; kv head g's positions
//          are contiguous, and max_ctx is the stride between kv heads)
//   out    [n_heads][head_dim]
//
// Parallel over (kv head, block of its query heads) on `pool` (nullptr: the caller
// alone); each K and V row is read once per block of up to 4 query heads, so for
// llama-style GQA (4 query heads per kv head) the cache is streamed exactly once.
// Dispatches to the best Highway target at run time and accepts any pointer
// alignment. Per-thread scratch (O(max_ctx) floats) comes from `scratch`, the
// caller's (slot kAttentionScratch of each pool thread): given one, a call
// allocates nothing once it has grown; null, the call allocates its own.
// Thread-safety: concurrent calls from different threads are safe if they use
// different pools and different scratch (each is single-owner).
#ifndef DK_KERNELS_ATTENTION_ATTENTION_H_
#define DK_KERNELS_ATTENTION_ATTENTION_H_

#include <cstddef>
#include <optional>

#include "absl/status/status.h"
#include "kernels/common/scratch.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {

struct AttentionDims {
  size_t n_heads = 0;     // query heads; a multiple of n_kv_heads
  size_t n_kv_heads = 0;  // key/value heads
  size_t head_dim = 0;    // elements per head (q, k, v and out alike)
  size_t max_ctx = 0;     // positions each kv head holds in the caches (its stride)
};

// Writes out[n_heads][head_dim] for the query at position `pos` (attending to cache
// positions 0..pos inclusive). `scale` defaults to 1/sqrt(head_dim).
// Returns InvalidArgument (and writes nothing) if a dimension is zero, n_heads is
// not a multiple of n_kv_heads, pos >= max_ctx, a pointer is null or `scale` is not
// finite.
absl::Status DecodeAttention(const AttentionDims& dims, const bf16* q,
                             const bf16* k_cache, const bf16* v_cache, size_t pos,
                             bf16* out, ThreadPool* pool,
                             std::optional<float> scale = std::nullopt, KernelScratch* scratch = nullptr);
// Same, without the final bf16 rounding.
absl::Status DecodeAttention(const AttentionDims& dims, const bf16* q,
                             const bf16* k_cache, const bf16* v_cache, size_t pos,
                             float* out, ThreadPool* pool,
                             std::optional<float> scale = std::nullopt, KernelScratch* scratch = nullptr);

// Causal attention of m query rows at consecutive positions (a prompt chunk): row
// i < m, q + i * q_stride ([n_heads][head_dim]), at position pos0 + i attends to the
// cache positions [first_i, pos0 + i], first_i = max(0, pos0 + i + 1 - window) for
// window > 0 (sliding window), else 0; its output goes to out + i * out_stride.
// Row i's output is bit-identical to
//   DecodeAttention(dims, q_i, k_cache + first_i * head_dim,
//                   v_cache + first_i * head_dim, pos0 + i - first_i, out_i, pool, scale)
// on every target and thread count, but each K/V row is loaded from memory once
// per block of rows instead of once per row. Parallel over (kv head, block of rows);
// per-thread scratch is O(rows per block * n_heads / n_kv_heads * attended positions)
// floats. Returns InvalidArgument (and writes nothing) for DecodeAttention's invalid
// arguments with pos = pos0 + m - 1, for m == 0, and for a stride below
// n_heads * head_dim. Output rows must not overlap q or the caches.
absl::Status CausalAttention(const AttentionDims& dims, const bf16* q, size_t q_stride,
                             size_t m, size_t pos0, size_t window, const bf16* k_cache,
                             const bf16* v_cache, bf16* out, size_t out_stride,
                             ThreadPool* pool, std::optional<float> scale = std::nullopt,
                             KernelScratch* scratch = nullptr);
// Same, without the final bf16 rounding.
absl::Status CausalAttention(const AttentionDims& dims, const bf16* q, size_t q_stride,
                             size_t m, size_t pos0, size_t window, const bf16* k_cache,
                             const bf16* v_cache, float* out, size_t out_stride,
                             ThreadPool* pool, std::optional<float> scale = std::nullopt,
                             KernelScratch* scratch = nullptr);

// Name of the Highway target the dispatcher picks on this machine (e.g. "AVX3").
const char* AttentionTargetName();

}  // namespace dk::kernels

#endif  // DK_KERNELS_ATTENTION_ATTENTION_H_
