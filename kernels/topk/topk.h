// Greedy and top-k selection over f32 logits, for sampling at the end of decode.
//
// Order: a logit ranks above another if its value is larger or, for equal values,
// its index is smaller, so results equal a stable sort by (-value, index). NaN
// logits are ignored (never selected); -inf and +inf are ordinary values.
//
// The scan is SIMD and compares whole vectors against the current k-th value, so
// typical logits cost one compare per lane; elements that beat it are inserted
// with a scalar insertion into the (sorted) output. Adversarial inputs (ascending
// logits: every element beats the threshold) stay correct, at O(n * k).
// Serial on purpose: at n = 128256 the scan takes ~4 us from L2, and a version split
// over a 2-thread pool (per-part top-k, then merged) was not reliably faster
// (3.4-5.6 us vs 3.6-4.3 us), so it was removed. Dispatches to the best Highway
// target at run time, accepts any pointer alignment, allocates nothing.
// Thread-safety: reentrant (no shared state).
#ifndef DK_KERNELS_TOPK_TOPK_H_
#define DK_KERNELS_TOPK_TOPK_H_

#include <cstddef>
#include <cstdint>

namespace dk::kernels {

// Index of the largest of logits[0, n); ties go to the smaller index; NaNs are
// ignored; returns 0 if every logit is NaN. n == 0 is a programmer error (returns
// 0). n must fit in uint32_t.
size_t Argmax(const float* logits, size_t n);

// Writes the min(k, m) highest-ranked logits (m = number of non-NaN logits) to
// ids[i] / values[i] in descending rank order and returns that count; entries past
// it are left untouched (so with k > n only the first n are filled). ids and
// values must hold k entries. Allocates nothing. n must fit in uint32_t.
size_t TopK(const float* logits, size_t n, size_t k, uint32_t* ids, float* values);

// Name of the Highway target the dispatcher picks on this machine (e.g. "AVX3").
const char* TopKTargetName();

}  // namespace dk::kernels

#endif  // DK_KERNELS_TOPK_TOPK_H_
