#include "tools/bench/bandwidth_modes.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dk::bench {
namespace {

TEST(ModeSplit, SplitsAtTheLargestGapBetweenNeighbours) {
  // Two modes, as the AMD EPYC shows them: ~46-49 and ~80-84 GB/s, out of order.
  const double split = ModeSplit({82, 47, 80, 46, 84, 49, 81});
  EXPECT_DOUBLE_EQ(split, std::sqrt(49.0 * 80.0));
}

TEST(ModeSplit, OneModeHasNoSplit) {
  EXPECT_EQ(ModeSplit({80, 82, 84, 79, 90}), 0.0);   // largest ratio 90/84 < 1.3
  EXPECT_EQ(ModeSplit({47, 46, 49, 55, 58}), 0.0);   // a fixed 45 GB/s would cut nothing either
  EXPECT_EQ(ModeSplit({60}), 0.0);
  EXPECT_EQ(ModeSplit({}), 0.0);
}

TEST(ModeSplit, IgnoresMissingSamples) {
  EXPECT_DOUBLE_EQ(ModeSplit({0, 40, -1, 60}), std::sqrt(40.0 * 60.0));
  EXPECT_EQ(ModeSplit({0, 0, 50}), 0.0);
}

TEST(ModeSplit, TheGapMustExceedTheThreshold) {
  EXPECT_EQ(ModeSplit({100, 100 * kModeGap}), 0.0);
  EXPECT_GT(ModeSplit({100, 100 * kModeGap * 1.01}), 0.0);
}

}  // namespace
}  // namespace dk::bench
