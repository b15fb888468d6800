#include "util/bf16.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "util/aligned_buffer.h"

namespace dk {
namespace {

// Reference: round-to-nearest-even done with doubles, independent of the bit trick.
float ReferenceRound(float f) {
  if (std::isnan(f) || std::isinf(f) || f == 0.0f) return f;
  int exp;
  std::frexp(static_cast<double>(f), &exp);  // f = m * 2^exp, 0.5 <= |m| < 1
  // bf16 keeps 8 significant bits; normal numbers only in this test.
  const double ulp = std::ldexp(1.0, exp - 8);
  return static_cast<float>(std::nearbyint(static_cast<double>(f) / ulp) * ulp);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3 * 2^-8 is half way between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  for (float f = -37.3f; f < 41.0f; f += 0.01731f) {
    ASSERT_EQ(RoundToBf16(f), ReferenceRound(f)) << f;
  }
}

TEST(Bf16, SpecialValues) {
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::infinity()))));
  EXPECT_EQ(Bf16ToF32(F32ToBf16(-0.0f)), 0.0f);
  // The largest float rounds up to infinity, as torch does.
  EXPECT_TRUE(std::isinf(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::max()))));
}

TEST(AlignedBuffer, AlignmentAndMove) {
  AlignedBuffer<float> a(1000);
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  a.Zero();
  a[999] = 3.0f;
  AlignedBuffer<float> b = std::move(a);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b[999], 3.0f);
  AlignedBuffer<uint8_t> huge(size_t{5} << 20, PageMode::kHugePages);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge.data()) % (size_t{2} << 20), 0u);
}

}  // namespace
}  // namespace dk
