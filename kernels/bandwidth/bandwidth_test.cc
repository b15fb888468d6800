#include "kernels/bandwidth/bandwidth.h"

#include <chrono>
#include <cstdio>
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

// What the probe computed, not how fast the host was: every pass sums each float of
// the buffer once (float(i & 1023), small enough here for float sums to be exact), the
// figure's numerator is the bytes of those floats, and the figure is that numerator
// over the median pass's time in 1e9 B/s. A byte count off by any factor, a range
// read twice or skipped, or a wrong unit breaks one of these; the timing is printed.
TEST(Bandwidth, CountsTheBytesItSumsAndSumsEveryFloatOnce) {
  ThreadPool one(1), two(2), three(3);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &one, &two, &three}) {
    // 20011 floats: not a multiple of the threads' 16-float alignment, and the extra
    // bytes of the second and third size are not a whole float.
    for (size_t bytes : {size_t{64}, size_t{4 * 20011}, size_t{4 * 20011 + 3}, size_t{4 * 1000 + 1}}) {
      const int threads = pool ? pool->num_threads() : 1;
      const size_t floats = bytes / 4;
      double expect_sum = 0;
      for (size_t i = 0; i < floats; ++i) expect_sum += static_cast<double>(i & 1023);
      BandwidthOptions options;
      options.bytes = bytes;
      options.passes = 3;
      const auto start = std::chrono::steady_clock::now();
      const BandwidthReport r = MeasureReadBandwidthReport(pool, options);
      const double call_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("threads %d, %zu bytes: %.3f GB/s, median pass %.3g s\n", threads, bytes, r.gbs,
                  r.seconds);
      SCOPED_TRACE(::testing::Message() << threads << " threads, " << bytes << " bytes");
      EXPECT_EQ(r.passes, 3);
      EXPECT_EQ(r.bytes_per_pass, floats * 4);
      EXPECT_EQ(r.bytes_summed, 3 * floats * 4);
      EXPECT_EQ(r.sum, 3 * expect_sum);
      // The figure is the numerator over a pass's time, and that pass lies inside the
      // call (so its time can be no longer than the call's, whatever the host's load).
      EXPECT_GT(r.seconds, 0.0);
      EXPECT_LE(r.seconds, call_seconds);
      EXPECT_DOUBLE_EQ(r.gbs, static_cast<double>(r.bytes_per_pass) / r.seconds * 1e-9);
      EXPECT_GT(MeasureReadBandwidth(pool, options), 0.0);
    }
  }
}

// Nothing to read: no passes, no figure.
TEST(Bandwidth, AnEmptyBufferIsNoMeasurement) {
  BandwidthOptions options;
  options.bytes = 3;  // less than one float
  const BandwidthReport r = MeasureReadBandwidthReport(nullptr, options);
  EXPECT_EQ(r.passes, 0);
  EXPECT_EQ(r.bytes_per_pass, 0u);
  EXPECT_EQ(r.bytes_summed, 0u);
  EXPECT_EQ(r.gbs, 0.0);
  EXPECT_EQ(MeasureReadBandwidth(nullptr, options), 0.0);
}

}  // namespace
}  // namespace dk::kernels
