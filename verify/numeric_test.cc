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

TEST(NumericTest, ToleranceIsUlpPlusScaledRandomWalk) {
  // z = 3.5: bf16 ulp 2^-6; 16 layers: sqrt(34) rounding points; top1 4.
  EXPECT_NEAR(NumericTolerance(3.5, 4.0, 16), 1.0 / 64 + 2.0 / 256 * std::sqrt(34.0) * 4.0, 1e-12);
  // small top-1 logits use a scale of 1
  EXPECT_NEAR(NumericTolerance(0.5, 0.5, 0), 1.0 / 256 + 2.0 / 256 * std::sqrt(2.0), 1e-12);
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
