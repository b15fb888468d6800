// Internal: GEMV inner loops on CPUs with AVX512_BF16 (vdpbf16ps), for bf16 x.
// One instruction multiplies and accumulates a 64-byte chunk of bf16 pairs,
// a third of the instructions of the widen-and-FMA loops, which leaves the core
// more room for outstanding loads: decode's GEMVs are memory-bound.
// Both layouts keep the summation order of gemv.cc (chunk c into accumulator
// c % 2, one vdpbf16ps per chunk, the pair's odd product first as the
// instruction defines), so they stay bit-identical to each other.
// vdpbf16ps flushes denormal inputs and results to zero.
#ifndef DK_KERNELS_GEMV_GEMV_AVX512BF16_H_
#define DK_KERNELS_GEMV_GEMV_AVX512BF16_H_

#include <cstddef>

#include "kernels/common/scratch.h"
#include "util/bf16.h"

namespace dk::kernels::internal {

// True if this CPU executes vdpbf16ps (checked once).
bool CpuHasAvx512Bf16();

// `x` is bf16, zero-padded to a multiple of 32 elements, 64-byte aligned.
void RowMajorRowsDpBf16(const bf16* w, size_t cols, size_t r0, size_t r1, const bf16* x, float* y);
void RowMajorRowsDpBf16(const bf16* w, size_t cols, size_t r0, size_t r1, const bf16* x, bf16* y);
// `prefetch`: prefetch the weight stream in software (GemvVariants::prefetch).
void PackedPanelsDpBf16(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                        const bf16* x, float* y, bool prefetch);
void PackedPanelsDpBf16(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                        const bf16* x, bf16* y, bool prefetch);

// PackedPanelsDpBf16 for m token rows x[t] (each as `x` above) at once, each loaded
// weight chunk applied to several of them: out[t * out_stride + r - 8 p0] for the rows
// r of panels [p0, p1), bit-identical to PackedPanelsDpBf16 on x[t] alone. Long
// panels spill accumulators to thread `thread`'s buffer kDpBf16Tiles of `scratch`.
void PackedPanelsDpBf16Tokens(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                              const bf16* const* x, size_t m, float* out, size_t out_stride,
                              KernelScratch& scratch, int thread);

// RowMajorRowsDpBf16 on rows [0, n) for m token rows x[t] at once:
// out[t * out_stride + r], bit-identical to RowMajorRowsDpBf16 on x[t] alone.
void RowMajorRowsDpBf16Tokens(const bf16* w, size_t cols, size_t n, const bf16* const* x, size_t m, float* out,
                              size_t out_stride);

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMV_AVX512BF16_H_
