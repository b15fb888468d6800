// The fused kernels against the unfused ones run one after the other (RmsNorm,
// Gemv / PackedGemv / QuantGemv(kInt8), SiluMul, Add), which their own tests check
// against scalar f64 / f32 references: every output must be BIT-identical, on every
// SIMD target, both bf16 GEMV paths (vdpbf16ps and widening), both int8 paths (VNNI
// and Highway), each weight format, 1 to 3 threads, odd row counts around the
// 64-row unit and the 8-row panel, misaligned inputs.
#include "kernels/gemv/gemv_fused.h"
#include "kernels/gemv/gemv_x12.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_quant_ref.h"
#include "kernels/gemv/gemv_test_matrix.h"
#include "kernels/gemv/quantize.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::Misaligned;
using testing::ExpectBitEqual;
using testing::ForEachConfiguration;
using testing::Matrix;
using testing::RandomBf16;
using testing::UnfusedGemv;

// Rows around the 8-row unit / panel and the 64-row SiLU unit; K of 1 block, odd blocks, decode size.
struct Shape {
  size_t rows, cols;
};
const Shape kShapes[] = {{1, 32}, {7, 64}, {63, 96}, {64, 32}, {65, 160}, {130, 64}, {200, 576}};
// The same rows for the K-quants, K of 1, 2, 3 and 5 super-blocks.
const Shape kSuperBlockShapes[] = {{1, 256}, {7, 512}, {63, 768}, {64, 256}, {65, 1280}, {130, 512}, {200, 1280}};

std::vector<Shape> ShapesOf(WeightFormat f) {
  if (formats::IsKQuant(f)) return {std::begin(kSuperBlockShapes), std::end(kSuperBlockShapes)};
  return {std::begin(kShapes), std::end(kShapes)};
}

TEST(FusedGemv, RmsNormGemvIsTheUnfusedLaunchesBitForBit) {
  ForEachConfiguration([](WeightFormat f, ThreadPool* pool, const GemvVariants& v) {
    for (const Shape& s : ShapesOf(f)) {
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
      const auto x = RandomBf16(s.cols, 1, 3.0f), norm = RandomBf16(s.cols, 2, 1.5f);
      std::vector<uint8_t> xs, ns;
      const bf16* xp = Misaligned(x, 2, &xs);
      const bf16* np = Misaligned(norm, 6, &ns);
      // q/k/v: three weights of different heights; and one weight with f32 output.
      Matrix m[3] = {{s.rows, s.cols, 3}, {s.rows / 2 + 1, s.cols, 4}, {s.rows + 9, s.cols, 5}};
      FusedWeight w[3] = {m[0].As(f), m[1].As(f), m[2].As(f)};
      std::vector<bf16> xn(s.cols);
      RmsNorm(xp, np, s.cols, 1e-5f, xn.data());
      std::vector<bf16> want[3], got[3];
      void* out[3];
      for (int i = 0; i < 3; ++i) {
        want[i].resize(w[i].rows);
        got[i].assign(w[i].rows, F32ToBf16(7.0f));
        UnfusedGemv(f, w[i], s.cols, xn.data(), want[i].data(), pool, v);
        out[i] = got[i].data();
      }
      RmsNormGemv(f, xp, np, 1e-5f, s.cols, w, 3, out, /*y_f32=*/false, pool, v);
      for (int i = 0; i < 3; ++i) ExpectBitEqual(want[i], got[i].data(), "bf16 y");

      std::vector<float> want32(w[2].rows), got32(w[2].rows, 7.0f);
      UnfusedGemv(f, w[2], s.cols, xn.data(), want32.data(), pool, v);
      void* out32[1] = {got32.data()};
      RmsNormGemv(f, xp, np, 1e-5f, s.cols, &w[2], 1, out32, /*y_f32=*/true, pool, v);
      ExpectBitEqual(want32, got32.data(), "f32 y");
    }
  });
}

TEST(FusedGemv, RmsNormGemvSiluMulIsTheUnfusedLaunchesBitForBit) {
  ForEachConfiguration([](WeightFormat f, ThreadPool* pool, const GemvVariants& v) {
    for (const Shape& s : ShapesOf(f)) {
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
      const auto x = RandomBf16(s.cols, 11, 3.0f), norm = RandomBf16(s.cols, 12, 1.5f);
      Matrix gate(s.rows, s.cols, 13), up(s.rows, s.cols, 14);
      const FusedWeight wg = gate.As(f), wu = up.As(f);
      std::vector<bf16> xn(s.cols), g(s.rows), u(s.rows), want(s.rows), got(s.rows, F32ToBf16(7.0f));
      RmsNorm(x.data(), norm.data(), s.cols, 1e-5f, xn.data());
      UnfusedGemv(f, wg, s.cols, xn.data(), g.data(), pool, v);
      UnfusedGemv(f, wu, s.cols, xn.data(), u.data(), pool, v);
      SiluMul(g.data(), u.data(), s.rows, want.data());
      RmsNormGemvSiluMul(f, x.data(), norm.data(), 1e-5f, s.cols, wg, wu, got.data(), pool, v);
      ExpectBitEqual(want, got.data(), "silu(gate) * up");
    }
  });
}

TEST(FusedGemv, GemvAddIsTheUnfusedLaunchesBitForBit) {
  ForEachConfiguration([](WeightFormat f, ThreadPool* pool, const GemvVariants& v) {
    for (const Shape& s : ShapesOf(f)) {
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
      const auto x = RandomBf16(s.cols, 21, 2.0f), residual = RandomBf16(s.rows, 22, 4.0f);
      std::vector<uint8_t> rs;
      const bf16* rp = Misaligned(residual, 10, &rs);
      Matrix m(s.rows, s.cols, 23);
      const FusedWeight w = m.As(f);
      std::vector<bf16> o(s.rows), want(s.rows), got(s.rows, F32ToBf16(7.0f));
      UnfusedGemv(f, w, s.cols, x.data(), o.data(), pool, v);
      Add(rp, o.data(), s.rows, want.data());
      GemvAdd(f, x.data(), s.cols, w, rp, got.data(), pool, v);
      ExpectBitEqual(want, got.data(), "residual + W x");
    }
  });
}

}  // namespace
}  // namespace dk::kernels
