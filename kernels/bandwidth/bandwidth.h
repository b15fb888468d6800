// Memory read bandwidth of this machine, measured the way decode reads weights: a
// read-only streaming pass over a buffer much larger than the last-level cache,
// split over the threads of a pool. Kernel benchmarks and the profiler state their
// throughput as a fraction of this figure measured in the same run, because the
// bandwidth of a shared host swings from minute to minute.
#ifndef DK_KERNELS_BANDWIDTH_BANDWIDTH_H_
#define DK_KERNELS_BANDWIDTH_BANDWIDTH_H_

#include <cstddef>

#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

namespace dk::kernels {

struct BandwidthOptions {
  size_t bytes = size_t{1} << 30;  // 1 GiB: 32x the 32 MiB L3 of this machine
  int passes = 5;                  // the median pass is reported
  PageMode page_mode = PageMode::kDefault;
};

// Returns the median read bandwidth over `passes` full passes, in GB/s (1e9 B/s).
// The buffer is allocated and touched on the first call for a given size and page
// mode and reused afterwards (so repeated calls measure reads, not page faults).
// Thread-safety: not thread-safe (shares the cached buffer).
double MeasureReadBandwidth(ThreadPool* pool, const BandwidthOptions& options = {});

// Sums `n` floats with SIMD (the streaming read used above); exposed for tests.
float StreamSum(const float* data, size_t n);

}  // namespace dk::kernels

#endif  // DK_KERNELS_BANDWIDTH_BANDWIDTH_H_
