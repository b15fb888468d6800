// GEMV for decode (M = 1) with weights in GGUF's block formats:
// y[n] = sum_k W[n, k] * x[k], W [rows, cols] row-major, each row its consecutive
// blocks exactly as a GGUF tensor stores it (util/ggml_blocks.h: Q8_0, Q4_0, Q4_1,
// Q5_0 of 32 elements; the K-quants Q4_K, Q6_K of 256). cols must be a multiple of
// the format's block (formats::BlockElems). Q5_0 / Q4_K / Q6_K have their own
// inner loops (gemv_kquant.h) under the same entry points and strategies.
//
// Two ways to treat the activations (QuantActivations):
//  * kInt8: x is quantized per 32-element block to int8 with an f32 scale
//    (dx = max|x| / 127, q = round-to-nearest-even(x * (1 / dx))), as GGUF engines
//    do, and each block's dot product is exact in int32 (vpdpbusd on AVX512-VNNI
//    and AVX-VNNI CPUs, i16 multiply-adds on other targets); y[n] = sum_b dw_b * dx_b * idot_b
//    (Q4_0's -8 and Q4_1's m enter through dx_b * sum(q_x)). Changes the numerics
//    by the activation rounding (at most about dx/2 per element).
//  * kFloat: x stays f32 (bf16 x is widened exactly); the weights are dequantized
//    in registers (d * q, d * (q - 8), d * q + m) and FMA'd.
// x must be finite.
//
// kInt8 is the faster strategy for all three formats: an exact int8 dot product
// (vpdpbusd) computes about twice the weights per cycle that dequantizing to f32
// does, enough for two threads to keep up with memory where kFloat cannot. The
// AVX512-VNNI kernels prefetch in software (gemv_quant_vnni.cc). The benchmark
// figures behind both choices, dated: docs/gemv-kernels.md.
//
// All entry points are parallel over rows on `pool` (nullptr: the caller alone),
// dispatch to the best Highway target at run time and accept any pointer alignment;
// their per-thread scratch comes from `scratch` as Gemv's (gemv.h).
// Thread-safety: as Gemv (gemv.h).
#ifndef DK_KERNELS_GEMV_GEMV_QUANT_H_
#define DK_KERNELS_GEMV_GEMV_QUANT_H_

#include <cstddef>
#include <cstdint>

#include "formats/weight_format.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_variants.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {

// `format` is a block format (formats::IsBlockFormat).
using formats::WeightFormat;
enum class QuantActivations { kInt8, kFloat };

// y = W x; `w` holds rows * formats::RowBytes(format, cols) bytes.
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const float* x, float* y, ThreadPool* pool,
               const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const bf16* x, float* y, ThreadPool* pool,
               const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const float* x, bf16* y, ThreadPool* pool,
               const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const bf16* x, bf16* y, ThreadPool* pool,
               const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

// Name of the path `act` takes on this machine under `variants` (e.g. "AVX3+VNNI",
// "AVX2+AVXVNNI"); a string that lives as long as the process (any thread may call it).
const char* QuantGemvTargetName(QuantActivations act, const GemvVariants& variants = GemvVariants());

// kInt8 GEMVs use vpdpbusd where variants.vnni and the CPU has it: AVX512-VNNI when
// the dispatcher picks an AVX-512 target, else AVX-VNNI (256-bit) on AVX2 and AVX-512
// targets. Whether they do under `variants`:
bool QuantGemvUsesVnni(const GemvVariants& variants = GemvVariants());

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMV_QUANT_H_
