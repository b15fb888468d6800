#include "kernels/gemv/gemv_quant.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv_quant_ref.h"
#include "kernels/testing/targets.h"
#include "util/ggml_blocks.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::Misaligned;
using testing::RandomF32;
using ref::RandomBlocks;

// Tolerances (u = 2^-24, the f32 unit roundoff; A[n] = sum_k mag[n, k] |x_k| from
// ref::QuantGemv, which bounds every partial sum a kernel forms, offsets of Q4_0 /
// Q4_1 included):
//  * kInt8 vs the reference that quantizes x the same way: each block's dot product
//    is exact in int32, so the only errors are f32 roundings: the scale dw * dx and
//    the FMA per block (B = cols / 32 blocks; each accumulator lane takes at most B
//    of them), the -8 / m term (dx * sum q, times dw or m, summed over B blocks),
//    and the final reduction (<= 4 levels + 2 adds). First order that is
//    <= (B + 10) u A; we allow 2 (B + 16) u A. Q5_0 / Q4_K / Q6_K: B counts the
//    32-element activation blocks; a sub-block's scale (d sc dx) is two or three
//    roundings, and the -16 / -32 / minimum terms are one product per sub-block
//    summed like the FMAs, so first order <= (2 B + 12) u A, inside the same bound.
//  * kFloat vs the exact f64 product: dequantizing is exact (Q8_0, Q4_0) or one or
//    two roundings (Q4_1's d q + m); each block half goes to its own accumulator, so
//    a lane takes cols / (2 L) products for L lanes (cols / 2 on the 1-lane scalar
//    target), one FMA (or mul + add) rounding each, plus the reduction (<= 6 adds):
//    <= (cols / 2 + 8) u A; we allow (cols / 2 + 32) u A = 2 (cols / 4 + 16) u A.
//  * kInt8 vs the exact f64 product, additionally: |x - dx q| <= dx (1/2 + 256 u)
//    per element (q rounds x * fl(1/dx) to nearest, and x * fl(1/dx) is within
//    256 u of x / dx for |x / dx| <= 127), so |sum w (x - x^)| <= (1/2 + 256 u)
//    sum_k |w_k| dx_b(k).
//  * bf16 y: one more rounding to nearest of the f32 result, |ref| / 256.
// These are worst-case bounds; the largest error seen over all targets and cases
// (f32 y) was 2.6% of the tight kInt8 bound, 27% of the loose one (the activation
// rounding dominates it) and 1.4% of the kFloat bound. A wrong nibble order or a
// dropped minimum misses by 10^3-10^4 times the bound.
constexpr double kU = 0x1p-24;

struct Shape {
  size_t rows, cols;
};
// Odd row counts around the 4-row task split, K of 1, 2 and 3 blocks and a
// decode-sized K with an odd block count; K past whole 16-block chunks by 1, 2, 4
// (Gemma 3's 640) and 15 blocks (the chunked kernels' tails).
const Shape kShapes[] = {{1, 32},  {3, 64},   {5, 96},  {7, 32},   {13, 64},
                         {17, 96}, {33, 160}, {1, 2080}, {9, 2080}, {65, 2080},
                         {3, 1088}, {4, 512}, {6, 640}, {11, 1504}};

// The same for the K-quants' 256-element super-blocks: 1, 2, 3, 5 and 9 of them.
const Shape kSuperBlockShapes[] = {{1, 256},  {3, 512},  {5, 768},  {7, 256},  {13, 512},
                                   {17, 768}, {33, 256}, {9, 2304}, {4, 1280}, {65, 2304}};

const WeightFormat kFormats[] = {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_1,
                                 WeightFormat::kQ5_0, WeightFormat::kQ4_K, WeightFormat::kQ6_K};

std::vector<Shape> ShapesOf(WeightFormat format) {
  if (formats::IsKQuant(format)) return {std::begin(kSuperBlockShapes), std::end(kSuperBlockShapes)};
  return {std::begin(kShapes), std::end(kShapes)};
}

// Reference values for one x, as the strategy and the x type see it.
struct Expected {
  std::vector<double> y, tol;
};

Expected Reference(WeightFormat format, QuantActivations act, const std::vector<uint8_t>& w,
                   const Shape& s, const std::vector<float>& x) {
  const std::vector<double> x64(x.begin(), x.end());
  std::vector<double> abs_exact;
  Expected e;
  e.y = ref::QuantGemv(format, w.data(), s.rows, s.cols, x64.data(), &abs_exact);
  e.tol.resize(s.rows);
  if (act == QuantActivations::kFloat) {
    for (size_t n = 0; n < s.rows; ++n) {
      e.tol[n] = 2.0 * (s.cols / 4.0 + 16) * kU * abs_exact[n] + 1e-30;
    }
    return e;
  }
  // kInt8: first the tight check against the same quantized activations (rows
  // entries), then the looser one against the exact product (rows more).
  std::vector<double> scales, abs_q, w_scale_sum;
  const std::vector<double> xq = ref::QuantizeActivations(x.data(), s.cols, &scales);
  const std::vector<double> yq = ref::QuantGemv(format, w.data(), s.rows, s.cols, xq.data(),
                                                &abs_q, &scales, &w_scale_sum);
  const std::vector<double> exact = std::move(e.y);
  const double blocks = s.cols / 32.0;
  e.y = yq;
  for (size_t n = 0; n < s.rows; ++n) {
    e.tol[n] = 2.0 * (blocks + 16) * kU * abs_q[n] + 1e-30;
    const double quant_err = (0.5 + 256 * kU) * w_scale_sum[n];
    EXPECT_LE(std::fabs(yq[n] - exact[n]), quant_err)
        << "the reference's own activation quantization exceeds its bound, row " << n;
  }
  for (size_t n = 0; n < s.rows; ++n) {
    e.y.push_back(exact[n]);
    e.tol.push_back(e.tol[n] + (0.5 + 256 * kU) * w_scale_sum[n]);
  }
  return e;
}

void ExpectClose(const Expected& e, size_t rows, float y, size_t n, const char* what) {
  for (size_t i = n; i < e.y.size(); i += rows) {  // kInt8: tight, then loose vs exact
    ASSERT_NEAR(y, e.y[i], e.tol[i]) << what << " row " << n << (i >= rows ? " (exact)" : "");
  }
}
void ExpectClose(const Expected& e, size_t rows, bf16 y, size_t n, const char* what) {
  for (size_t i = n; i < e.y.size(); i += rows) {
    const double tol = std::fabs(e.y[i]) / 256 + e.tol[i];
    ASSERT_NEAR(Bf16ToF32(y), e.y[i], tol) << what << " row " << n << (i >= rows ? " (exact)" : "");
  }
}

void CheckAllVariants(WeightFormat format, QuantActivations act, const Shape& s, const GemvVariants& v) {
  const std::vector<uint8_t> w = RandomBlocks(format, s.rows, s.cols, 11 + s.rows * 7 + s.cols);
  std::vector<float> xf = RandomF32(s.cols, 5 + s.cols, 2.0f);
  if (s.cols >= 64) std::fill(xf.begin() + 32, xf.begin() + 64, 0.0f);  // a zero block: dx = 0
  std::vector<bf16> xb(s.cols);
  std::vector<float> xb_as_f32(s.cols);
  for (size_t k = 0; k < s.cols; ++k) {
    xb[k] = F32ToBf16(xf[k]);
    xb_as_f32[k] = Bf16ToF32(xb[k]);
  }
  const Expected ref_f = Reference(format, act, w, s, xf);
  const Expected ref_b = Reference(format, act, w, s, xb_as_f32);

  ThreadPool pool2(2), pool3(3);
  for (size_t offset : {size_t{0}, size_t{1}, size_t{6}}) {
    std::vector<uint8_t> sw, sxf, sxb;
    const uint8_t* wp = Misaligned(w, offset, &sw);
    const float* xfp = Misaligned(xf, offset == 0 ? 0 : 4, &sxf);
    const bf16* xbp = Misaligned(xb, offset == 0 ? 0 : 2, &sxb);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      std::vector<float> yf(s.rows + 1, -7.0f);
      std::vector<bf16> yb(s.rows + 1, bf16{0x7f7f});
      QuantGemv(format, act, wp, s.rows, s.cols, xfp, yf.data(), pool, v);
      for (size_t n = 0; n < s.rows; ++n) ExpectClose(ref_f, s.rows, yf[n], n, "x f32, y f32");
      EXPECT_EQ(yf[s.rows], -7.0f) << "wrote past the end of y";
      QuantGemv(format, act, wp, s.rows, s.cols, xbp, yf.data(), pool, v);
      for (size_t n = 0; n < s.rows; ++n) ExpectClose(ref_b, s.rows, yf[n], n, "x bf16, y f32");
      QuantGemv(format, act, wp, s.rows, s.cols, xfp, yb.data(), pool, v);
      for (size_t n = 0; n < s.rows; ++n) ExpectClose(ref_f, s.rows, yb[n], n, "x f32, y bf16");
      QuantGemv(format, act, wp, s.rows, s.cols, xbp, yb.data(), pool, v);
      for (size_t n = 0; n < s.rows; ++n) ExpectClose(ref_b, s.rows, yb[n], n, "x bf16, y bf16");
      EXPECT_EQ(yb[s.rows].bits, 0x7f7f) << "wrote past the end of y";
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

void CheckEveryTarget(QuantActivations act, const GemvVariants& v = GemvVariants()) {
  ForEachTarget([act, &v](const char*) {
    for (WeightFormat format : kFormats) {
      for (const Shape& s : ShapesOf(format)) {
        SCOPED_TRACE(::testing::Message() << formats::Name(format) << " " << s.rows << "x"
                                          << s.cols);
        CheckAllVariants(format, act, s, v);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

TEST(QuantGemv, Int8ActivationsMatchReferenceOnEveryTarget) {
  for (bool vnni : {true, false}) {
    GemvVariants v;
    v.vnni = vnni;
    SCOPED_TRACE(vnni ? "vpdpbusd allowed" : "vpdpbusd off");
    CheckEveryTarget(QuantActivations::kInt8, v);
    if (HasFatalFailure()) break;
  }
}

TEST(QuantGemv, FloatActivationsMatchReferenceOnEveryTarget) {
  CheckEveryTarget(QuantActivations::kFloat);
}

TEST(QuantGemv, RowBytesAreGgufs) {
  EXPECT_EQ(formats::RowBytes(WeightFormat::kQ8_0, 2048), 64u * 34u);
  EXPECT_EQ(formats::RowBytes(WeightFormat::kQ4_0, 2048), 64u * 18u);
  EXPECT_EQ(formats::RowBytes(WeightFormat::kQ4_1, 2048), 64u * 20u);
  EXPECT_EQ(formats::RowBytes(WeightFormat::kQ5_0, 2048), 64u * 22u);
  EXPECT_EQ(formats::RowBytes(WeightFormat::kQ4_K, 2048), 8u * 144u);
  EXPECT_EQ(formats::RowBytes(WeightFormat::kQ6_K, 2048), 8u * 210u);
}

TEST(QuantGemv, ReportsThePaths) {
  GemvVariants off;
  off.vnni = false;
  EXPECT_FALSE(QuantGemvUsesVnni(off));
  std::printf("quantized GEMV: int8 x %s, float x %s\n",
              QuantGemvTargetName(QuantActivations::kInt8),
              QuantGemvTargetName(QuantActivations::kFloat));
}

TEST(QuantGemv, ZeroRowsIsANoOp) {
  std::vector<float> x(32, 1.0f), y(1, 5.0f);
  QuantGemv(WeightFormat::kQ4_0, QuantActivations::kInt8, nullptr, 0, 32, x.data(), y.data(),
            nullptr);
  EXPECT_EQ(y[0], 5.0f);
}

}  // namespace
}  // namespace dk::kernels
