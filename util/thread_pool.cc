#include "util/thread_pool.h"

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
// About 50-200 us of spinning before a worker goes to sleep: long enough to bridge
// the gaps between the kernel launches of one decode step.
constexpr int kSpinIterations = 1 << 14;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1) num_threads = 1;
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

void ThreadPool::DrainTasks(int thread) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= num_tasks_) return;
    fn_(ctx_, task, thread);
  }
}

void ThreadPool::RunErased(int64_t num_tasks, TaskFn fn, const void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the job
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  DrainTasks(0);
  while (busy_workers_.load(std::memory_order_acquire) != 0) DK_PAUSE();
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
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
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

ThreadPool& SharedThreadPool() {
  static ThreadPool* pool = [] {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("DK_NUM_THREADS")) {
      const int v = std::atoi(env);
      if (v > 0) n = v;
    }
    return new ThreadPool(n < 1 ? 1 : n);
  }();
  return *pool;
}

}  // namespace dk
