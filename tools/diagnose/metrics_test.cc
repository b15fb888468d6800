#include "tools/diagnose/metrics.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dk::diagnose {
namespace {

using ::testing::HasSubstr;

TEST(CompareTest, Identical) {
  const std::vector<float> a = {1, -2, 3};
  const Metrics m = Compare(a.data(), a.data(), 3);
  EXPECT_DOUBLE_EQ(m.cosine, 1.0);
  EXPECT_EQ(m.max_abs, 0.0);
  EXPECT_EQ(m.rel_l2, 0.0);
  EXPECT_DOUBLE_EQ(m.ref_norm, std::sqrt(14.0));
  EXPECT_TRUE(m.finite);
}

TEST(CompareTest, HandMade) {
  const std::vector<float> a = {1, 0, 0, 2};
  const std::vector<float> b = {1, 1, 0, 1};
  const Metrics m = Compare(a.data(), b.data(), 4);
  // <a,b> = 3, |a| = sqrt(5), |b| = sqrt(3); a - b = (0, -1, 0, 1).
  EXPECT_NEAR(m.cosine, 3 / (std::sqrt(5.0) * std::sqrt(3.0)), 1e-12);
  EXPECT_EQ(m.max_abs, 1.0);
  EXPECT_EQ(m.argmax, 1);  // the first of the two largest differences
  EXPECT_NEAR(m.rel_l2, std::sqrt(2.0) / std::sqrt(3.0), 1e-12);
}

TEST(CompareTest, OppositeAndZero) {
  const std::vector<float> a = {1, 2}, b = {-1, -2}, z = {0, 0};
  EXPECT_NEAR(Compare(a.data(), b.data(), 2).cosine, -1.0, 1e-12);
  EXPECT_EQ(Compare(z.data(), z.data(), 2).cosine, 1.0);
  EXPECT_EQ(Compare(a.data(), z.data(), 2).cosine, 0.0);
  EXPECT_TRUE(std::isinf(Compare(a.data(), z.data(), 2).rel_l2));
}

TEST(CompareTest, NonFinite) {
  const std::vector<float> a = {1, std::numeric_limits<float>::quiet_NaN()}, b = {1, 1};
  const Metrics m = Compare(a.data(), b.data(), 2);
  EXPECT_FALSE(m.finite);
  EXPECT_EQ(m.argmax, 1);
  EXPECT_THAT(FormatTable({{"3", m}}), HasSubstr("NON-FINITE"));
}

TEST(FormatTableTest, OneLinePerRow) {
  const std::vector<float> a = {1, 2}, b = {1, 2.5f};
  const std::string t =
      FormatTable({{"emb", Compare(a.data(), a.data(), 2)}, {"0", Compare(a.data(), b.data(), 2)}});
  EXPECT_THAT(t, HasSubstr("layer"));
  EXPECT_THAT(t, HasSubstr("cosine"));
  EXPECT_THAT(t, HasSubstr("\nemb "));
  EXPECT_THAT(t, HasSubstr("\n0 "));
  EXPECT_THAT(t, HasSubstr("0.5"));  // max-abs of row 0
  int lines = 0;
  for (char c : t) lines += c == '\n';
  EXPECT_EQ(lines, 4);  // header, rule, two rows
}

TEST(CompareTopKTest, Cases) {
  EXPECT_EQ(CompareTopK({1, 2, 3}, {1, 2, 3}), "same");
  EXPECT_EQ(CompareTopK({2, 1, 3}, {1, 2, 3}), "same set, different order");
  EXPECT_EQ(CompareTopK({1, 9, 3}, {1, 2, 3}), "overlap 2/3");
}

}  // namespace
}  // namespace dk::diagnose
