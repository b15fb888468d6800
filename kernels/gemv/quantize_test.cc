// QuantizeWeights against the block definitions: every element's dequantized
// value is within the format's rounding bound of the weight, the scales are what
// the definition says (f16 of the f32 scale), and the f16 conversion the scales
// use is exact on every f16 value and rounds halfway cases to even.
#include "kernels/gemv/quantize.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "util/ggml_blocks.h"

namespace dk::kernels {
namespace {

using ggml::kBlockElems;

TEST(F32ToF16, ExactOnEveryF16ValueAndTiesToEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = ggml::F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(ggml::F16ToF32(ggml::F32ToF16(f)))) << h;
      continue;
    }
    ASSERT_EQ(ggml::F32ToF16(f), h) << "f16 bits " << h << " = " << f;
  }
  // Halfway between neighbours: to the even one. 1 + 2^-11 lies between 1 and
  // 1 + 2^-10; 1 + 3 * 2^-11 between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(ggml::F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(ggml::F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(ggml::F32ToF16(65520.0f), 0x7C00);  // past the largest f16: inf
  EXPECT_EQ(ggml::F32ToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(ggml::F32ToF16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: even 0
  EXPECT_EQ(ggml::F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(ggml::F32ToF16(-0.0f), 0x8000);
}

// Weights with blocks of different scales, a zero block and an exact-max block.
std::vector<bf16> Weights(size_t rows, size_t cols) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 1);
  std::vector<bf16> w(rows * cols);
  for (size_t i = 0; i < w.size(); ++i) {
    const size_t block = i / kBlockElems;
    const float scale = std::ldexp(1.0f, static_cast<int>(block % 9) - 6);
    w[i] = F32ToBf16(block == 3 ? 0.0f : normal(rng) * scale);
  }
  return w;
}

double Dequant(WeightFormat format, const uint8_t* block, size_t i, double* d_out) {
  switch (format) {
    case WeightFormat::kQ8_0: {
      auto* b = reinterpret_cast<const ggml::BlockQ8_0*>(block);
      *d_out = ggml::F16FieldToF32(b->d);
      return *d_out * b->qs[i];
    }
    case WeightFormat::kQ4_0: {
      auto* b = reinterpret_cast<const ggml::BlockQ4_0*>(block);
      *d_out = ggml::F16FieldToF32(b->d);
      return *d_out * (ggml::Nibble(b->qs, i) - 8);
    }
    case WeightFormat::kQ4_1: {
      auto* b = reinterpret_cast<const ggml::BlockQ4_1*>(block);
      *d_out = ggml::F16FieldToF32(b->d);
      return *d_out * ggml::Nibble(b->qs, i) + ggml::F16FieldToF32(b->m);
    }
    default: break;  // not a block format
  }
  return 0;
}

TEST(QuantizeWeights, EveryElementWithinItsFormatsRoundingBound) {
  const size_t rows = 5, cols = 96;
  const std::vector<bf16> w = Weights(rows, cols);
  for (WeightFormat format : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_1}) {
    SCOPED_TRACE(formats::Name(format));
    std::vector<uint8_t> q(rows * formats::RowBytes(format, cols), 0xAB);
    QuantizeWeights(format, w.data(), rows, cols, q.data());
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c0 = 0; c0 < cols; c0 += kBlockElems) {
        const uint8_t* block = q.data() + r * formats::RowBytes(format, cols) + c0 / kBlockElems * formats::BlockBytes(format);
        double amax = 0, lo = 1e30, hi = -1e30, max_signed = 0;
        for (size_t i = 0; i < kBlockElems; ++i) {
          const double x = Bf16ToF32(w[r * cols + c0 + i]);
          if (std::fabs(x) > amax) max_signed = x;
          amax = std::max(amax, std::fabs(x));
          lo = std::min(lo, x);
          hi = std::max(hi, x);
        }
        // The f32 scale of the definition, and the stored f16 one.
        const double d32 = format == WeightFormat::kQ8_0   ? amax / 127
                           : format == WeightFormat::kQ4_0 ? max_signed / -8
                                                          : (hi - lo) / 15;
        double d16 = 0;
        Dequant(format, block, 0, &d16);
        EXPECT_EQ(d16, ggml::F16ToF32(ggml::F32ToF16(static_cast<float>(d32))));
        // Rounding to the f32 grid costs at most half a step, except Q4_0's top
        // level: its levels run from -8 to 7 steps, so an element near -m (w / d
        // past 7.5) is clamped to 7 steps, at most a full step away. The f16 scale
        // (and Q4_1's f16 minimum) move each level q by at most |q| * |d16 - d32|
        // (+ the minimum's own rounding). Largest |q|: 127, 8, 15.
        const double q_max = format == WeightFormat::kQ8_0 ? 127 : format == WeightFormat::kQ4_0 ? 8 : 15;
        const double m_err = format == WeightFormat::kQ4_1 ? std::fabs(ggml::F16ToF32(ggml::F32ToF16(lo)) - lo) : 0;
        for (size_t i = 0; i < kBlockElems; ++i) {
          double unused;
          const double x = Bf16ToF32(w[r * cols + c0 + i]);
          const bool clamped = format == WeightFormat::kQ4_0 && d32 != 0 && x / d32 > 7.5;
          const double bound =
              (clamped ? 1.0 : 0.5) * std::fabs(d32) + q_max * std::fabs(d16 - d32) + m_err + 1e-12;
          EXPECT_LE(std::fabs(Dequant(format, block, i, &unused) - x), bound)
              << "row " << r << " col " << c0 + i << " w " << x;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dk::kernels
