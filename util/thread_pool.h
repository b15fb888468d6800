// A persistent fork-join thread pool for kernels. The calling thread takes part in
// every Run, so a pool of N threads creates N-1 workers once, at construction;
// nothing is created or allocated per Run. Workers spin briefly between Runs (decode
// issues hundreds of small Runs per token) and then sleep on a condition variable.
//
// Run returns once every task has finished, not once every worker has looked at the
// job: a worker that is asleep or descheduled (another process holds its core) when
// a Run starts is not waited for; the threads that run take all the tasks. The
// caller spins only briefly for tasks still running on other threads, then sleeps,
// leaving its core to them (on a loaded host, a spinning caller would keep the very
// thread it waits for off that core).
//
// Contention: when other processes compete for the cores, the pool's threads get
// time slices, not cores. A worker taken off its core while it holds a task holds
// the whole Run up (a slice, milliseconds), and a worker spinning for the next Run
// while the caller is off its core burns the share the caller needs. The pool counts
// two signs of it per `window_ns` window: stalls (Runs in which the caller waited for
// the workers longer than it worked and longer than `stall_ns`) and the caller's own
// preemptions (the kernel's count of involuntary context switches; sleeping does not
// count). A window with `contention_events` of them or more is contended: the pool
// then runs every task on the caller alone ("solo") for a while, then runs in
// parallel again for one window as a probe. A contended probe makes the solo time
// four times longer (up to `max_solo_ns`); it starts over from `min_solo_ns` after
// `calm_ns` without contention. Single events are not enough: a shared VM shows a
// few of them on an idle host too (the hypervisor takes vCPUs away, and a worker
// woken on the caller's core preempts it), far fewer than under a competing load, and
// under such a load decoding alone on the caller beats threads that keep waiting for
// each other (docs/threading.md has the counts and times).
//
// Thread-safety: Run may be called by one thread at a time (the pool's owner);
// Run must not be called from inside a task.
#ifndef DK_UTIL_THREAD_POOL_H_
#define DK_UTIL_THREAD_POOL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dk {

namespace internal {
class Team;
struct TeamMember;
// The team member the calling thread is, inside ThreadPool::RunTeam; else null.
inline thread_local TeamMember* t_team_member = nullptr;
[[noreturn]] void RunInsideTeam();
}  // namespace internal

// How a pool reacts to contention (see above). Times in nanoseconds.
struct ContentionOptions {
  bool enabled = true;                  // false: always parallel
  int64_t stall_ns = 200'000;           // a Run stalls when the caller waits longer than this
  int64_t window_ns = 100'000'000;      // stalls and preemptions are counted per window
  int contention_events = 12;           // stalls + preemptions in a window: contended
  int64_t min_solo_ns = 200'000'000;    // solo time after contention
  int64_t max_solo_ns = 1'600'000'000;
  int64_t calm_ns = 2'000'000'000;      // no contention this long: the solo time starts over
  // What the pool judges by: a steady clock in nanoseconds (the caller's waits, a
  // team run's barrier waits, windows, solo times) and the caller's count of
  // preemptions. Null: std::chrono::steady_clock and getrusage(RUSAGE_THREAD).
  // Tests set them, so that only the test makes stalls and preemptions and moves
  // time on; another process on the host cannot.
  int64_t (*now_ns)() = nullptr;
  int64_t (*preemptions)() = nullptr;
};

// Everything a pool's behaviour depends on, for tools to set from their flags and
// print in their records (Describe).
struct ThreadPoolOptions {
  int num_threads = 0;  // counts the caller; 0: one per hardware thread
  // How long a worker spins for the next Run before it sleeps (about 50-200 us: long
  // enough to bridge the gaps between the kernel launches of one decode step).
  int worker_spin = 1 << 14;
  // How long the caller (and a team member at a barrier) spins for tasks still
  // running on other threads before it sleeps or yields: a kernel's tasks end close
  // together on an idle host, so the wake-up (a futex) is rare there.
  int join_spin = 1 << 10;
  ContentionOptions contention;

  // num_threads resolved (0 becomes the hardware's count).
  int ResolvedThreads() const;
  // "threads=2 worker_spin=16384 join_spin=1024 adaptive=1".
  std::string Describe() const;
};

class ThreadPool {
 public:
  explicit ThreadPool(const ThreadPoolOptions& options);
  // `num_threads` counts the caller: 1 means "run everything on the caller".
  explicit ThreadPool(int num_threads, const ContentionOptions& contention = {});

  // Counts since construction (read by the caller's thread, like Run).
  struct Stats {
    int64_t parallel_runs = 0;  // Runs offered to the workers
    int64_t solo_runs = 0;      // Runs of 2+ tasks kept on the caller (contention)
    int64_t stalls = 0;         // parallel Runs that stalled
    int64_t contended_windows = 0;  // windows judged contended (solo windows are not judged)
  };
  const Stats& stats() const { return stats_; }
  // What the pool's threads wait on now, readable from any thread, so that tests can
  // see a thread park through the pool itself: how many workers sleep on the condition
  // variable for the next Run (they spin first, worker_spin), and whether the caller
  // sleeps in Run for a task still running on another thread (it spins first, join_spin).
  int sleeping_workers() const { return sleepers_.load(std::memory_order_seq_cst); }
  bool caller_sleeping() const { return caller_waiting_.load(std::memory_order_seq_cst); }
  const ThreadPoolOptions& options() const { return options_; }
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls f(task, thread) for every task in [0, num_tasks), each exactly once,
  // spread dynamically over the threads; `thread` is in [0, num_threads()).
  // Returns when all tasks have finished.
  template <typename F>
  void Run(int64_t num_tasks, const F& f) {
    if (num_tasks <= 0) return;
    if (internal::t_team_member != nullptr) internal::RunInsideTeam();
    if (workers_.empty() || num_tasks == 1 || (contention_.enabled && RunAlone())) {
      for (int64_t t = 0; t < num_tasks; ++t) f(t, 0);
      return;
    }
    // A job holds at most 2^31 - 1 tasks; more run as consecutive jobs.
    constexpr int64_t kMaxJob = (int64_t{1} << 31) - 1;
    for (int64_t first = 0; first < num_tasks; first += kMaxJob) {
      const int64_t count = std::min(kMaxJob, num_tasks - first);
      if (first == 0) {
        RunErased(count, &Trampoline<F>, &f);
      } else {
        auto shifted = [&f, first](int64_t task, int thread) { f(first + task, thread); };
        RunErased(count, &Trampoline<decltype(shifted)>, &shifted);
      }
    }
  }

  // Runs body() once on every thread of the pool that comes (the caller always;
  // a worker that is asleep or descheduled may not), as one job. Inside it, each
  // ParallelRanges call is shared by the members instead of being a job of its own:
  // every member makes the same calls in the same order (body must be the same
  // deterministic sequence on each), the units are split into one share per member
  // (member i, usually pool thread i, takes share i, so a thread streams the same
  // part of each kernel's weights), a member done with its share takes the shares
  // of members that have not come and steals from the others as ParallelRanges
  // does, and the call returns on every member once all its units are done: a
  // barrier of two atomics instead of a job hand-off. Code outside ParallelRanges
  // runs on every member, so it may write only the calling thread's own memory;
  // run shared writes through ParallelRanges (TeamSingle for a serial step). Run
  // must not be called inside (it aborts). `team` holds the calls' state (its
  // capacity bounds the ParallelRanges calls of one body).
  template <typename F>
  void RunTeam(internal::Team& team, const F& body);

 private:
  using TaskFn = void (*)(const void* ctx, int64_t task, int thread);
  template <typename F>
  static void Trampoline(const void* ctx, int64_t task, int thread) {
    (*static_cast<const F*>(ctx))(task, thread);
  }
  void RunErased(int64_t num_tasks, TaskFn fn, const void* ctx);
  // A team run whose caller waited `ns` in barriers after spinning: a stall when
  // longer than stall_ns (as a Run's join).
  void NoteTeamWait(int64_t ns);
  // Whether this Run runs on the caller alone; judges the window when it is over.
  bool RunAlone();
  // Starts a window at `now_ns`.
  void StartWindow(int64_t now_ns);
  void WorkerLoop(int thread);
  // Claims and runs tasks of the current job until none is left; returns how many.
  int64_t DrainTasks(int thread);

  std::vector<std::thread> workers_;
  // The current job. fn_ and ctx_ are read only by a thread that has claimed one of
  // its tasks, so they cannot change under it (the job is not done before that task).
  TaskFn fn_ = nullptr;
  const void* ctx_ = nullptr;
  // (num_tasks << 32) | next task to claim: a thread claims by fetch_add(1), which
  // yields the task and the count of one job together, so a late worker can only
  // claim tasks of the job that is current when it claims.
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<int64_t> done_{0};  // tasks of the current job finished
  alignas(64) std::atomic<uint64_t> generation_{0};  // bumped per Run: wakes workers
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_waiting_{false};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;       // workers wait here for the next Run
  std::condition_variable done_cv_;  // the caller waits here for the last task

  // Contention state, the caller's alone.
  enum class Mode { kParallel, kSolo, kProbe };
  ThreadPoolOptions options_;
  ContentionOptions& contention_ = options_.contention;
  Mode mode_ = Mode::kParallel;
  int64_t solo_until_ns_ = 0;
  int64_t solo_ns_ = 0;  // the next solo time
  int64_t last_contention_ns_ = 0;
  int64_t window_start_ns_ = 0;
  int64_t window_preemptions_ = 0;  // the caller's count at the window's start
  int64_t window_stalls_ = 0;
  Stats stats_;
};

// The pool shared by all kernels of this process that are not given one. Created
// on first use, with the options ConfigureSharedThreadPool set before that (default:
// one thread per hardware thread).
ThreadPool& SharedThreadPool();
// Sets the shared pool's options; false (and nothing changes) when the pool already
// exists with other options. Tools call it first, with their flags.
bool ConfigureSharedThreadPool(const ThreadPoolOptions& options);

// Splits [0, n) into `parts` nearly equal ranges whose boundaries are multiples of
// `align` (except the last end, n); returns the begin of range `i` (i <= parts).
inline size_t SplitPoint(size_t n, size_t parts, size_t i, size_t align) {
  if (i >= parts) return n;
  const size_t blocks = (n + align - 1) / align;
  const size_t begin = blocks * i / parts * align;
  return begin < n ? begin : n;
}

// How many tasks a kernel splits `units` units of work into on `pool` (nullptr: the
// caller alone): enough per thread to rebalance when one core is slowed by a
// neighbour.
inline int64_t TaskCount(size_t units, const ThreadPool* pool) {
  const size_t threads = pool ? pool->num_threads() : 1;
  return static_cast<int64_t>(std::min(units, threads == 1 ? 1 : threads * 4));
}

namespace internal {

constexpr int kMaxTeam = 64;             // members of a team run (pool threads)
constexpr uint64_t kTeamPiecesPerShare = 4;  // as ParallelRanges
inline void TeamPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// One thread's share of a ParallelRanges call: [begin, end) packed in one word, so
// that its owner (taking pieces at the front) and thieves (taking the back half)
// agree on what is left with one compare-and-swap each.
struct alignas(64) RangeShare {
  std::atomic<uint64_t> range{0};  // begin << 32 | end
  std::atomic<bool> started{false};
  static uint64_t Pack(uint64_t begin, uint64_t end) { return begin << 32 | end; }
};

// Takes up to `grain` units from the front of `share`; false when it is empty.
inline bool TakeFront(RangeShare& share, uint64_t grain, uint64_t* begin, uint64_t* end) {
  uint64_t v = share.range.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t b = v >> 32, e = v & 0xffffffffu;
    if (b >= e) return false;
    const uint64_t nb = std::min(e, b + grain);
    if (share.range.compare_exchange_weak(v, RangeShare::Pack(nb, e), std::memory_order_acq_rel)) {
      *begin = b;
      *end = nb;
      return true;
    }
  }
}

// Takes the back half (rounded up) of the fullest started share but `own`; false
// when no started share has units left.
inline bool StealBack(RangeShare* shares, int count, int own, uint64_t* begin, uint64_t* end) {
  for (;;) {
    int victim = -1;
    uint64_t most = 0, seen = 0;
    for (int i = 0; i < count; ++i) {
      if (i == own || !shares[i].started.load(std::memory_order_acquire)) continue;
      const uint64_t v = shares[i].range.load(std::memory_order_acquire);
      const uint64_t b = v >> 32, e = v & 0xffffffffu;
      if (e > b && e - b > most) most = e - b, victim = i, seen = v;
    }
    if (victim < 0) return false;
    const uint64_t b = seen >> 32, e = seen & 0xffffffffu, mid = e - (e - b + 1) / 2;
    if (shares[victim].range.compare_exchange_strong(seen, RangeShare::Pack(b, mid), std::memory_order_acq_rel)) {
      *begin = mid;
      *end = e;
      return true;
    }
  }
}


// One ParallelRanges call of a team run (ThreadPool::RunTeam): the first member to
// reach it splits the units, one share per member.
struct TeamCall {
  alignas(64) std::atomic<int> state{0};  // 0: not split, 1: being split, 2: split
  uint64_t units = 0, grain = 1;
  int shares = 0;
  alignas(64) std::atomic<uint64_t> done{0};  // units finished
  RangeShare share[kMaxTeam];
};

// The calls of one team run, reused run after run.
class Team {
 public:
  explicit Team(size_t max_calls) : calls_(new TeamCall[max_calls]), capacity_(max_calls) {}
  size_t capacity() const { return capacity_; }
  int members() const { return members_; }
  // Before a run, while no member is inside; `now_ns`: the pool's clock.
  void Reset(int members, int64_t (*now_ns)()) {
    members_ = members;
    now_ns_ = now_ns;
    for (size_t i = 0; i < capacity_; ++i) calls_[i].state.store(0, std::memory_order_relaxed);
    caller_wait_ns_.store(0, std::memory_order_relaxed);
  }
  TeamCall& Call(size_t i);  // aborts beyond capacity()
  // Time the pool's caller spent in barriers after spinning (see RunTeam).
  void AddCallerWait(int64_t ns) { caller_wait_ns_.fetch_add(ns, std::memory_order_relaxed); }
  int64_t caller_wait_ns() const { return caller_wait_ns_.load(std::memory_order_relaxed); }
  int64_t NowNs() const { return now_ns_(); }

 private:
  std::unique_ptr<TeamCall[]> calls_;
  size_t capacity_;
  int members_ = 1;
  int64_t (*now_ns_)() = nullptr;
  std::atomic<int64_t> caller_wait_ns_{0};
};

struct TeamMember {
  Team* team;
  int slot;    // which share is its own
  int thread;  // the pool thread it runs on
  int join_spin;  // the pool's ThreadPoolOptions::join_spin
  size_t next_call = 0;
};

}  // namespace internal

// The pool thread index of the calling thread, for per-thread scratch used outside a
// pool task: a team member's pool thread inside a team run (ThreadPool::RunTeam,
// whose body runs on every member), else 0 (a pool's caller is its thread 0).
inline int CallerThread() {
  return internal::t_team_member != nullptr ? internal::t_team_member->thread : 0;
}

namespace internal {

// Waits (spins, then yields the core) until every unit of `c` is done.
void TeamBarrier(const TeamMember& m, TeamCall& c);

// ParallelRanges inside a team run.
template <typename F>
void TeamRanges(TeamMember& m, size_t units, const F& f) {
  TeamCall& c = m.team->Call(m.next_call++);
  int fresh = 0;
  if (c.state.compare_exchange_strong(fresh, 1, std::memory_order_acq_rel)) {
    const int shares = static_cast<int>(std::min<size_t>(
        {static_cast<size_t>(m.team->members()), units, static_cast<size_t>(kMaxTeam)}));
    uint64_t grain = 1;
    for (int i = 0; i < shares; ++i) {
      const uint64_t b = SplitPoint(units, shares, i, 1), e = SplitPoint(units, shares, i + 1, 1);
      c.share[i].range.store(RangeShare::Pack(b, e), std::memory_order_relaxed);
      c.share[i].started.store(false, std::memory_order_relaxed);
      grain = std::max<uint64_t>(grain, (e - b + kTeamPiecesPerShare - 1) / kTeamPiecesPerShare);
    }
    c.units = units;
    c.grain = grain;
    c.shares = shares;
    c.done.store(0, std::memory_order_relaxed);
    c.state.store(2, std::memory_order_release);
  } else {
    while (c.state.load(std::memory_order_acquire) != 2) TeamPause();
  }
  int own = -1;  // a share this member has emptied: where its stolen ranges go
  auto walk = [&](int s) {
    uint64_t b, e;
    while (TakeFront(c.share[s], c.grain, &b, &e)) {
      f(static_cast<size_t>(b), static_cast<size_t>(e), m.thread);
      c.done.fetch_add(e - b, std::memory_order_acq_rel);
    }
    own = s;
  };
  // Its own share, then those of members that have not come.
  for (int k = 0; k < c.shares; ++k) {
    const int s = (m.slot + k) % c.shares;
    if (!c.share[s].started.load(std::memory_order_acquire) &&
        !c.share[s].started.exchange(true, std::memory_order_acq_rel)) {
      walk(s);
    }
  }
  uint64_t b, e;
  while (own >= 0 && StealBack(c.share, c.shares, own, &b, &e)) {
    c.share[own].range.store(RangeShare::Pack(b, e), std::memory_order_release);
    walk(own);
  }
  TeamBarrier(m, c);
}
}  // namespace internal

// Calls f(begin, end, thread) on ranges that cover [0, units) exactly once, for row
// kernels that stream their weights. Unlike Run over TaskCount tasks, each thread's
// ranges form ONE sequential stream: [0, units) is cut into num_threads() nearly
// equal shares, one task each; the thread that takes a share walks it front to back
// in pieces of about a quarter of it; a thread done with its share takes the back
// half of what is left of the fullest share another thread has started, and walks
// that the same way.
// Every task of Run starts a new stream, and the hardware prefetchers need about a
// microsecond to get a new one up to speed, so several tasks per thread read a
// model's weights measurably slower than one stream per thread (docs/threading.md).
// Stealing keeps what the 4 tasks were for: a thread slowed by a
// neighbour, or one that never shows up (Run does not wait for it), holds nothing
// up. A share is stolen from only once its owner has started it, so a pool that
// runs every task on the caller (one thread, or contention) walks [0, units) in
// order. Pool null: f(0, units, 0).
template <typename F>
void ParallelRanges(ThreadPool* pool, size_t units, const F& f) {
  if (units == 0) return;
  if (internal::t_team_member != nullptr) {  // inside RunTeam: shared by its members
    internal::TeamRanges(*internal::t_team_member, units, f);
    return;
  }
  constexpr int kMaxShares = 64;
  constexpr uint64_t kPiecesPerShare = 4;
  const int shares = pool ? static_cast<int>(std::min<size_t>({static_cast<size_t>(pool->num_threads()),
                                                                units, static_cast<size_t>(kMaxShares)}))
                          : 1;
  if (shares <= 1) {
    f(size_t{0}, units, 0);
    return;
  }
  if (units >> 32) {  // beyond a share's packed range: Run's tasks, as TaskCount splits
    const int64_t tasks = TaskCount(units, pool);
    pool->Run(tasks, [&](int64_t t, int thread) {
      f(SplitPoint(units, tasks, t, 1), SplitPoint(units, tasks, t + 1, 1), thread);
    });
    return;
  }
  internal::RangeShare share[kMaxShares];
  uint64_t grain = 1;
  for (int i = 0; i < shares; ++i) {
    const uint64_t b = SplitPoint(units, shares, i, 1), e = SplitPoint(units, shares, i + 1, 1);
    share[i].range.store(internal::RangeShare::Pack(b, e), std::memory_order_relaxed);
    grain = std::max<uint64_t>(grain, (e - b + kPiecesPerShare - 1) / kPiecesPerShare);
  }
  pool->Run(shares, [&](int64_t t, int thread) {
    const int own = static_cast<int>(t);
    share[own].started.store(true, std::memory_order_release);
    uint64_t b, e;
    for (;;) {
      while (internal::TakeFront(share[own], grain, &b, &e)) f(static_cast<size_t>(b), static_cast<size_t>(e), thread);
      if (!internal::StealBack(share, shares, own, &b, &e)) return;
      // The stolen range becomes this thread's share (empty until now), to walk
      // front to back and to be stolen from in turn.
      share[own].range.store(internal::RangeShare::Pack(b, e), std::memory_order_release);
    }
  });
}

template <typename F>
void ThreadPool::RunTeam(internal::Team& team, const F& body) {
  team.Reset(num_threads(), contention_.now_ns);
  Run(num_threads(), [&](int64_t t, int thread) {
    internal::TeamMember m{&team, static_cast<int>(t), thread, options_.join_spin};
    internal::t_team_member = &m;
    body();
    internal::t_team_member = nullptr;
  });
  NoteTeamWait(team.caller_wait_ns());
}

// fn() once: on the caller outside a team run, on one member inside one (the
// others wait for it there).
template <typename F>
void TeamSingle(ThreadPool* pool, const F& fn) {
  ParallelRanges(pool, 1, [&](size_t, size_t, int) { fn(); });
}

}  // namespace dk

#endif  // DK_UTIL_THREAD_POOL_H_
