#include "kernels/gemv/gemv_ksplit.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_ref.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::Misaligned;
using testing::RandomBf16;
using testing::RandomF32;

struct Shape {
  size_t rows, cols, k_chunk;
};
// Odd row counts (partial 8-row panels, uneven thread splits), one and several
// chunks, and the npu2 case: K=8192 in chunks of 512.
const Shape kShapes[] = {{1, 32, 32},   {3, 64, 32},    {5, 96, 32},    {9, 512, 512},
                         {13, 1024, 512}, {17, 1536, 256}, {130, 8192, 512}};

// The f64 reference with the float-error bound of gemv_test.cc, for y of either type.
void ExpectClose(const std::vector<double>& ref, const std::vector<double>& abs_sum, const float* y,
                 size_t rows) {
  for (size_t n = 0; n < rows; ++n) ASSERT_NEAR(y[n], ref[n], 1e-5 * abs_sum[n] + 1e-6) << "row " << n;
}
void ExpectClose(const std::vector<double>& ref, const std::vector<double>& abs_sum, const bf16* y,
                 size_t rows) {
  for (size_t n = 0; n < rows; ++n) {
    ASSERT_NEAR(Bf16ToF32(y[n]), ref[n], std::fabs(ref[n]) / 256 + 1e-5 * abs_sum[n] + 1e-6) << "row " << n;
  }
}

TEST(KSplitGemv, MatchesReferenceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (const Shape& s : kShapes) {
      for (bool packed : {false, true}) {
        SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " chunk " << s.k_chunk
                                          << (packed ? " packed" : " row-major"));
        const std::vector<bf16> w = RandomBf16(s.rows * s.cols, 11 + s.rows + s.cols);
        const std::vector<float> xf = RandomF32(s.cols, 3 + s.cols, 2.0f);
        std::vector<bf16> xb(s.cols);
        std::vector<float> xb_f32(s.cols);
        for (size_t k = 0; k < s.cols; ++k) {
          xb[k] = F32ToBf16(xf[k]);
          xb_f32[k] = Bf16ToF32(xb[k]);
        }
        std::vector<double> abs_f, abs_b;
        const auto ref_f = ref::Gemv(w.data(), s.rows, s.cols, xf.data(), &abs_f);
        const auto ref_b = ref::Gemv(w.data(), s.rows, s.cols, xb_f32.data(), &abs_b);
        std::vector<bf16> weights = w;
        if (packed) {
          weights.assign(PackedGemvElements(s.rows, s.cols), bf16{0xffff});
          PackGemvWeights(w.data(), s.rows, s.cols, weights.data());
        }
        ThreadPool pool2(2), pool3(3);
        for (size_t offset : {size_t{0}, size_t{2}, size_t{6}}) {
          std::vector<uint8_t> sw, sxf, sxb;
          const bf16* wp = Misaligned(weights, offset, &sw);
          const float* xfp = Misaligned(xf, offset == 0 ? 0 : 4, &sxf);
          const bf16* xbp = Misaligned(xb, offset, &sxb);
          for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
            std::vector<float> yf(s.rows + 1, -7.0f);
            std::vector<bf16> yb(s.rows + 1, bf16{0x7f7f});
            KSplitGemv(wp, packed, s.rows, s.cols, s.k_chunk, xfp, yf.data(), pool);
            ExpectClose(ref_f, abs_f, yf.data(), s.rows);
            KSplitGemv(wp, packed, s.rows, s.cols, s.k_chunk, xbp, yf.data(), pool);
            ExpectClose(ref_b, abs_b, yf.data(), s.rows);
            EXPECT_EQ(yf[s.rows], -7.0f) << "wrote past the end of y";
            KSplitGemv(wp, packed, s.rows, s.cols, s.k_chunk, xfp, yb.data(), pool);
            ExpectClose(ref_f, abs_f, yb.data(), s.rows);
            KSplitGemv(wp, packed, s.rows, s.cols, s.k_chunk, xbp, yb.data(), pool);
            ExpectClose(ref_b, abs_b, yb.data(), s.rows);
            EXPECT_EQ(yb[s.rows].bits, 0x7f7f) << "wrote past the end of y";
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  });
}

// What makes it a K-split GEMV: each chunk's sum is an f32 partial, and the
// partials are added in chunk order. Row 0 puts 2^25 in chunk 0, 1 in chunk 1 and
// -2^25 in chunk 2 (one element each, so each partial is exact): in f32, 2^25 + 1
// rounds back to 2^25, so the K-split sum is exactly 0, where the exact sum is 1.
// Row 1 has the same three elements, the two large ones cancelling inside chunk 0:
// exactly 1.
TEST(KSplitGemv, AddsTheChunkPartialsInChunkOrderInF32) {
  ForEachTarget([](const char*) {
    const size_t cols = 96;
    std::vector<bf16> w(2 * cols, F32ToBf16(0.0f));
    w[0] = F32ToBf16(33554432.0f);  // 2^25
    w[32 + 1] = F32ToBf16(1.0f);
    w[64] = F32ToBf16(-33554432.0f);
    w[cols + 0] = F32ToBf16(33554432.0f);
    w[cols + 16] = F32ToBf16(-33554432.0f);
    w[cols + 32 + 1] = F32ToBf16(1.0f);
    const std::vector<float> x(cols, 1.0f);
    std::vector<bf16> packed(PackedGemvElements(2, cols));
    PackGemvWeights(w.data(), 2, cols, packed.data());
    for (bool is_packed : {false, true}) {
      SCOPED_TRACE(is_packed ? "packed" : "row-major");
      float y[2] = {-1, -1};
      KSplitGemv(is_packed ? packed.data() : w.data(), is_packed, 2, cols, 32, x.data(), y, nullptr);
      EXPECT_EQ(y[0], 0.0f);
      EXPECT_EQ(y[1], 1.0f);
    }
  });
}

TEST(KSplitGemv, ShapeCheck) {
  EXPECT_TRUE(KSplitGemvShapeOk(8192, 512));
  EXPECT_TRUE(KSplitGemvShapeOk(64, 32));
  EXPECT_FALSE(KSplitGemvShapeOk(4864, 512));  // Qwen2.5's down: no multiple of 512
  EXPECT_FALSE(KSplitGemvShapeOk(96, 48));     // chunk no multiple of 32
  EXPECT_FALSE(KSplitGemvShapeOk(96, 0));
}

}  // namespace
}  // namespace dk::kernels
