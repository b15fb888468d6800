#include "util/thread_pool.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DK_PAUSE() _mm_pause()
#else
#define DK_PAUSE() std::this_thread::yield()
#endif

namespace dk {
namespace {

constexpr uint64_t kIndexMask = 0xffffffffu;

// The calling thread's involuntary context switches (preemptions) so far.
int64_t InvoluntarySwitches() {
#if defined(RUSAGE_THREAD)
  rusage u;
  if (getrusage(RUSAGE_THREAD, &u) == 0) return u.ru_nivcsw;
#endif
  return 0;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int ThreadPoolOptions::ResolvedThreads() const {
  if (num_threads > 0) return num_threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string ThreadPoolOptions::Describe() const {
  return "threads=" + std::to_string(ResolvedThreads()) + " worker_spin=" + std::to_string(worker_spin) +
         " join_spin=" + std::to_string(join_spin) + " adaptive=" + (contention.enabled ? "1" : "0");
}

ThreadPool::ThreadPool(int num_threads, const ContentionOptions& contention)
    : ThreadPool([&] {
        ThreadPoolOptions o;
        o.num_threads = std::max(1, num_threads);
        o.contention = contention;
        return o;
      }()) {}

ThreadPool::ThreadPool(const ThreadPoolOptions& options) : options_(options) {
  options_.num_threads = options.ResolvedThreads();
  options_.worker_spin = std::max(0, options.worker_spin);
  options_.join_spin = std::max(0, options.join_spin);
  const int num_threads = options_.num_threads;
  if (contention_.now_ns == nullptr) contention_.now_ns = &NowNs;
  if (contention_.preemptions == nullptr) contention_.preemptions = &InvoluntarySwitches;
  solo_ns_ = contention_.min_solo_ns;
  workers_.reserve(num_threads - 1);
  for (int t = 1; t < num_threads; ++t) {
    workers_.emplace_back([this, t] { WorkerLoop(t); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

int64_t ThreadPool::DrainTasks(int thread) {
  int64_t ran = 0;
  for (;;) {
    const uint64_t c = claim_.fetch_add(1, std::memory_order_acq_rel);
    const int64_t task = static_cast<int64_t>(c & kIndexMask);
    const int64_t num_tasks = static_cast<int64_t>(c >> 32);
    if (task >= num_tasks) return ran;
    fn_(ctx_, task, thread);
    ++ran;
    if (thread == 0) continue;  // the caller counts its own tasks when it is done
    if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == num_tasks &&
        caller_waiting_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::StartWindow(int64_t now_ns) {
  window_start_ns_ = now_ns;
  window_preemptions_ = contention_.preemptions();
  window_stalls_ = 0;
}

bool ThreadPool::RunAlone() {
  const int64_t now = contention_.now_ns();
  if (mode_ == Mode::kSolo) {
    if (now < solo_until_ns_) {
      ++stats_.solo_runs;
      return true;
    }
    mode_ = Mode::kProbe;
    StartWindow(now);
    return false;
  }
  const int64_t length = now - window_start_ns_;
  if (length < contention_.window_ns) return false;
  // A window much longer than window_ns (the pool sat idle) is not judged.
  const int64_t events = contention_.preemptions() - window_preemptions_ + window_stalls_;
  if (length < 2 * contention_.window_ns && events >= contention_.contention_events) {
    ++stats_.contended_windows;
    if (mode_ == Mode::kProbe) {
      solo_ns_ = std::min(4 * solo_ns_, contention_.max_solo_ns);
    } else if (now - last_contention_ns_ > contention_.calm_ns) {
      solo_ns_ = contention_.min_solo_ns;
    }
    last_contention_ns_ = now;
    mode_ = Mode::kSolo;
    solo_until_ns_ = now + solo_ns_;
    ++stats_.solo_runs;
    return true;
  }
  mode_ = Mode::kParallel;  // a probe without contention ends here
  StartWindow(now);
  return false;
}

void ThreadPool::RunErased(int64_t num_tasks, TaskFn fn, const void* ctx) {
  ++stats_.parallel_runs;
  const int64_t start_ns = contention_.enabled ? contention_.now_ns() : 0;
  fn_ = fn;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(num_tasks) << 32, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // wakes spinning workers
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  const int64_t mine = DrainTasks(0);
  const int64_t mine_done_ns = contention_.enabled ? contention_.now_ns() : 0;
  if (done_.fetch_add(mine, std::memory_order_seq_cst) + mine != num_tasks) {
    bool done = false;
    for (int i = 0; i < options_.join_spin && !done; ++i) {
      DK_PAUSE();
      done = done_.load(std::memory_order_acquire) == num_tasks;
    }
    if (!done) {
      std::unique_lock<std::mutex> lock(mu_);
      caller_waiting_.store(true, std::memory_order_seq_cst);
      done_cv_.wait(lock, [&] { return done_.load(std::memory_order_seq_cst) == num_tasks; });
      caller_waiting_.store(false, std::memory_order_relaxed);
    }
  }
  if (contention_.enabled) {
    const int64_t waited = contention_.now_ns() - mine_done_ns;
    if (waited > contention_.stall_ns && waited > mine_done_ns - start_ns) {
      ++stats_.stalls;
      ++window_stalls_;
    }
  }
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < options_.worker_spin; ++i) {
      DK_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lock, [&] {
        gen = generation_.load(std::memory_order_seq_cst);
        return gen != seen;
      });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = gen;
    if (stop_.load()) return;
    DrainTasks(thread);
  }
}

void ThreadPool::NoteTeamWait(int64_t ns) {
  if (contention_.enabled && ns > contention_.stall_ns) {
    ++stats_.stalls;
    ++window_stalls_;
  }
}

namespace internal {

void RunInsideTeam() {
  std::fprintf(stderr, "ThreadPool::Run called inside RunTeam (a kernel that is not team-safe)\n");
  std::abort();
}

TeamCall& Team::Call(size_t i) {
  if (i >= capacity_) {
    std::fprintf(stderr, "RunTeam: more than %zu ParallelRanges calls in one body\n", capacity_);
    std::abort();
  }
  return calls_[i];
}

void TeamBarrier(const TeamMember& m, TeamCall& c) {
  if (c.done.load(std::memory_order_acquire) >= c.units) return;
  for (int i = 0; i < m.join_spin; ++i) {
    DK_PAUSE();
    if (c.done.load(std::memory_order_acquire) >= c.units) return;
  }
  // A member holding units is off its core (a loaded host): give ours up meanwhile.
  const int64_t start = m.team->NowNs();
  while (c.done.load(std::memory_order_acquire) < c.units) std::this_thread::yield();
  if (m.thread == 0) m.team->AddCallerWait(m.team->NowNs() - start);
}

}  // namespace internal

namespace {
std::mutex g_shared_mu;
ThreadPoolOptions* g_shared_options = nullptr;  // set before the pool exists
std::atomic<ThreadPool*> g_shared_pool{nullptr};

bool SameOptions(const ThreadPoolOptions& a, const ThreadPoolOptions& b) {
  return a.Describe() == b.Describe();
}
}  // namespace

ThreadPool& SharedThreadPool() {
  if (ThreadPool* p = g_shared_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(g_shared_mu);
  if (g_shared_pool.load(std::memory_order_relaxed) == nullptr) {
    g_shared_pool.store(new ThreadPool(g_shared_options ? *g_shared_options : ThreadPoolOptions{}),
                        std::memory_order_release);
  }
  return *g_shared_pool.load(std::memory_order_relaxed);
}

bool ConfigureSharedThreadPool(const ThreadPoolOptions& options) {
  std::lock_guard<std::mutex> lock(g_shared_mu);
  if (ThreadPool* p = g_shared_pool.load(std::memory_order_relaxed)) return SameOptions(p->options(), options);
  delete g_shared_options;
  g_shared_options = new ThreadPoolOptions(options);
  return true;
}

}  // namespace dk
