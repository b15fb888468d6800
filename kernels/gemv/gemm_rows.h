// Internal: the token rows of a Gemm call prepared once (gemm.cc), and the
// register-blocked multi-row kernels that take them where the CPU allows
// (gemm_avx512.cc).
#ifndef DK_KERNELS_GEMV_GEMM_ROWS_H_
#define DK_KERNELS_GEMV_GEMM_ROWS_H_

#include <cstddef>

#include "kernels/gemv/gemv_rows.h"

namespace dk::kernels::internal {

// m token rows, each prepared exactly as the single-row kernels prepare x.
struct GemmX {
  WeightFormat format{};
  size_t cols = 0;
  size_t m = 0;
  const Bf16X* bf16 = nullptr;   // [m], bf16 formats
  const QuantX* quant = nullptr; // [m], block formats
};

// out[i * out_stride + r - r0] = (W X[i])[r] for r in [r0, r1) (r0 % 8 == 0, r1 % 8
// == 0 or r1 == rows), bit-identical to the single-row kernels, by a register-blocked
// kernel; false (nothing written) where this format and path have none.
bool FastGemmRows(const GemmX& x, const void* w, size_t rows, size_t r0, size_t r1, float* out,
                  size_t out_stride);

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMM_ROWS_H_
