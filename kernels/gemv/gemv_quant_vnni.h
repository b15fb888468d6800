// Internal: quantized-weight GEMV rows with int8 activations on CPUs with
// AVX512-VNNI (QuantRowsVnni) or AVX-VNNI (QuantRowsAvxVnni, 256-bit, one block per
// vpdpbusd).
// vpdpbusd multiplies unsigned by signed bytes: Q4 nibbles are unsigned already
// (Q4_0's -8 is added per row as -8 * sum_b dw_b * dx_b * sum(q_x), as Q4_1's m);
// Q8_0's weights go in biased by 128 (w ^ 0x80) from int32 lanes that start at
// -128 times their activations' sum (the AVX-VNNI and short-row loops move the
// sign onto the activation instead, |w| * (sign(w) x), exact because x is in
// [-127, 127]). Each block's dot product is exact; blocks go in pairs on 512-bit
// vectors and accumulate as acc += float(idot) * (dw * dx) in f32 (an odd last
// block on 256 bits), reduced at the end. Q8_0 rows take their scales 16 blocks at a
// time (word permutes of the chunk's own lines, gemv_chunk_scales.h; convert and
// multiply, then one permute per block pair), which beat converting the scales per
// block pair. Q4_0 / Q4_1 rows take theirs the same way and put four blocks on one
// 512-bit vector (activations pre-arranged per four blocks), which beat the per-pair
// loop in and out of cache. The benchmark runs that decided these, dated:
// docs/gemv-kernels.md.
#ifndef DK_KERNELS_GEMV_GEMV_QUANT_VNNI_H_
#define DK_KERNELS_GEMV_GEMV_QUANT_VNNI_H_

#include <cstddef>
#include <cstdint>

#include "kernels/gemv/gemv_quant.h"
#include "kernels/common/scratch.h"
#include "util/bf16.h"

namespace dk::kernels::internal {

// Activations quantized per 32-element block (QuantActivations::kInt8).
struct Q8Activations {
  const int8_t* q;      // [cols], 64-byte aligned, each in [-127, 127]
  const float* d;       // [cols / 32] block scales dx
  const int32_t* sum;   // [cols / 32] sum of the block's q
  const float* sx;      // [cols / 32] d * sum (Q4_1's minimum multiplies it)
  // QuantRowsVnni on Q4_0 / Q4_1 only: q re-arranged per four blocks (QuadActivations).
  const int8_t* quad = nullptr;
  // KQuantRowsVnni on Q6_K only: [cols / 16] sums of q per 16 elements (Sums16).
  const float* sum16 = nullptr;
  // Q8RowsVnniTokens only: [cols] q + 128 as unsigned bytes, 64-byte aligned.
  const uint8_t* biased = nullptr;
};

// `q` of the first cols / 512 * 16 blocks (whole 16-block chunks) re-arranged as the
// Q4 rows of QuantRowsVnni read them, per four blocks: their first halves
// [x0[0:16) x1[0:16) x2[0:16) x3[0:16)], then their second halves. In thread
// `thread`'s buffer kQuantQuad of `scratch`, 64-byte aligned, valid until its next use.
const int8_t* QuadActivations(const int8_t* q, size_t cols, KernelScratch& scratch, int thread);

// True if this CPU executes EVEX vpdpbusd with AVX512BW/VL (checked once).
bool CpuHasAvx512Vnni();
// True if this CPU executes VEX vpdpbusd (AVX-VNNI) with AVX2 (checked once).
bool CpuHasAvxVnni();

// Rows [r0, r1) of W (row-major blocks of `format`, cols % 32 == 0).
void QuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                   const Q8Activations& x, float* y);
void QuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                   const Q8Activations& x, bf16* y);
void QuantRowsAvxVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                      const Q8Activations& x, float* y);
void QuantRowsAvxVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                      const Q8Activations& x, bf16* y);

// QuantRowsVnni on Q8_0 rows [0, n) for m token rows x[t] at once (each loaded weight
// pair applied to several of them; x[t].biased set): out[t * out_stride + r],
// bit-identical to QuantRowsVnni on x[t] alone.
void Q8RowsVnniTokens(const uint8_t* w, size_t cols, size_t n, const Q8Activations* x, size_t m, float* out,
                      size_t out_stride);

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMV_QUANT_VNNI_H_
