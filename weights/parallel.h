// Internal: splits element ranges over the pool a loader was given, for the loaders
// and the synthetic generator. A pool runs one job at a time (util/thread_pool.h), so
// two loads at once need two pools (or none); never called from inside a pool task.
#ifndef DK_WEIGHTS_PARALLEL_H_
#define DK_WEIGHTS_PARALLEL_H_

#include <cstdint>

#include "util/thread_pool.h"

namespace dk::weights {

// Calls f(begin, end) over [0, n) in chunks of `chunk` elements (the last shorter),
// on `pool` when there is more than one chunk; pool null: all on the caller.
template <typename F>
void ParallelChunks(ThreadPool* pool, int64_t n, int64_t chunk, const F& f) {
  if (n <= 0) return;
  const int64_t tasks = (n + chunk - 1) / chunk;
  if (tasks == 1 || pool == nullptr) {
    for (int64_t begin = 0; begin < n; begin += chunk) f(begin, begin + chunk < n ? begin + chunk : n);
    return;
  }
  pool->Run(tasks, [&](int64_t t, int /*thread*/) {
    const int64_t begin = t * chunk;
    const int64_t end = begin + chunk < n ? begin + chunk : n;
    f(begin, end);
  });
}

}  // namespace dk::weights

#endif  // DK_WEIGHTS_PARALLEL_H_
