// Multi-row GEMM for batched prefill and draft-token checks: Y[i] = W X[i] for m
// token rows X[i] sharing one weight matrix, so the weights are streamed once per
// call instead of once per token.
//
// Contract: row i of every result is BIT-identical to what the single-row entry
// point gives for X[i] alone on the same SIMD target, for every m:
//   kBf16RowMajor: Gemv;  kBf16Packed: PackedGemv;  kBf16X12: X12Gemv  (gemv.h, gemv_x12.h)
//   block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K): QuantGemv(format,
//   QuantActivations::kInt8, ...)  (gemv_quant.h)
// with bf16 x and the same y type; the fused kernels match their gemv_fused.h
// counterparts row by row. That is what lets prefill and draft checking reproduce
// greedy decode exactly. It holds because each token row is prepared exactly as the
// single-row call prepares it (zero-padded or even / odd split bf16 x; int8
// quantization per 32-element block) and each output element is the same sequence
// of vector operations on its own accumulators; only the loop order across weight
// rows and token rows differs (gemm.cc says how).
//
// Strides are in elements (each at least its row's length when m > 1). Every weight
// of one call is in one format; cols % 32 == 0 for block formats (cols % 256 for the
// K-quants). Outputs must not alias inputs. Parallel over weight rows on `pool`
// (nullptr: the caller alone); any pointer alignment; per-thread scratch, from
// `scratch` as Gemv's, grows with m x cols (the prepared token rows), for x12 at many
// token rows by one tile of rebuilt weights (gemm.cc), and is kept with the scratch.
// Thread-safety: as Gemv (gemv.h).
#ifndef DK_KERNELS_GEMV_GEMM_H_
#define DK_KERNELS_GEMV_GEMM_H_

#include <cstddef>

#include "formats/weight_format.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_fused.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {

// Y[i] = W X[i] for i < m: x row i at x + i * x_stride, y row i at y + i * y_stride.
// `w` is the [rows, cols] matrix in `format` (as Gemv / PackedGemv / X12Gemv /
// QuantGemv read it).
void Gemm(WeightFormat format, const void* w, size_t rows, size_t cols, const bf16* x, size_t x_stride,
          size_t m, float* y, size_t y_stride, ThreadPool* pool,
          const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);
void Gemm(WeightFormat format, const void* w, size_t rows, size_t cols, const bf16* x, size_t x_stride,
          size_t m, bf16* y, size_t y_stride, ThreadPool* pool,
          const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

// RmsNormGemv (gemv_fused.h) for m token rows: for j < n, y[j] row i (at y[j] + i *
// y_stride[j], f32 if y_f32 else bf16) = W_j RmsNorm(X[i], norm, cols, eps).
void RmsNormGemm(WeightFormat format, const bf16* x, size_t x_stride, size_t m, const bf16* norm, float eps,
                 size_t cols, const FusedWeight* w, int n, void* const* y, const size_t* y_stride, bool y_f32,
                 ThreadPool* pool,
          const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

// RmsNormGemvSiluMul for m token rows (y row i at y + i * y_stride).
void RmsNormGemmSiluMul(WeightFormat format, const bf16* x, size_t x_stride, size_t m, const bf16* norm,
                        float eps, size_t cols, FusedWeight gate, FusedWeight up, bf16* y, size_t y_stride,
                        ThreadPool* pool,
          const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

// GemvAdd for m token rows: y row i = residual row i + bf16(W X[i]) (residual row i
// at residual + i * residual_stride).
void GemmAdd(WeightFormat format, const bf16* x, size_t x_stride, size_t m, size_t cols, FusedWeight w,
             const bf16* residual, size_t residual_stride, bf16* y, size_t y_stride, ThreadPool* pool,
          const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

namespace internal {
// Whether Gemm on `format` runs a register-blocked multi-row kernel on this CPU and
// SIMD target (each loaded weight vector feeding several token rows) rather than the
// single-row kernels once per token row; the results are the same, so tests ask this.
bool GemmRegisterBlocked(WeightFormat format, const GemvVariants& variants = GemvVariants());
}  // namespace internal

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMM_H_
