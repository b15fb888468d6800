#include "tools/perplexity/kld.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace dk::perplexity {
namespace {

std::vector<float> Logs(std::vector<double> p, double shift = 0) {
  std::vector<float> out;
  for (double x : p) out.push_back(static_cast<float>(std::log(x) + shift));
  return out;
}

TEST(ComparePosition, HandMadeDistributions) {
  std::vector<double> scratch;
  // P_ref = (1/2, 1/4, 1/4), P = (1/4, 1/2, 1/4):
  // KL = 1/2 ln 2 + 1/4 ln(1/2) + 0 = ln(2) / 4.
  // The stage's logits shifted by 3: the same distribution.
  auto p = ComparePosition(Logs({0.25, 0.5, 0.25}, 3.0), Logs({0.5, 0.25, 0.25}), 1, &scratch);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->kld, std::log(2.0) / 4, 1e-7);
  EXPECT_FALSE(p->same_top1);
  EXPECT_NEAR(p->nll, std::log(2.0), 1e-7);      // -ln(1/2)
  EXPECT_NEAR(p->ref_nll, std::log(4.0), 1e-7);  // -ln(1/4)
  // KL is not symmetric: KL(P || P_ref) = 1/4 ln(1/2) + 1/2 ln 2 = ln(2) / 4 too here,
  // so take P_ref = (0.9, 0.1), P = (0.5, 0.5): 0.9 ln 1.8 + 0.1 ln 0.2.
  p = ComparePosition(Logs({0.5, 0.5}), Logs({0.9, 0.1}), 0, &scratch);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->kld, 0.9 * std::log(1.8) + 0.1 * std::log(0.2), 1e-7);
  EXPECT_TRUE(p->same_top1);  // a tie goes to the smaller id: 0 both sides
}

TEST(ComparePosition, EqualDistributionsAndInfinities) {
  std::vector<double> scratch;
  auto p = ComparePosition(Logs({0.1, 0.7, 0.2}), Logs({0.1, 0.7, 0.2}), 2, &scratch);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kld, 0);
  EXPECT_TRUE(p->same_top1);
  EXPECT_NEAR(p->nll, -std::log(0.2), 1e-6);
  const float inf = std::numeric_limits<float>::infinity();
  // A token the reference rules out adds nothing; one the stage rules out, infinity.
  p = ComparePosition({0.f, 0.f, 0.f}, {0.f, 0.f, -inf}, 0, &scratch);
  ASSERT_TRUE(p.ok());
  // P_ref = (1/2, 1/2, 0), P = (1/3, 1/3, 1/3): KL = ln(3/2).
  EXPECT_NEAR(p->kld, std::log(1.5), 1e-7);
  p = ComparePosition({0.f, -inf}, {0.f, 0.f}, 0, &scratch);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(std::isinf(p->kld));
}

TEST(ComparePosition, BadInputIsRefused) {
  std::vector<double> scratch;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(ComparePosition({0.f, 1.f}, {0.f, 1.f, 2.f}, 0, &scratch).ok());
  EXPECT_FALSE(ComparePosition({0.f, 1.f}, {0.f, 1.f}, 2, &scratch).ok());
  EXPECT_FALSE(ComparePosition({0.f, nan}, {0.f, 1.f}, 0, &scratch).ok());
  EXPECT_FALSE(ComparePosition({0.f, 1.f}, {std::numeric_limits<float>::infinity(), 1.f}, 0, &scratch).ok());
  EXPECT_FALSE(ComparePosition({}, {}, 0, &scratch).ok());
}

TEST(Quantile, LinearBetweenOrderStatistics) {
  std::vector<double> v;
  for (int i = 100; i >= 0; --i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.99), 99);
  EXPECT_DOUBLE_EQ(Quantile({1, 2}, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(Quantile({3, 1, 2, 10}, 0.99), 3 + 7 * 0.97);
  EXPECT_DOUBLE_EQ(Quantile({5}, 0.99), 5);
}

TEST(KldAccumulator, Summary) {
  KldAccumulator acc;
  EXPECT_FALSE(acc.Finish().ok());
  acc.Add({0.1, true, std::log(4.0), std::log(2.0)});
  acc.Add({0.3, false, std::log(16.0), std::log(8.0)});
  auto s = acc.Finish();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->positions, 2);
  EXPECT_NEAR(s->mean_kld, 0.2, 1e-12);
  EXPECT_NEAR(s->p99_kld, 0.1 + 0.2 * 0.99, 1e-12);
  EXPECT_DOUBLE_EQ(s->max_kld, 0.3);
  EXPECT_DOUBLE_EQ(s->top1, 0.5);
  EXPECT_NEAR(s->ppl, 8.0, 1e-9);      // exp((ln 4 + ln 16) / 2)
  EXPECT_NEAR(s->ref_ppl, 4.0, 1e-9);  // exp((ln 2 + ln 8) / 2)
  EXPECT_NEAR(s->ppl_ratio, 2.0, 1e-9);
}

}  // namespace
}  // namespace dk::perplexity
