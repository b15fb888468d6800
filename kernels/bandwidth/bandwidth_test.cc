#include "kernels/bandwidth/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
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

// The figure against a bound taken from this machine in the same run: a streaming
// copy of the same size on the same threads, timed here with its own clock. A copy
// moves every byte in and out, so bytes copied per second never beat bytes read per
// second by much, and a read that is not even an eighth of the copy is no real read;
// a wrong byte count, unit or timer in the probe lands outside [0.8, 8].
TEST(Bandwidth, AgreesWithAStreamingCopyOfTheSameRun) {
  ThreadPool pool(2);
  BandwidthOptions options;
  options.bytes = size_t{256} << 20;  // 8x a 32 MiB last-level cache
  options.passes = 1;
  std::vector<char> src(options.bytes, 1), dst(options.bytes, 0);
  auto copy_gbs = [&] {
    const auto start = std::chrono::steady_clock::now();
    pool.Run(2, [&](int64_t t, int) {
      const size_t half = options.bytes / 2;
      std::memcpy(dst.data() + t * half, src.data() + t * half, half);
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return static_cast<double>(options.bytes) / secs * 1e-9;
  };
  copy_gbs();  // touch dst's pages
  std::vector<double> ratios;
  for (int i = 0; i < 5; ++i) {  // alternated, so both see the same bandwidth mode
    const double read = MeasureReadBandwidth(&pool, options);
    const double copy = copy_gbs();
    ratios.push_back(read / copy);
    std::printf("read %.2f GB/s, copy %.2f GB/s, ratio %.2f\n", read, copy, read / copy);
  }
  std::sort(ratios.begin(), ratios.end());
  EXPECT_GE(ratios[2], 0.8);
  EXPECT_LE(ratios[2], 8.0);
  EXPECT_EQ(dst[options.bytes - 1], 1);
}

}  // namespace
}  // namespace dk::kernels
