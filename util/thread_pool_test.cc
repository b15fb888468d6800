#include "util/thread_pool.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dk {
namespace {

// These tests are about the parallel Runs: contention handling (thread_pool_contention_test)
// is off, so that a busy test machine cannot make a pool run its tasks alone.
ContentionOptions Off() {
  ContentionOptions c;
  c.enabled = false;
  return c;
}

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads, Off());
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
  ThreadPool pool(2, Off());
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

// A worker that is not running when a Run starts (here: held in a signal handler, as
// a descheduled thread on a loaded host would be) must not hold the Run up: the
// caller runs every task and returns without waiting for it.
std::atomic<bool> g_hold{false};
std::atomic<bool> g_held{false};
void HoldHandler(int) {
  g_held.store(true);
  while (g_hold.load()) {
    const timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
}

TEST(ThreadPool, RunDoesNotWaitForAWorkerThatIsNotRunning) {
  ThreadPool pool(2, Off());
  std::atomic<pthread_t> worker{};
  std::atomic<bool> found{false};
  for (int r = 0; r < 1000 && !found.load(); ++r) {
    pool.Run(64, [&](int64_t, int thread) {
      if (thread == 1 && !found.exchange(true)) worker.store(pthread_self());
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
  }
  ASSERT_TRUE(found.load()) << "the worker never took a task";
  struct sigaction sa = {};
  sa.sa_handler = HoldHandler;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  g_hold.store(true);
  ASSERT_EQ(pthread_kill(worker.load(), SIGUSR1), 0);
  while (!g_held.load()) std::this_thread::yield();
  // Released after 3 s whatever happens, so a pool that waits fails instead of hanging.
  std::thread release([] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    g_hold.store(false);
  });
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> by_worker{0};
  std::atomic<int> ran{0};
  for (int r = 0; r < 10; ++r) {
    pool.Run(8, [&](int64_t, int thread) {
      ran.fetch_add(1);
      if (thread != 0) by_worker.fetch_add(1);
    });
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool still_held = g_hold.load();
  release.join();
  EXPECT_TRUE(still_held);
  EXPECT_EQ(ran.load(), 80);
  EXPECT_EQ(by_worker.load(), 0);
  EXPECT_LT(secs, 1.0) << "Run waited for the held worker";
  // The worker, released, takes part again.
  std::atomic<int> used{0};
  for (int r = 0; r < 200 && used.load() == 0; ++r) {
    pool.Run(64, [&](int64_t, int thread) {
      if (thread == 1) used.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    });
  }
  EXPECT_GT(used.load(), 0);
  signal(SIGUSR1, SIG_DFL);
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The caller waits for a long task on another thread asleep, not spinning: on a
// loaded host its spinning would hold the core the other thread needs.
TEST(ThreadPool, CallerSleepsWhileWaitingForALongTask) {
  ThreadPool pool(2, Off());
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::atomic<int> worker_tasks{0};
    const double cpu0 = ThreadCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    pool.Run(16, [&](int64_t, int thread) {
      if (thread == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } else if (worker_tasks.fetch_add(1) == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = ThreadCpuSeconds() - cpu0;
    if (worker_tasks.load() == 0) continue;  // the caller took every task: try again
    EXPECT_GE(wall, 0.19);
    EXPECT_LT(cpu, 0.05) << "the caller spun while the worker ran its 200 ms task";
    return;
  }
  FAIL() << "the worker never took a task in 20 Runs";
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

struct Piece {
  size_t begin, end;
  int thread;
};

TEST(ParallelRanges, CoversEveryUnitExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads, Off());
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{1001}, size_t{100003}}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad{0};
      ParallelRanges(&pool, n, [&](size_t b, size_t e, int thread) {
        if (b >= e || e > n || thread < 0 || thread >= threads) bad.fetch_add(1);
        for (size_t u = b; u < e && u < n; ++u) hits[u].fetch_add(1);
      });
      for (size_t u = 0; u < n; ++u) ASSERT_EQ(hits[u].load(), 1) << threads << " " << n << " " << u;
      EXPECT_EQ(bad.load(), 0) << threads << " " << n;
    }
  }
}

TEST(ParallelRanges, OneThreadOrNoPoolIsOneCall) {
  ThreadPool one(1, Off());
  for (ThreadPool* pool : {&one, static_cast<ThreadPool*>(nullptr)}) {
    std::vector<Piece> pieces;
    ParallelRanges(pool, 1000, [&](size_t b, size_t e, int t) { pieces.push_back({b, e, t}); });
    ASSERT_EQ(pieces.size(), 1u);
    EXPECT_EQ(pieces[0].begin, 0u);
    EXPECT_EQ(pieces[0].end, 1000u);
  }
}

// A thread held up in its first piece does not hold the call up: the other takes the
// rest of its share (from the back, in halves). Without stealing the caller would
// process its own 500 units only and wait. Each thread walks its share front to back.
TEST(ParallelRanges, OthersTakeTheShareOfAThreadThatIsHeldUp) {
  ThreadPool pool(2, Off());
  const size_t n = 1000;
  std::mutex mu;
  std::vector<Piece> pieces;
  std::atomic<size_t> caller_units{0};
  std::atomic<bool> worker_ran{false};
  for (int attempt = 0; attempt < 20 && !worker_ran.load(); ++attempt) {
    pieces.clear();
    caller_units = 0;
    ParallelRanges(&pool, n, [&](size_t b, size_t e, int t) {
      {
        std::lock_guard<std::mutex> lock(mu);
        pieces.push_back({b, e, t});
      }
      if (t == 0) {  // slow enough for the worker to claim its share meanwhile
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        caller_units.fetch_add(e - b);
        return;
      }
      if (worker_ran.exchange(true)) return;
      // The worker's first piece: hold it until the caller has done everything else.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (caller_units.load() < n - (e - b) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    });
  }
  ASSERT_TRUE(worker_ran.load()) << "the worker never took a share in 20 calls";
  size_t worker_units = 0;
  for (const Piece& p : pieces) worker_units += p.thread == 0 ? 0 : p.end - p.begin;
  EXPECT_EQ(caller_units.load() + worker_units, n);
  EXPECT_GT(caller_units.load(), n / 2) << "the caller took nothing from the held-up worker's share";
  EXPECT_LE(worker_units, n / 8) << "the worker kept more than its first piece";
  // The caller walked its own share, [0, 500), front to back in pieces that follow
  // each other (one stream), then took the worker's share from the back: its first
  // piece there starts in the back half of what the worker had left ([625, 1000)).
  size_t next = 0, first_stolen = SIZE_MAX;
  for (const Piece& p : pieces) {
    if (p.thread != 0) continue;
    if (p.begin < n / 2) {
      EXPECT_EQ(p.begin, next) << "the caller's own share out of order";
      next = p.end;
    } else if (first_stolen == SIZE_MAX) {
      first_stolen = p.begin;
    }
  }
  EXPECT_EQ(next, n / 2);
  EXPECT_GE(first_stolen, 3 * n / 4) << "the caller did not take the held-up share from the back";
}


// A team run of several ParallelRanges calls (and one TeamSingle) in a row: every
// call covers its units exactly once, and returns on each member only once all its
// units are done (the barrier), so the next call may read what the last one wrote.
TEST(RunTeam, EachCallCoversItsUnitsOnceAndIsABarrier) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads, Off());
    internal::Team team(8);
    const std::vector<size_t> sizes = {1, 2, 7, 64, 1001, 3, 100003};
    for (int round = 0; round < 20; ++round) {
      std::vector<std::vector<std::atomic<int>>> hits;
      for (size_t n : sizes) hits.emplace_back(n);
      std::atomic<int> singles{0}, bad{0}, early{0}, bodies{0};
      pool.RunTeam(team, [&] {
        bodies.fetch_add(1);
        for (size_t c = 0; c < sizes.size(); ++c) {
          const size_t n = sizes[c];
          ParallelRanges(&pool, n, [&](size_t b, size_t e, int thread) {
            if (b >= e || e > n || thread < 0 || thread >= threads) bad.fetch_add(1);
            for (size_t u = b; u < e && u < n; ++u) hits[c][u].fetch_add(1);
          });
          for (size_t u = 0; u < n; ++u) {
            if (hits[c][u].load() != 1) early.fetch_add(1);
          }
          if (c == 2) TeamSingle(&pool, [&] { singles.fetch_add(1); });
        }
      });
      EXPECT_EQ(bodies.load(), threads) << "one body per member";
      for (size_t c = 0; c < sizes.size(); ++c) {
        for (size_t u = 0; u < sizes[c]; ++u) ASSERT_EQ(hits[c][u].load(), 1) << threads << " " << c << " " << u;
      }
      EXPECT_EQ(singles.load(), 1) << threads;
      EXPECT_EQ(bad.load(), 0) << threads;
      EXPECT_EQ(early.load(), 0) << threads << ": a call returned before all its units were done";
    }
  }
}

// A member that comes late (here: slot 1 held up before its body) holds nothing up:
// the caller takes its shares, and the late member passes the finished calls.
TEST(RunTeam, AMemberThatComesLateHoldsNothingUp) {
  ThreadPool pool(2, Off());
  internal::Team team(4);
  const size_t n = 1000;
  std::vector<std::atomic<int>> hits(n);
  std::atomic<size_t> late_units{0};
  std::atomic<bool> caller_done{false};
  pool.RunTeam(team, [&] {
    const bool late = internal::t_team_member->slot == 1;
    if (late) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!caller_done.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    }
    for (int c = 0; c < 3; ++c) {
      ParallelRanges(&pool, n, [&](size_t b, size_t e, int) {
        if (late) late_units.fetch_add(e - b);
        for (size_t u = b; u < e; ++u) hits[u].fetch_add(1);
      });
    }
    if (!late) caller_done.store(true);
  });
  for (size_t u = 0; u < n; ++u) ASSERT_EQ(hits[u].load(), 3) << u;
  EXPECT_EQ(late_units.load(), 0u) << "the late member found work the caller should have taken";
}

// Member i takes share i of each call first: with two threads, the caller (slot 0)
// walks [0, n/2) of every call front to back, one stream per thread across calls.
TEST(RunTeam, EachMemberWalksItsOwnShareFirst) {
  ThreadPool pool(2, Off());
  internal::Team team(2);
  const size_t n = 1000;
  std::mutex mu;
  std::vector<Piece> pieces;
  pool.RunTeam(team, [&] {
    const int slot = internal::t_team_member->slot;
    ParallelRanges(&pool, n, [&](size_t b, size_t e, int) {
      std::lock_guard<std::mutex> lock(mu);
      pieces.push_back({b, e, slot});
    });
  });
  ASSERT_FALSE(pieces.empty());
  for (int slot : {0, 1}) {
    for (const Piece& p : pieces) {
      if (p.thread != slot) continue;
      EXPECT_EQ(p.begin, slot * n / 2) << "slot " << slot << " did not start with its own share";
      break;
    }
  }
}

// The pools are made inside the death statements, so that their threads exist in
// the forked child.
void RunInside() {
  ThreadPool pool(2, Off());
  internal::Team team(1);
  pool.RunTeam(team, [&] { pool.Run(2, [](int64_t, int) {}); });
}
TEST(RunTeamDeathTest, RunInsideATeamAborts) { EXPECT_DEATH(RunInside(), "inside RunTeam"); }

void TooManyCalls() {
  ThreadPool pool(2, Off());
  internal::Team team(1);
  pool.RunTeam(team, [&] {
    ParallelRanges(&pool, 4, [](size_t, size_t, int) {});
    ParallelRanges(&pool, 4, [](size_t, size_t, int) {});
  });
}
TEST(RunTeamDeathTest, MoreCallsThanTheTeamHoldsAbort) {
  EXPECT_DEATH(TooManyCalls(), "more than 1 ParallelRanges");
}

}  // namespace
}  // namespace dk
