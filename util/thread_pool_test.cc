#include "util/thread_pool.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "util/wait_for.h"

namespace dk {
namespace {

// These tests are about the parallel Runs: contention handling (thread_pool_contention_test)
// is off, so that a busy test machine cannot make a pool run its tasks alone.
ContentionOptions Off() {
  ContentionOptions c;
  c.enabled = false;
  return c;
}

using testing::WaitFor;
constexpr auto kGuard = testing::kWaitGuard;

// One Run of 2 tasks on a pool of 2 threads in which the worker takes a task and runs
// on_worker() in it, once: a caller's task waits until the worker has one, however
// late the host runs the worker (a worker already spinning may take both).
void RunOnWorker(ThreadPool& pool, const std::function<void()>& on_worker) {
  std::atomic<bool> worker_in{false};
  pool.Run(2, [&](int64_t, int thread) {
    if (thread == 0) {
      WaitFor([&] { return worker_in.load(); }, "the worker to take a task");
    } else if (!worker_in.exchange(true)) {
      on_worker();
    }
  });
}

// Every task once, on every thread: when there are enough tasks, each thread's first
// task waits until every thread holds one, so the workers' side is checked however
// late the host runs them (a thread blocked in its first task cannot take a second).
TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads, Off());
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      std::vector<std::atomic<int>> per_thread(threads);
      std::atomic<int> bad_thread{0}, threads_in{0};
      const bool all_take_part = n >= threads && n > 1;
      pool.Run(n, [&](int64_t task, int thread) {
        hits[task].fetch_add(1);
        if (thread < 0 || thread >= threads) {
          bad_thread.fetch_add(1);
          return;
        }
        if (per_thread[thread].fetch_add(1) == 0 && all_take_part) {
          threads_in.fetch_add(1);
          WaitFor([&] { return threads_in.load() == threads; }, "every thread to take a task");
        }
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << i;
      EXPECT_EQ(bad_thread.load(), 0);
      if (all_take_part) {
        for (int t = 0; t < threads; ++t) EXPECT_GT(per_thread[t].load(), 0) << threads << " " << n << " " << t;
      }
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
  // The worker, idle, stops spinning and falls asleep; the next Run wakes it up (the
  // Run's caller task waits until the worker has taken one).
  EXPECT_TRUE(WaitFor([&] { return pool.sleeping_workers() == 1; }, "the idle worker to fall asleep"));
  std::atomic<int> woke{0};
  RunOnWorker(pool, [&] {
    woke.fetch_add(1);
    EXPECT_EQ(pool.sleeping_workers(), 0) << "a worker running a task still counts as asleep";
  });
  EXPECT_EQ(woke.load(), 1) << "the sleeping worker did not wake for the next Run";
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
  RunOnWorker(pool, [&] { worker = pthread_self(); });
  struct sigaction sa = {};
  sa.sa_handler = HoldHandler;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  g_hold.store(true);
  ASSERT_EQ(pthread_kill(worker.load(), SIGUSR1), 0);
  ASSERT_TRUE(WaitFor([] { return g_held.load(); }, "the worker to be held"));
  // The worker is released once the Runs are done, or after kGuard whatever happens,
  // so that a pool that waits for it fails instead of hanging.
  std::mutex mu;
  std::condition_variable cv;
  bool runs_done = false;
  std::thread release([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, kGuard, [&] { return runs_done; });
    g_hold.store(false);
  });
  std::atomic<int> by_worker{0};
  std::vector<std::atomic<int>> hits(80);
  for (int r = 0; r < 10; ++r) {
    pool.Run(8, [&](int64_t task, int thread) {
      hits[8 * r + task].fetch_add(1);
      if (thread != 0) by_worker.fetch_add(1);
    });
  }
  const bool still_held = g_hold.load();
  {
    std::lock_guard<std::mutex> lock(mu);
    runs_done = true;
  }
  cv.notify_one();
  release.join();
  EXPECT_TRUE(still_held) << "the Runs returned only once the held worker was let go";
  for (int t = 0; t < 80; ++t) EXPECT_EQ(hits[t].load(), 1) << "task " << t;
  EXPECT_EQ(by_worker.load(), 0);
  // The worker, released, takes part again.
  std::atomic<int> used{0};
  RunOnWorker(pool, [&] { used.fetch_add(1); });
  EXPECT_EQ(used.load(), 1);
  signal(SIGUSR1, SIG_DFL);
}

// The caller waits for a long task on another thread asleep, not spinning: on a
// loaded host its spinning would hold the core the other thread needs. The worker's
// task lasts until it sees the caller asleep (the caller's own task never sleeps).
TEST(ThreadPool, CallerSleepsWhileWaitingForALongTask) {
  ThreadPool pool(2, Off());
  EXPECT_FALSE(pool.caller_sleeping());
  std::atomic<bool> saw_caller_asleep{false}, worker_done{false};
  RunOnWorker(pool, [&] {
    saw_caller_asleep = WaitFor([&] { return pool.caller_sleeping(); }, "the waiting caller to sleep");
    worker_done = true;
  });
  EXPECT_TRUE(saw_caller_asleep.load()) << "the caller spun while the worker ran its long task";
  EXPECT_TRUE(worker_done.load()) << "Run returned before the worker's task had finished";
  EXPECT_FALSE(pool.caller_sleeping()) << "Run returned, but the pool still says its caller sleeps";
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
// The caller's first piece waits until the worker holds its own (so each has a share,
// whichever it is, however late the host runs the worker); the worker holds its first
// piece until the caller has done everything else.
TEST(ParallelRanges, OthersTakeTheShareOfAThreadThatIsHeldUp) {
  ThreadPool pool(2, Off());
  const size_t n = 1000, half = n / 2;
  std::mutex mu;
  std::vector<Piece> pieces;
  std::vector<std::atomic<int>> hits(n);
  std::atomic<size_t> caller_units{0};
  std::atomic<bool> worker_in{false};
  bool caller_waited = false;  // the caller's alone
  ParallelRanges(&pool, n, [&](size_t b, size_t e, int t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      pieces.push_back({b, e, t});
    }
    for (size_t u = b; u < e && u < n; ++u) hits[u].fetch_add(1);
    if (t == 0) {
      if (!caller_waited) {
        caller_waited = true;
        WaitFor([&] { return worker_in.load(); }, "the worker to take its share");
      }
      caller_units.fetch_add(e - b);
      return;
    }
    if (worker_in.exchange(true)) return;
    WaitFor([&] { return caller_units.load() >= n - (e - b); }, "the caller to do the rest");
  });
  for (size_t u = 0; u < n; ++u) ASSERT_EQ(hits[u].load(), 1) << u;
  std::vector<Piece> worker_pieces;
  for (const Piece& p : pieces) {
    if (p.thread != 0) worker_pieces.push_back(p);
  }
  ASSERT_EQ(worker_pieces.size(), 1u) << "the worker kept more than its first piece";
  EXPECT_LE(worker_pieces[0].end - worker_pieces[0].begin, n / 8);
  const size_t worker_share = worker_pieces[0].begin;  // its first piece: the front of its share
  ASSERT_TRUE(worker_share == 0 || worker_share == half) << worker_share;
  const size_t own = half - worker_share;
  EXPECT_EQ(caller_units.load(), n - (worker_pieces[0].end - worker_pieces[0].begin));
  // The caller walked its own share front to back in pieces that follow each other
  // (one stream), then took the worker's share from the back: its first piece there
  // starts in the back half of what the worker had left (e.g. [625, 1000) of [500, 1000)).
  size_t next = own, first_stolen = SIZE_MAX;
  for (const Piece& p : pieces) {
    if (p.thread != 0) continue;
    if (first_stolen == SIZE_MAX && p.begin >= own && p.begin < own + half) {
      EXPECT_EQ(p.begin, next) << "the caller's own share out of order";
      next = p.end;
    } else if (first_stolen == SIZE_MAX) {
      first_stolen = p.begin;
    }
  }
  EXPECT_EQ(next, own + half) << "the caller did not walk its whole share first";
  EXPECT_GE(first_stolen, worker_share + half / 2) << "the caller did not take the held-up share from the back";
  EXPECT_LT(first_stolen, worker_share + half);
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
    if (late) WaitFor([&] { return caller_done.load(); }, "the other member to finish");
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
