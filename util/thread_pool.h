// A persistent fork-join thread pool for kernels. The calling thread takes part in
// every Run, so a pool of N threads creates N-1 workers once, at construction;
// nothing is created or allocated per Run. Workers spin briefly between Runs (decode
// issues hundreds of small Runs per token) and then sleep on a condition variable.
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
#include <mutex>
#include <thread>
#include <vector>

namespace dk {

class ThreadPool {
 public:
  // `num_threads` counts the caller: 1 means "run everything on the caller".
  explicit ThreadPool(int num_threads);
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
    if (workers_.empty() || num_tasks == 1) {
      for (int64_t t = 0; t < num_tasks; ++t) f(t, 0);
      return;
    }
    RunErased(num_tasks, &Trampoline<F>, &f);
  }

 private:
  using TaskFn = void (*)(const void* ctx, int64_t task, int thread);
  template <typename F>
  static void Trampoline(const void* ctx, int64_t task, int thread) {
    (*static_cast<const F*>(ctx))(task, thread);
  }
  void RunErased(int64_t num_tasks, TaskFn fn, const void* ctx);
  void WorkerLoop(int thread);
  void DrainTasks(int thread);

  std::vector<std::thread> workers_;
  // The current job; published by bumping generation_.
  TaskFn fn_ = nullptr;
  const void* ctx_ = nullptr;
  int64_t num_tasks_ = 0;
  alignas(64) std::atomic<int64_t> next_task_{0};
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> busy_workers_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

// The pool shared by all kernels of this process: DK_NUM_THREADS threads if set,
// else one per hardware thread. Created on first use.
ThreadPool& SharedThreadPool();

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

}  // namespace dk

#endif  // DK_UTIL_THREAD_POOL_H_
