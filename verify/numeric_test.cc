#include "verify/numeric.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dk::verify {
namespace {

Sequence Ref(std::vector<float> logits) {
  Sequence s;
  s.prompt = "p";
  s.steps.push_back({1, {1, 2, 3, 4, 5}, logits});
  return s;
}

// Values worked out by hand from verify/README.md's definition, tol(z) = ulp_bf16(z) +
// 2 u sqrt(2L + 2) max(|z1|, 1) with u = 2^-8, not from the code's expression.
TEST(NumericTest, ToleranceMatchesWorkedValues) {
  // z = 3.5: ulp 2^-6 = 0.015625; L = 16: 2/256 * sqrt(34) * 4 = 0.182217246713916
  EXPECT_NEAR(NumericTolerance(3.5, 4.0, 16), 0.197842246713916, 1e-12);
  // z = 0.5 (ulp 2^-8), |z1| < 1 counts as 1, L = 0: 2/256 * sqrt(2) = 0.011048543456040
  EXPECT_NEAR(NumericTolerance(0.5, 0.5, 0), 0.014954793456040, 1e-12);
  // z = -22.25 (ulp 2^-3 = 0.125), z1 = 22.25, L = 30: 2/256 * sqrt(62) * 22.25 = 1.368724024974710
  EXPECT_NEAR(NumericTolerance(-22.25, 22.25, 30), 1.493724024974710, 1e-12);
  // z = 1024 (ulp 8), negative top-1 counts by magnitude, L = 16
  EXPECT_NEAR(NumericTolerance(1024, -1024, 16), 8 + 2.0 / 256 * 5.830951894845301 * 1024, 1e-9);
}

// The documented coefficients of |z1|: 2 u sqrt(2L + 2) (verify/README.md states them).
TEST(NumericTest, CoefficientPerLayerCount) {
  const double z1 = 1 << 20;  // so large that the ulp term is negligible against it
  auto coefficient = [&](int layers) { return (NumericTolerance(0.75, z1, layers) - 1.0 / 256) / z1; };
  EXPECT_NEAR(coefficient(30), 0.0615, 5e-5);  // smollm2_135m
  EXPECT_NEAR(coefficient(16), 0.0456, 5e-5);  // llama32_1b
  EXPECT_NEAR(coefficient(24), 0.0552, 5e-5);  // qwen25_0_5b
  EXPECT_NEAR(coefficient(28), 0.0595, 5e-5);  // qwen3_0_6b
  EXPECT_NEAR(coefficient(18), 0.0482, 5e-5);  // gemma3_270m
  // More layers, more rounding points: never a smaller tolerance.
  for (int l = 0; l < 64; ++l) EXPECT_LT(coefficient(l), coefficient(l + 1)) << l;
}

TEST(NumericTest, PassesWithinToleranceFailsBeyond) {
  const std::vector<Sequence> ref = {Ref({4, 3.5, 3, 2, 1})};
  const double tol = NumericTolerance(4, 4, 16);
  auto ok = CheckNumeric(ref, {{{4.0f + 0.9f * static_cast<float>(tol), 3.5f, 3, 2, 1}}}, 16, 1);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->passed);
  EXPECT_NEAR(ok->max_ratio, 0.9, 1e-3);
  auto bad = CheckNumeric(ref, {{{4, 3.5, 3, 2, 1.0f + 0.5f}}}, 16, 1);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->passed);
  EXPECT_EQ(bad->prompts[0].failures, 1);
  EXPECT_EQ(bad->prompts[0].worst_id, 5u);
  EXPECT_NE(FormatNumericReport(*bad).find("numeric (teacher-forced, top-5 logits): FAIL"), std::string::npos);
  auto nan = CheckNumeric(ref, {{{NAN, 3.5, 3, 2, 1}}}, 16, 1);
  ASSERT_TRUE(nan.ok());
  EXPECT_FALSE(nan->passed);
}

TEST(NumericTest, ShapeErrors) {
  const std::vector<Sequence> ref = {Ref({4, 3.5, 3, 2, 1})};
  EXPECT_FALSE(CheckNumeric(ref, {}, 16, 1).ok());
  EXPECT_FALSE(CheckNumeric(ref, {{{4, 3}}}, 16, 1).ok());
  EXPECT_FALSE(CheckNumeric(ref, {{{4, 3.5, 3, 2, 1}}}, 16, 2).ok());
  EXPECT_FALSE(CheckNumeric({Ref({})}, {{{4, 3.5, 3, 2, 1}}}, 16, 1).ok());
}

}  // namespace
}  // namespace dk::verify
