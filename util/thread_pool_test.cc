#include "util/thread_pool.h"

#include <atomic>
#include <chrono>
#include <vector>

#include "gtest/gtest.h"

namespace dk {
namespace {

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_thread{0};
      pool.Run(n, [&](int64_t task, int thread) {
        hits[task].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << i;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPool, ManySmallRunsAndSleepingWorkers) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 20000; ++r) {
    pool.Run(4, [&](int64_t task, int) { sum.fetch_add(task + 1); });
  }
  EXPECT_EQ(sum.load(), 20000 * 10);
  // Let the worker fall asleep, then make sure it wakes up for the next Run.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::atomic<int> workers_used{0};
  for (int r = 0; r < 50; ++r) {
    pool.Run(64, [&](int64_t, int thread) {
      if (thread == 1) workers_used.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    });
  }
  EXPECT_GT(workers_used.load(), 0);
}

TEST(SplitPoint, CoversRangeWithAlignedBoundaries) {
  const size_t n = 1003;
  for (size_t parts : {1, 2, 3, 8}) {
    EXPECT_EQ(SplitPoint(n, parts, 0, 4), 0u);
    EXPECT_EQ(SplitPoint(n, parts, parts, 4), n);
    for (size_t i = 1; i < parts; ++i) {
      EXPECT_EQ(SplitPoint(n, parts, i, 4) % 4, 0u);
      EXPECT_LE(SplitPoint(n, parts, i - 1, 4), SplitPoint(n, parts, i, 4));
    }
  }
}

}  // namespace
}  // namespace dk
