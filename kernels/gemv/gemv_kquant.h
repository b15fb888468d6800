// Internal: the quantized-weight GEMV rows of the GGUF formats whose elements carry
// more than one scale per 32 (the K-quants Q4_K, Q6_K: 256-element super-blocks of
// 32- or 16-element sub-blocks) or a fifth bit (Q5_0). QuantGemv (gemv_quant.h) and
// the fused kernels dispatch here for them; the activations are the same per-32
// int8 blocks (Q8Activations) as for Q8_0 / Q4_0 / Q4_1, which line up with every
// sub-block of these formats, so each sub-block's dot product is exact in int32:
//   Q5_0: w = d * (q5 - 16), q5 = nibble | fifth bit << 4;
//         y += d dx sum(q5 x) - 16 d dx sum(x)
//   Q4_K: w = d sc_j q - dmin m_j per 32-element sub-block j (6-bit sc_j, m_j);
//         y += d sc_j dx_j sum(q x) - dmin m_j dx_j sum(x)
//   Q6_K: w = d sc_g (q6 - 32) per 16-element sub-block g (int8 sc_g);
//         y += d sc_g dx sum(q6 x) - 32 d sc_g dx sum_g(x)
// (x the int8 activations, dx their block's scale). Per-32 activation blocks are
// finer than ggml's 256-element Q8_K ones, so the activation rounding is at most
// the same as the existing kernels' per block, never coarser.
//
// Two inner loops: AVX512-VNNI (vpdpbusd on the unsigned 4-, 5- and 6-bit values,
// the offsets through the activation sums; gemv_kquant_vnni.cc) and a portable
// Highway one (every target; gemv_kquant.cc) that unpacks each block to signed
// bytes and per-16 scales and takes i16 multiply-adds, as Int8Rows does. kFloat
// unpacks the same way and FMAs f32. The AVX-VNNI (256-bit) CPUs take the portable
// loop for these formats.
#ifndef DK_KERNELS_GEMV_GEMV_KQUANT_H_
#define DK_KERNELS_GEMV_GEMV_KQUANT_H_

#include <cstddef>
#include <cstdint>

#include "kernels/gemv/gemv_quant_vnni.h"
#include "util/bf16.h"

namespace dk::kernels::internal {

// The formats whose rows are computed here.
constexpr bool IsKQuantKernelFormat(WeightFormat f) {
  return f == WeightFormat::kQ5_0 || f == WeightFormat::kQ4_K || f == WeightFormat::kQ6_K;
}

// The portable loops, dispatched to the best Highway target.
void KQuantInt8RowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                       const Q8Activations& x, float* y);
void KQuantInt8RowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                       const Q8Activations& x, bf16* y);
void KQuantFloatRowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                        const float* x, float* y);
void KQuantFloatRowsHwy(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                        const float* x, bf16* y);

// The AVX512-VNNI loops (CpuHasAvx512Vnni). Q6_K needs x.sum16.
void KQuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                    const Q8Activations& x, float* y);
void KQuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                    const Q8Activations& x, bf16* y);

// KQuantRowsVnni on rows [0, n) for m token rows x[t] at once (each block's weights
// unpacked once for several of them): out[t * out_stride + r], bit-identical to
// KQuantRowsVnni on x[t] alone.
void KQuantRowsVnniTokens(WeightFormat format, const uint8_t* w, size_t cols, size_t n, const Q8Activations* x,
                          size_t m, float* out, size_t out_stride);

// sum(q) of each 16 consecutive activations of `q` [cols], as f32 (exact): in thread
// `thread`'s buffer kQuantSums16 of `scratch`, valid until its next use.
const float* Sums16(const int8_t* q, size_t cols, KernelScratch& scratch, int thread);

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMV_KQUANT_H_
