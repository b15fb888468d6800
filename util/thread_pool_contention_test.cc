// Contention handling of ThreadPool (util/thread_pool.h): stalls and preemptions make
// it run alone, probing brings it back.
//
// The pools here judge by the test's clock and preemption count (ContentionOptions::
// now_ns, ::preemptions), not the host's: time moves only when the test advances it,
// and a Run stalls only when the test makes the caller wait on that clock. Another
// process on the host can slow these tests down but cannot add a stall, a preemption
// or a window, so the counts below are exact. Real time is used only to bound the
// waits for the worker (a deadlock guard, never a measure of speed), and in the last
// two tests: one checks that the defaults read the host's clock and preemption count,
// the other (disabled: a diagnostic run by hand, as it depends on the host's
// scheduler) that the real preemption count makes a pool run alone.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "util/wait_for.h"
#include "util/thread_pool.h"

namespace dk {
namespace {

using testing::WaitFor;

// The test's clock and the caller's preemption count, as the pools read them (plain
// function pointers, hence globals; reset by the fixture). The clock counts its reads
// so that Stall can tell when the caller has started to wait.
constexpr int64_t kStartNs = 1'000'000'000'000;  // far from 0: the first window is not judged
std::atomic<int64_t> g_now{kStartNs};
std::atomic<int64_t> g_clock_reads{0};
std::atomic<int64_t> g_preemptions{0};

int64_t TestNow() {
  const int64_t now = g_now.load();
  g_clock_reads.fetch_add(1);  // after the load: a reader counted has its time already
  return now;
}
int64_t TestPreemptions() { return g_preemptions.load(); }
void Advance(int64_t ns) { g_now.fetch_add(ns); }
void Preempt(int n) { g_preemptions.fetch_add(n); }

// The pool's own defaults, judged on the test's clock and preemption count.
ContentionOptions Synthetic() {
  ContentionOptions c;
  c.now_ns = &TestNow;
  c.preemptions = &TestPreemptions;
  return c;
}

class Contention : public ::testing::Test {
 protected:
  void SetUp() override {
    g_now = kStartNs;
    g_clock_reads = 0;
    g_preemptions = 0;
  }
};

enum class Where { kAlone, kParallel };

// Runs 8 tasks and checks that each ran exactly once. kAlone: the pool kept them on
// the caller (counted as a solo Run; none went to the worker). kParallel: the pool
// offered them to the worker, and the worker took one (the caller's first task waits
// for that, so the answer does not depend on how soon the host runs the worker).
Where RunOnce(ThreadPool& pool) {
  constexpr int kTasks = 8;
  const ThreadPool::Stats before = pool.stats();
  std::vector<std::atomic<int>> hits(kTasks);
  std::atomic<int> worker_tasks{0};
  bool caller_started = false;  // the caller's alone
  pool.Run(kTasks, [&](int64_t task, int thread) {
    hits[task].fetch_add(1);
    if (thread != 0) {
      worker_tasks.fetch_add(1);
      return;
    }
    // The caller's thread may read the stats: this Run was offered to the worker.
    if (!caller_started && pool.stats().parallel_runs != before.parallel_runs) {
      WaitFor([&] { return worker_tasks.load() > 0; }, "the worker to take a task of a parallel Run");
    }
    caller_started = true;
  });
  for (int t = 0; t < kTasks; ++t) EXPECT_EQ(hits[t].load(), 1) << "task " << t;
  const int64_t solo = pool.stats().solo_runs - before.solo_runs;
  const int64_t parallel = pool.stats().parallel_runs - before.parallel_runs;
  EXPECT_EQ(solo + parallel, 1) << "a Run is either solo or parallel";
  if (solo == 1) {
    EXPECT_EQ(worker_tasks.load(), 0) << "a solo Run gave the worker a task";
    return Where::kAlone;
  }
  return worker_tasks.load() > 0 ? Where::kParallel : Where::kAlone;
}

constexpr int64_t kStallNs = 1'000'000;  // 5x the default stall_ns; 12 of them fit a window

// One parallel Run in which the caller works `work_ns` on the test's clock, then waits
// `wait_ns` on it for the worker's task: the worker advances the clock only once the
// caller has read it after its task (the start of its wait). The pool must not be
// running alone (a failure, not a wait for a worker that was never offered a task).
void WaitRun(ThreadPool& pool, int64_t work_ns, int64_t wait_ns) {
  const int64_t parallel_runs = pool.stats().parallel_runs;
  std::atomic<bool> worker_in{false}, caller_done{false};
  std::atomic<int64_t> reads_at_caller_done{0};
  pool.Run(2, [&](int64_t, int thread) {
    if (thread == 0) {
      if (pool.stats().parallel_runs == parallel_runs) {
        ADD_FAILURE() << "the pool ran alone where the test needs a parallel Run";
        return;
      }
      WaitFor([&] { return worker_in.load(); }, "the worker to take the other task");
      Advance(work_ns);
      reads_at_caller_done = g_clock_reads.load();
      caller_done = true;
    } else {
      worker_in = true;
      WaitFor([&] { return caller_done.load() && g_clock_reads.load() > reads_at_caller_done.load(); },
              "the caller to start waiting");
      Advance(wait_ns);
    }
  });
}

// A Run in which the caller waits `ns` for the worker, doing nothing itself: checks
// that the pool counted it as a stall.
void Stall(ThreadPool& pool, int64_t ns) {
  const int64_t stalls = pool.stats().stalls;
  WaitRun(pool, 0, ns);
  EXPECT_EQ(pool.stats().stalls, stalls + 1) << "the caller waited " << ns << " ns";
}

// A window's worth of contention: `c.contention_events` stalls, then the clock moves
// past the window's end, so that the next Run judges it.
void Contend(ThreadPool& pool, const ContentionOptions& c) {
  for (int i = 0; i < c.contention_events; ++i) Stall(pool, kStallNs);
  Advance(c.window_ns);
}

// Stalled Runs (a worker holding a task while the caller waits, as a thread taken off
// its core does) make the pool run alone for the solo time, then probe in parallel,
// then stay parallel once the probe's window passes without contention.
TEST_F(Contention, StallsMakeThePoolRunAloneThenProbeBack) {
  const ContentionOptions c = Synthetic();
  ThreadPool pool(2, c);
  EXPECT_EQ(RunOnce(pool), Where::kParallel);
  EXPECT_EQ(pool.stats().stalls, 0);
  Contend(pool, c);
  EXPECT_EQ(pool.stats().stalls, c.contention_events);
  EXPECT_EQ(RunOnce(pool), Where::kAlone) << "the contended window did not make the pool run alone";
  EXPECT_EQ(pool.stats().contended_windows, 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(RunOnce(pool), Where::kAlone);
  Advance(c.min_solo_ns - 1);
  EXPECT_EQ(RunOnce(pool), Where::kAlone) << "the solo time ended early";
  Advance(1);
  EXPECT_EQ(RunOnce(pool), Where::kParallel) << "no probe after the solo time";
  EXPECT_EQ(RunOnce(pool), Where::kParallel);
  Advance(c.window_ns);  // the probe's window, without contention
  const int64_t solo = pool.stats().solo_runs;
  for (int window = 0; window < 3; ++window) {
    for (int i = 0; i < 5; ++i) EXPECT_EQ(RunOnce(pool), Where::kParallel) << "window " << window;
    Advance(c.window_ns);
  }
  EXPECT_EQ(pool.stats().solo_runs, solo) << "the pool did not go back to parallel Runs";
  EXPECT_EQ(pool.stats().contended_windows, 1);
  EXPECT_EQ(pool.stats().stalls, c.contention_events);
}

// Stalls and the caller's preemptions add up; a window with one event fewer than
// contention_events is not contended, and its events do not carry over into the next.
// A window the pool sat idle through (twice window_ns or longer) is not judged.
TEST_F(Contention, AWindowIsContendedFromContentionEventsOn) {
  const ContentionOptions c = Synthetic();
  ThreadPool pool(2, c);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);  // starts a window
  for (int window = 0; window < 2; ++window) {
    for (int i = 0; i < 5; ++i) Stall(pool, kStallNs);
    Preempt(c.contention_events - 1 - 5);
    Advance(c.window_ns);
    EXPECT_EQ(RunOnce(pool), Where::kParallel) << "window " << window;
    EXPECT_EQ(pool.stats().contended_windows, 0) << "window " << window;
  }
  Stall(pool, kStallNs);
  Preempt(c.contention_events);
  Advance(2 * c.window_ns);
  EXPECT_EQ(RunOnce(pool), Where::kParallel) << "an idle window was judged";
  EXPECT_EQ(pool.stats().contended_windows, 0);
  Stall(pool, kStallNs);
  Preempt(c.contention_events - 1);
  Advance(c.window_ns);
  EXPECT_EQ(RunOnce(pool), Where::kAlone);
  EXPECT_EQ(pool.stats().contended_windows, 1);
  EXPECT_EQ(pool.stats().solo_runs, 1);
}

// A Run stalls when the caller waits longer than stall_ns and longer than it worked.
TEST_F(Contention, AStallIsAWaitLongerThanStallNsAndTheCallersWork) {
  const ContentionOptions c = Synthetic();
  ThreadPool pool(2, c);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);
  WaitRun(pool, 0, c.stall_ns);
  EXPECT_EQ(pool.stats().stalls, 0) << "a wait of stall_ns";
  WaitRun(pool, 4 * c.stall_ns, 4 * c.stall_ns);
  EXPECT_EQ(pool.stats().stalls, 0) << "a wait as long as the caller's work";
  WaitRun(pool, 0, c.stall_ns + 1);
  EXPECT_EQ(pool.stats().stalls, 1) << "a wait longer than stall_ns";
  WaitRun(pool, 4 * c.stall_ns, 4 * c.stall_ns + 1);
  EXPECT_EQ(pool.stats().stalls, 2) << "a wait longer than the caller's work";
}

// A contended probe makes the solo time four times longer, up to max_solo_ns.
TEST_F(Contention, AContendedProbeLengthensTheSoloTime) {
  const ContentionOptions c = Synthetic();
  ASSERT_EQ(c.max_solo_ns, 8 * c.min_solo_ns) << "the test assumes the defaults";
  ThreadPool pool(2, c);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);
  for (const int64_t solo_ns : {c.min_solo_ns, 4 * c.min_solo_ns, c.max_solo_ns, c.max_solo_ns}) {
    Contend(pool, c);  // in the parallel window first, in the probe's window after
    EXPECT_EQ(RunOnce(pool), Where::kAlone) << solo_ns;
    Advance(solo_ns - 1);
    EXPECT_EQ(RunOnce(pool), Where::kAlone) << "the solo time was shorter than " << solo_ns;
    Advance(1);
    EXPECT_EQ(RunOnce(pool), Where::kParallel) << "the solo time was longer than " << solo_ns;
  }
  EXPECT_EQ(pool.stats().contended_windows, 4);
}

// Contention soon after the last (within calm_ns) keeps the solo time it had; after
// calm_ns without contention it starts over from min_solo_ns.
TEST_F(Contention, TheSoloTimeStartsOverAfterACalm) {
  const ContentionOptions c = Synthetic();
  ThreadPool pool(2, c);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);
  Contend(pool, c);
  ASSERT_EQ(RunOnce(pool), Where::kAlone);
  Advance(c.min_solo_ns);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);  // the probe
  Contend(pool, c);
  ASSERT_EQ(RunOnce(pool), Where::kAlone);     // solo time 4 * min_solo_ns now
  Advance(4 * c.min_solo_ns);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);  // the probe,
  Advance(c.window_ns);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);  // uncontended: parallel again
  // Contended again well within calm_ns of the last contention: still 4 * min_solo_ns.
  ASSERT_LT(4 * c.min_solo_ns + 3 * c.window_ns, c.calm_ns);
  Contend(pool, c);
  EXPECT_EQ(RunOnce(pool), Where::kAlone);
  Advance(4 * c.min_solo_ns - 1);
  EXPECT_EQ(RunOnce(pool), Where::kAlone) << "the solo time started over before a calm";
  Advance(1);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);
  Advance(c.window_ns);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);
  // calm_ns without contention, then contention: min_solo_ns again.
  Advance(c.calm_ns);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);
  Contend(pool, c);
  EXPECT_EQ(RunOnce(pool), Where::kAlone);
  Advance(c.min_solo_ns);
  EXPECT_EQ(RunOnce(pool), Where::kParallel) << "the solo time did not start over after a calm";
}

// The caller's preemptions alone, without a stall, make a window contended.
TEST_F(Contention, PreemptionsAloneMakeThePoolRunAlone) {
  const ContentionOptions c = Synthetic();
  ThreadPool pool(2, c);
  ASSERT_EQ(RunOnce(pool), Where::kParallel);
  Preempt(c.contention_events);
  Advance(c.window_ns);
  EXPECT_EQ(RunOnce(pool), Where::kAlone);
  EXPECT_EQ(pool.stats().stalls, 0);
  EXPECT_EQ(pool.stats().contended_windows, 1);
  Advance(c.min_solo_ns);
  EXPECT_EQ(RunOnce(pool), Where::kParallel);
  Advance(c.window_ns);
  EXPECT_EQ(RunOnce(pool), Where::kParallel);
  EXPECT_EQ(RunOnce(pool), Where::kParallel);
}

TEST_F(Contention, ContentionHandlingCanBeTurnedOff) {
  ContentionOptions c = Synthetic();
  c.enabled = false;
  ThreadPool pool(2, c);
  for (int window = 0; window < 3; ++window) {
    // What would be contention: the caller preempted, and the test's clock moving on
    // while it waits for the worker (the pool does not read it at all).
    Preempt(2 * c.contention_events);
    std::atomic<bool> caller_done{false};
    pool.Run(2, [&](int64_t, int thread) {
      if (thread == 0) {
        caller_done = true;
      } else {
        WaitFor([&] { return caller_done.load(); }, "the caller's task");
        Advance(10 * c.stall_ns);
      }
    });
    Advance(c.window_ns);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(RunOnce(pool), Where::kParallel) << "window " << window;
  }
  EXPECT_EQ(pool.stats().stalls, 0);
  EXPECT_EQ(pool.stats().contended_windows, 0);
  EXPECT_EQ(pool.stats().solo_runs, 0);
}

// The defaults a pool judges by, unless a caller sets its own: the steady clock in
// nanoseconds and the calling thread's involuntary context switches (getrusage,
// RUSAGE_THREAD), read here on each side of the pool's own read. The tests above
// show what the pool does with them; this one that it reads the host's, without
// depending on when the host's scheduler preempts anyone. The thread first sleeps
// 100 times (voluntary switches), so that a count of those, or of the process's
// switches, would land above the thread's involuntary count.
TEST(ContentionOnTheHost, TheDefaultsAreTheSteadyClockAndTheThreadsPreemptions) {
  std::thread([] {
    for (int i = 0; i < 100; ++i) std::this_thread::sleep_for(std::chrono::microseconds(10));
    ThreadPool pool(2);
    const ContentionOptions& c = pool.options().contention;
    ASSERT_NE(c.now_ns, nullptr);
    ASSERT_NE(c.preemptions, nullptr);
    auto steady_ns = [] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
    const int64_t before_ns = steady_ns();
    const int64_t pool_ns = c.now_ns();
    const int64_t after_ns = steady_ns();
    EXPECT_LE(before_ns, pool_ns);
    EXPECT_LE(pool_ns, after_ns);
    auto involuntary = [] {
      rusage u;
      EXPECT_EQ(getrusage(RUSAGE_THREAD, &u), 0);
      return static_cast<int64_t>(u.ru_nivcsw);
    };
    const int64_t before = involuntary();
    const int64_t pool_count = c.preemptions();
    const int64_t after = involuntary();
    EXPECT_LE(before, pool_count);
    EXPECT_LE(pool_count, after);
  }).join();
}

// A diagnostic, not a pass/fail test (it depends on the host's scheduler; run it with
// --gtest_also_run_disabled_tests): the real preemption count and clock (the
// defaults): a thread of the test's spinning on the caller's core takes it away again
// and again, and the pool, counting those preemptions, goes to run alone. Other
// processes can only add preemptions, so this waits for the pool to go solo (up to
// 30 s) rather than counting them; turned off, the pool stays parallel under the same
// load.
TEST(ContentionOnTheHost, DISABLED_ACallerPreemptedOftenRunsAlone) {
  for (bool enabled : {true, false}) {
    ContentionOptions c;
    c.enabled = enabled;
    c.stall_ns = 1'000'000'000;  // preemptions only
    c.window_ns = 50'000'000;
    c.contention_events = 3;     // one spinning thread beside it: a preemption every few ms
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
    const auto start = std::chrono::steady_clock::now();
    // Enabled: until the pool runs alone (30 s at most); turned off: 500 ms, as long
    // as an enabled pool needs on an idle 2-core host.
    const auto end = start + (enabled ? std::chrono::seconds(30) : std::chrono::milliseconds(500));
    int64_t runs = 0;
    while (std::chrono::steady_clock::now() < end && pool.stats().solo_runs == 0) {
      pool.Run(8, [](int64_t, int) {});
      ++runs;
    }
    stop.store(true);
    spinner.join();
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
    if (enabled) {
      EXPECT_GT(pool.stats().contended_windows, 0) << runs << " Runs";
      EXPECT_GT(pool.stats().solo_runs, 0) << runs << " Runs";
    } else {
      EXPECT_GT(runs, 0);
      EXPECT_EQ(pool.stats().contended_windows, 0);
      EXPECT_EQ(pool.stats().solo_runs, 0);
    }
  }
}

}  // namespace
}  // namespace dk
