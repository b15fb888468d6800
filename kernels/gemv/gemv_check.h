// Test helper: a bf16-weight GEMV kernel checked against the f64 reference of
// gemv_ref.h for f32 and bf16 x and y, aligned and misaligned inputs, with and
// without a pool (tests only).
#ifndef DK_KERNELS_GEMV_GEMV_CHECK_H_
#define DK_KERNELS_GEMV_GEMV_CHECK_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_ref.h"
#include "kernels/testing/targets.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels::testing {

inline void ExpectClose(const std::vector<double>& ref, const std::vector<double>& abs_sum,
                        const float* y, size_t rows, const char* what) {
  for (size_t n = 0; n < rows; ++n) {
    const double tol = 1e-5 * abs_sum[n] + 1e-6;
    ASSERT_NEAR(y[n], ref[n], tol) << what << " row " << n;
  }
}

inline void ExpectClose(const std::vector<double>& ref, const std::vector<double>& abs_sum,
                        const bf16* y, size_t rows, const char* what) {
  for (size_t n = 0; n < rows; ++n) {
    // One bf16 rounding of a value within float error of the reference.
    const double tol = std::fabs(ref[n]) / 256 + 1e-5 * abs_sum[n] + 1e-6;
    ASSERT_NEAR(Bf16ToF32(y[n]), ref[n], tol) << what << " row " << n;
  }
}

// Runs `kernel(w, rows, cols, x, y, pool)` for f32/bf16 x and y, aligned and
// misaligned inputs, with and without a pool, and checks against the f64
// reference; `pack`: w is passed in the packed panel layout of gemv.h.
template <typename Kernel>
void CheckAgainstReference(size_t rows, size_t cols, const Kernel& kernel, bool pack) {
  const std::vector<bf16> w = RandomBf16(rows * cols, 1 + rows * 31 + cols);
  const std::vector<float> xf = RandomF32(cols, 7 + cols, 2.0f);
  std::vector<bf16> xb(cols);
  std::vector<float> xb_as_f32(cols);
  for (size_t k = 0; k < cols; ++k) {
    xb[k] = F32ToBf16(xf[k]);
    xb_as_f32[k] = Bf16ToF32(xb[k]);
  }
  std::vector<double> abs_f, abs_b;
  const auto ref_f = ref::Gemv(w.data(), rows, cols, xf.data(), &abs_f);
  const auto ref_b = ref::Gemv(w.data(), rows, cols, xb_as_f32.data(), &abs_b);

  std::vector<bf16> weights = w;
  if (pack) {
    weights.assign(PackedGemvElements(rows, cols), bf16{0xffff});
    PackGemvWeights(w.data(), rows, cols, weights.data());
  }
  ThreadPool pool2(2), pool3(3);
  for (size_t offset : {size_t{0}, size_t{2}, size_t{6}}) {
    std::vector<uint8_t> sw, sxf, sxb;
    const bf16* wp = Misaligned(weights, offset, &sw);
    const float* xfp = Misaligned(xf, offset == 0 ? 0 : 4, &sxf);
    const bf16* xbp = Misaligned(xb, offset, &sxb);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      std::vector<float> yf(rows + 1, -7.0f);
      std::vector<bf16> yb(rows + 1, bf16{0x7f7f});
      kernel(wp, rows, cols, xfp, yf.data(), pool);
      ExpectClose(ref_f, abs_f, yf.data(), rows, "x f32, y f32");
      EXPECT_EQ(yf[rows], -7.0f) << "wrote past the end of y";
      kernel(wp, rows, cols, xbp, yf.data(), pool);
      ExpectClose(ref_b, abs_b, yf.data(), rows, "x bf16, y f32");
      kernel(wp, rows, cols, xfp, yb.data(), pool);
      ExpectClose(ref_f, abs_f, yb.data(), rows, "x f32, y bf16");
      kernel(wp, rows, cols, xbp, yb.data(), pool);
      ExpectClose(ref_b, abs_b, yb.data(), rows, "x bf16, y bf16");
      EXPECT_EQ(yb[rows].bits, 0x7f7f) << "wrote past the end of y";
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace dk::kernels::testing

#endif  // DK_KERNELS_GEMV_GEMV_CHECK_H_
