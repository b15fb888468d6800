// Internal: Gemm's (gemm.h) register-blocked path for Q4_0 / Q4_1 weights on CPUs
// with AVX512-VNNI. Each block quad's nibbles (and each block pair's, past the last
// whole 16-block chunk) are loaded and unpacked once per weight row and dotted with
// several token rows' activations; each (weight row, token row) keeps its own
// accumulators and runs the single-row kernel's float operations in the same order
// (RowGroupQ4Chunked / RowGroupSums in gemv_quant_vnni.cc; the int32 block dot
// products are exact), so each output row is that kernel's bit for bit.
#ifndef DK_KERNELS_GEMV_GEMM_Q4_VNNI_H_
#define DK_KERNELS_GEMV_GEMM_Q4_VNNI_H_

#include <cstddef>
#include <cstdint>

#include "formats/weight_format.h"
#include "kernels/gemv/gemv_quant_vnni.h"

namespace dk::kernels::internal {

// QuantRowsVnni on Q4_0 / Q4_1 rows [0, n) of w for m token rows x[t] at once (x[t]
// as PrepareQuantX leaves it on the AVX512-VNNI path: quad set): out[t * out_stride
// + r], bit-identical to QuantRowsVnni on x[t] alone.
void Q4RowsVnniTokens(WeightFormat format, const uint8_t* w, size_t cols, size_t n, const Q8Activations* x,
                      size_t m, float* out, size_t out_stride);

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMM_Q4_VNNI_H_
