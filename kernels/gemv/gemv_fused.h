// Fused decode kernels: a GEMV, or several sharing one x, together with the
// elementwise step before or after it, in ONE parallel pass over the weights' rows
// (the fuse_kernels optimization's launches). Unfused, each GEMV is one fork-join of
// the thread pool and each RMSNorm / SiLU*mul / residual add a serial launch between
// them; fused, a decoder layer takes 4 passes instead of 7 GEMVs and 5 elementwise
// launches.
//
//  * RmsNormGemv:        y_i = W_i xn,  xn = RmsNorm(x, norm)      (q/k/v; LM-head partitions)
//  * RmsNormGemvSiluMul: y = SiluMul(bf16(W_gate xn), bf16(W_up xn))  (gate/up + SiLU*mul)
//  * GemvAdd:            y = Add(residual, bf16(W x))             (O / down + residual add)
//
// Bit-identical to the unfused kernels run one after the other on the same SIMD
// target (RmsNorm, then Gemv / PackedGemv / X12Gemv / QuantGemv(kInt8) with bf16 x, then
// SiluMul / Add): xn is rounded to bf16 where RmsNorm rounds it, each GEMV row is
// the same inner loop (gemv_rows.h), its f32 sum rounded to bf16 where the unfused
// GEMV stores bf16, and the elementwise kernels run on ranges that start at
// multiples of 64 elements, so their vector / scalar-tail split is the one of the
// whole-length call. The gate and up weights stay two matrices: one task reads the
// same rows of both, two sequential streams (interleaving their rows into one
// matrix, as the NPU reference does for its DMA, changes nothing here: the CPU
// prefetchers follow two streams).
//
// Every weight of one call is in one format; cols % 32 == 0 for block formats.
// Outputs must not alias inputs. Per-thread scratch (x prepared, each weight's f32
// rows) comes from `scratch` as Gemv's. Thread-safety: as Gemv (gemv.h).
#ifndef DK_KERNELS_GEMV_GEMV_FUSED_H_
#define DK_KERNELS_GEMV_GEMV_FUSED_H_

#include <cstddef>

#include "formats/weight_format.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_variants.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {

using formats::WeightFormat;

// One weight matrix [rows, cols]: bf16 elements (row-major, or packed by
// PackGemvWeights), bf16 in 12 bits (PackX12GemvWeights, gemv_x12.h) or GGUF blocks
// (gemv_quant.h).
struct FusedWeight {
  const void* data = nullptr;
  size_t rows = 0;
};

// The most weights one RmsNormGemv call takes.
inline constexpr int kMaxFusedWeights = 3;

// For i < n (1 <= n <= kMaxFusedWeights): y[i] = W_i xn (f32 if y_f32, else bf16),
// xn = RmsNorm(x, norm, cols, eps).
void RmsNormGemv(WeightFormat format, const bf16* x, const bf16* norm, float eps, size_t cols,
                 const FusedWeight* w, int n, void* const* y, bool y_f32, ThreadPool* pool,
                 const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

// y[r] = bf16(bf16(silu(g_r)) * u_r), g = bf16(W_gate xn), u = bf16(W_up xn),
// xn = RmsNorm(x, norm, cols, eps); gate.rows == up.rows.
void RmsNormGemvSiluMul(WeightFormat format, const bf16* x, const bf16* norm, float eps, size_t cols,
                        FusedWeight gate, FusedWeight up, bf16* y, ThreadPool* pool,
                 const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

// y[r] = bf16(residual[r] + bf16((W x)[r])).
void GemvAdd(WeightFormat format, const bf16* x, size_t cols, FusedWeight w, const bf16* residual,
             bf16* y, ThreadPool* pool,
                 const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMV_FUSED_H_
