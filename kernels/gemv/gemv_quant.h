// GEMV for decode (M = 1) with weights in GGUF's 32-element block formats:
// y[n] = sum_k W[n, k] * x[k], W [rows, cols] row-major, each row cols / 32
// consecutive blocks exactly as a GGUF tensor stores it (util/ggml_blocks.h:
// Q8_0, Q4_0, Q4_1). cols must be a multiple of 32.
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
// Measured (gemv_quant_bench, 2 x 2.1 GHz AVX512-VNNI VM, 2026-12-01, medians of 3;
// the VM's two cores were shared with another session's build, load average 4-6,
// so the 2-thread figures mostly measure how much CPU the pool got):
//   GB/s of weight bytes at 2 threads, int8-x / float-x (bandwidth, same run, GB/s)
//   shape        Q8_0          Q4_0          Q4_1          bf16 Gemv
//   2048x2048    2.59 / 1.81   1.85 / 1.50   1.98 / 1.71   2.8-4.7    (7-14)
//   8192x2048    4.46 / 4.49   3.32 / 3.03   3.31 / 3.65   4.4-4.8    (13-15)
//   2048x8192    3.71 / 2.72   2.42 / 1.82   2.75 / 2.34   4.4-5.1    (8-13)
//   49152x576    3.61 / 4.43   2.83 / 2.32   2.92 / 2.21   4.8-4.9    (8-11)
//   compute ceiling, 1 thread, 512x2048 in cache (BM_QuantGemvHot), GB/s:
//                24.4 / 12.2   10.5 / 5.7    10.1 / 5.5    31.9
// Since 2026-12-02 the AVX512-VNNI kernels prefetch 4 KiB ahead in software
// (gemv_quant_vnni.cc), on a quiet host at 2 threads (bandwidth 43-72 GB/s):
// int8-x Q8_0 / Q4_0 / Q4_1 2048x2048 36.8 / 32.2 / 31.8 GB/s, 49152x576
// 56.7 / 33.6 / 35.4 (from 19-21 and 29-31 without it).
// kInt8 (vpdpbusd) is the faster strategy for all three formats: about 2x the
// kFloat ceiling, and ahead in 9 of the 12 contended 2-thread cases. One thread
// computes 10 GB/s of Q4 weights (kInt8), so two (20 GB/s) could be memory-bound
// at this VM's ~14 GB/s on idle cores; kFloat (5.5-5.7 per thread) cannot. On the
// contended cores above neither strategy got near the bandwidth.
//
// All entry points are parallel over rows on `pool` (nullptr: the caller alone),
// dispatch to the best Highway target at run time, accept any pointer alignment,
// and allocate nothing per call once their per-thread scratch has grown.
// Thread-safety: as Gemv (gemv.h).
#ifndef DK_KERNELS_GEMV_GEMV_QUANT_H_
#define DK_KERNELS_GEMV_GEMV_QUANT_H_

#include <cstddef>
#include <cstdint>

#include "formats/weight_format.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {

// `format` is a block format (formats::IsBlockFormat): Q8_0, Q4_0 or Q4_1.
using formats::WeightFormat;
enum class QuantActivations { kInt8, kFloat };

// The CPU device's (runtime/cpu) spellings until it uses formats/weight_format.h:
// QuantFormat is WeightFormat, QuantRowBytes is formats::RowBytes.
using QuantFormat = WeightFormat;
inline size_t QuantRowBytes(WeightFormat format, size_t cols) {
  return static_cast<size_t>(formats::RowBytes(format, static_cast<int64_t>(cols)));
}

// y = W x; `w` holds rows * formats::RowBytes(format, cols) bytes.
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const float* x, float* y, ThreadPool* pool);
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const bf16* x, float* y, ThreadPool* pool);
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const float* x, bf16* y, ThreadPool* pool);
void QuantGemv(WeightFormat format, QuantActivations act, const uint8_t* w, size_t rows,
               size_t cols, const bf16* x, bf16* y, ThreadPool* pool);

// Name of the path `act` takes on this machine (e.g. "AVX3+VNNI", "AVX2+AVXVNNI");
// valid until the calling thread's next call with the same `act`.
const char* QuantGemvTargetName(QuantActivations act);

// kInt8 GEMVs use vpdpbusd where the CPU has it: AVX512-VNNI when the dispatcher
// picks an AVX-512 target, else AVX-VNNI (256-bit) on AVX2 and AVX-512 targets (on
// by default; DK_GEMV_VNNI=0 turns both off). Tests switch it to cover every path.
// Not thread-safe against concurrent GEMVs.
void SetQuantGemvVnniEnabled(bool enabled);
bool QuantGemvUsesVnni();

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMV_QUANT_H_
