// Internal: splits element ranges over SharedThreadPool() for the loaders and the
// synthetic generator. Like SharedThreadPool().Run, must not be called from two
// threads at once or from inside a pool task.
#ifndef DK_WEIGHTS_PARALLEL_H_
#define DK_WEIGHTS_PARALLEL_H_

#include <cstdint>

#include "util/thread_pool.h"

namespace dk::weights {

// Calls f(begin, end) over [0, n) in chunks of `chunk` elements (the last shorter),
// on the shared pool when there is more than one chunk.
template <typename F>
void ParallelChunks(int64_t n, int64_t chunk, const F& f) {
  if (n <= 0) return;
  const int64_t tasks = (n + chunk - 1) / chunk;
  if (tasks == 1) {
    f(int64_t{0}, n);
    return;
  }
  SharedThreadPool().Run(tasks, [&](int64_t t, int /*thread*/) {
    const int64_t begin = t * chunk;
    const int64_t end = begin + chunk < n ? begin + chunk : n;
    f(begin, end);
  });
}

}  // namespace dk::weights

#endif  // DK_WEIGHTS_PARALLEL_H_
