#include "kernels/bandwidth/bandwidth.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

TEST(Bandwidth, StreamSumIsExactOnIntegersOnEveryTarget) {
  testing::ForEachTarget([](const char*) {
    for (size_t n : {0, 1, 15, 16, 63, 64, 65, 1000, 4097}) {
      std::vector<float> v(n);
      double expect = 0;
      for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<float>(i % 7) - 3.0f;
        expect += v[i];
      }
      ASSERT_EQ(StreamSum(v.data(), n), static_cast<float>(expect)) << n;
    }
  });
}

TEST(Bandwidth, MeasuresAPlausibleFigure) {
  ThreadPool pool(2);
  BandwidthOptions options;
  options.bytes = 64 << 20;
  options.passes = 3;
  const double gbs = MeasureReadBandwidth(&pool, options);
  // Anything from a slow VM to a server socket; zero or absurd means a broken timer.
  EXPECT_GT(gbs, 0.5);
  EXPECT_LT(gbs, 2000.0);
}

}  // namespace
}  // namespace dk::kernels
