// Scalar f64 reference for the GEMV kernels (tests only).
#ifndef DK_KERNELS_GEMV_GEMV_REF_H_
#define DK_KERNELS_GEMV_GEMV_REF_H_

#include <cstddef>
#include <vector>

#include "util/bf16.h"

namespace dk::kernels::ref {

// Returns y[n] = sum_k W[n, k] x[k] in double, and sum_k |W[n, k] x[k]| in `abs_sum`
// (the scale of the rounding error a float accumulation may make).
inline std::vector<double> Gemv(const bf16* w, size_t rows, size_t cols,
                                const float* x, std::vector<double>* abs_sum) {
  std::vector<double> y(rows, 0.0);
  abs_sum->assign(rows, 0.0);
  for (size_t n = 0; n < rows; ++n) {
    for (size_t k = 0; k < cols; ++k) {
      const double p = static_cast<double>(Bf16ToF32(w[n * cols + k])) * x[k];
      y[n] += p;
      (*abs_sum)[n] += p < 0 ? -p : p;
    }
  }
  return y;
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_GEMV_GEMV_REF_H_
