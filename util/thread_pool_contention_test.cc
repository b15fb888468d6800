// Contention handling of ThreadPool (util/thread_pool.h): stalls and preemptions make
// it run alone, probing brings it back. Tagged exclusive: other tests running on the
// same cores would be contention of their own.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "util/thread_pool.h"

namespace dk {
namespace {

// Runs until the worker has taken one of `tasks` tasks; the caller's tasks sleep
// `caller_us`, the worker's first one `worker_us`, its others nothing.
void RunUntilWorkerTakesPart(ThreadPool& pool, int tasks, int caller_us, int worker_us) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::atomic<int> worker_tasks{0};
    pool.Run(tasks, [&](int64_t, int thread) {
      if (thread == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(caller_us));
      } else if (worker_tasks.fetch_add(1) == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(worker_us));
      }
    });
    if (worker_tasks.load() > 0) return;
  }
  FAIL() << "the worker never took a task";
}

// Counts the tasks of `runs` Runs of `tasks` tasks (each sleeping `us`) per thread.
std::vector<int> TasksPerThread(ThreadPool& pool, int runs, int tasks, int us) {
  std::vector<std::atomic<int>> per(pool.num_threads());
  for (int r = 0; r < runs; ++r) {
    pool.Run(tasks, [&](int64_t, int thread) {
      per[thread].fetch_add(1);
      if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
    });
  }
  std::vector<int> out;
  for (auto& p : per) out.push_back(p.load());
  return out;
}

// Windows of 300 ms in which two stalls are contention; preemptions do not count
// (the worker woken on the caller's core preempts it), and the test's stalls last
// 50 ms each.
ContentionOptions StallsOnly() {
  ContentionOptions c;
  c.stall_ns = 5'000'000;
  c.window_ns = 300'000'000;
  c.contention_events = 2;
  c.count_preemptions = false;
  c.min_solo_ns = 400'000'000;
  c.max_solo_ns = 1'600'000'000;
  c.calm_ns = 10'000'000'000;
  return c;
}

// Stalls until `n` have been counted (each Run: the worker's first task sleeps 50 ms).
void Stall(ThreadPool& pool, int n) {
  const int64_t target = pool.stats().stalls + n;
  for (int i = 0; i < 100 && pool.stats().stalls < target; ++i) {
    RunUntilWorkerTakesPart(pool, 2, 1000, 50'000);
  }
  ASSERT_EQ(pool.stats().stalls, target);
}

// Sleeps past the end of the current window, then runs one Run, which judges it.
void EndWindow(ThreadPool& pool, const ContentionOptions& c) {
  std::this_thread::sleep_for(std::chrono::nanoseconds(c.window_ns));
  pool.Run(2, [](int64_t, int) {});
}

// Stalled Runs (here the worker sleeps 50 ms in a task, as a thread taken off its core
// would hold it) make the pool run alone for a while, then probe, then run in
// parallel again once a window passes without contention.
TEST(ThreadPool, StallsMakeThePoolRunAloneThenProbeBack) {
  ContentionOptions c = StallsOnly();
  ThreadPool pool(2, c);
  RunUntilWorkerTakesPart(pool, 16, 10, 0);  // no stall: the caller never waits 5 ms
  EXPECT_EQ(pool.stats().stalls, 0);
  Stall(pool, 2);
  EndWindow(pool, c);
  EXPECT_EQ(pool.stats().contended_windows, 1);
  const int64_t solo_before = pool.stats().solo_runs;
  const auto after = std::chrono::steady_clock::now();
  std::vector<int> per = TasksPerThread(pool, 20, 8, 100);
  if (std::chrono::steady_clock::now() - after < std::chrono::milliseconds(300)) {
    EXPECT_EQ(per[1], 0) << "a task went to the worker during the solo time";
    EXPECT_EQ(per[0], 160);
    EXPECT_EQ(pool.stats().solo_runs - solo_before, 20);
  }
  // After the solo time (400 ms) a probe window without stalls, then parallel.
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  per = TasksPerThread(pool, 50, 16, 20);
  EXPECT_GT(per[1], 0) << "the probe did not run in parallel";
  EndWindow(pool, c);
  const int64_t solo_after = pool.stats().solo_runs;
  per = TasksPerThread(pool, 50, 16, 20);
  EXPECT_GT(per[1], 0) << "the pool did not go back to parallel Runs";
  EXPECT_EQ(pool.stats().solo_runs, solo_after);
  EXPECT_EQ(pool.stats().contended_windows, 1);
}

// One stall in a window is not contention.
TEST(ThreadPool, OneStallIsNotContention) {
  ContentionOptions c = StallsOnly();
  ThreadPool pool(2, c);
  Stall(pool, 1);
  EndWindow(pool, c);
  EXPECT_EQ(pool.stats().contended_windows, 0);
  std::vector<int> per = TasksPerThread(pool, 50, 16, 20);
  EXPECT_GT(per[1], 0);
  EXPECT_EQ(pool.stats().solo_runs, 0);
}

// A contended probe makes the solo time four times longer.
TEST(ThreadPool, AContendedProbeLengthensTheSoloTime) {
  ContentionOptions c = StallsOnly();
  ThreadPool pool(2, c);
  Stall(pool, 2);
  EndWindow(pool, c);
  ASSERT_EQ(pool.stats().contended_windows, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(450));  // solo time (400 ms) over
  Stall(pool, 2);                                                // in the probe window
  EndWindow(pool, c);
  ASSERT_EQ(pool.stats().contended_windows, 2);
  // 600 ms later the pool still runs alone (1600 ms solo time now).
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const auto t = std::chrono::steady_clock::now();
  std::vector<int> per = TasksPerThread(pool, 20, 8, 100);
  if (std::chrono::steady_clock::now() - t < std::chrono::milliseconds(150)) {
    EXPECT_EQ(per[1], 0) << "the solo time did not grow";
  }
}

TEST(ThreadPool, ContentionHandlingCanBeTurnedOff) {
  ContentionOptions c = StallsOnly();
  c.enabled = false;
  ThreadPool pool(2, c);
  for (int i = 0; i < 2; ++i) RunUntilWorkerTakesPart(pool, 2, 1000, 50'000);
  EndWindow(pool, c);
  EXPECT_EQ(pool.stats().stalls, 0);
  EXPECT_EQ(pool.stats().contended_windows, 0);
  std::vector<int> per = TasksPerThread(pool, 200, 16, 20);
  EXPECT_GT(per[1], 0);
  EXPECT_EQ(pool.stats().solo_runs, 0);
}

// A caller that keeps being preempted (a spinning thread shares its core) makes
// the pool run alone, even though no Run stalls.
TEST(ThreadPool, ACallerPreemptedOftenRunsAlone) {
  for (bool enabled : {true, false}) {
    ContentionOptions c;
    c.enabled = enabled;
    c.stall_ns = 1'000'000'000;  // preemptions only
    c.window_ns = 50'000'000;
    c.contention_events = 3;     // one busy thread beside it: a preemption every ~8 ms here
    c.min_solo_ns = 50'000'000;
    ThreadPool pool(2, c);
    const int cpu = sched_getcpu();
    ASSERT_GE(cpu, 0);
    cpu_set_t one, before;
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
    std::atomic<bool> stop{false};
    std::thread spinner([&] {
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < end) {
      pool.Run(8, [](int64_t, int) {});
    }
    stop.store(true);
    spinner.join();
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
    if (enabled) {
      EXPECT_GT(pool.stats().contended_windows, 0);
      EXPECT_GT(pool.stats().solo_runs, 0);
    } else {
      EXPECT_EQ(pool.stats().contended_windows, 0);
      EXPECT_EQ(pool.stats().solo_runs, 0);
    }
  }
}

}  // namespace
}  // namespace dk
