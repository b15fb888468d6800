// Quantizes bf16 weights into GGUF's 32-element blocks (util/ggml_blocks.h), as
// GGUF's reference quantizers do, once at load (runtime/cpu):
//   Q8_0: d = max|w| / 127, q = round(w / d) (ties away from zero), d stored as f16;
//   Q4_0: m = the element of largest |w| (its sign kept), d = m / -8,
//         q = min(15, trunc(w / d + 8.5)), so w ~ d * (q - 8); d stored as f16;
//   Q4_1: d = (max - min) / 15, q = min(15, trunc((w - min) / d + 0.5)),
//         w ~ d * q + min; d and min stored as f16.
// The division uses the f32 scale (1 / d); a block of zeros has d = 0 and q = 0
// (Q4_0: q = 8). Scalar code: it runs once per weight, not per token.
// Thread-safety: pure functions.
#ifndef DK_KERNELS_GEMV_QUANTIZE_H_
#define DK_KERNELS_GEMV_QUANTIZE_H_

#include <cstddef>
#include <cstdint>

#include "kernels/gemv/gemv_quant.h"
#include "util/bf16.h"

namespace dk::kernels {

// The block formats QuantizeWeights writes: Q8_0, Q4_0, Q4_1. The others (Q5_0 and
// the K-quants) are only ever read as a GGUF file stores them.
constexpr bool CanQuantizeWeights(WeightFormat f) {
  return f == WeightFormat::kQ8_0 || f == WeightFormat::kQ4_0 || f == WeightFormat::kQ4_1;
}

// `w` [rows, cols] row-major bf16 (cols % 32 == 0) -> rows * formats::RowBytes(format,
// cols) bytes at `out`, each row its cols / 32 blocks, as gemv_quant.h reads them.
// `format` must be one CanQuantizeWeights accepts.
void QuantizeWeights(WeightFormat format, const bf16* w, size_t rows, size_t cols, uint8_t* out);

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_QUANTIZE_H_
