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

// A measurement and what it read. The figure is `bytes_per_pass / seconds * 1e-9` of
// the median pass; the rest says what the passes did, so that a test can check the
// figure's numerator against the bytes the threads summed, and those against the
// buffer's contents, instead of checking how fast the host happened to be.
struct BandwidthReport {
  double gbs = 0;             // the median pass's read bandwidth, in GB/s (1e9 B/s)
  double seconds = 0;         // that pass's time
  size_t bytes_per_pass = 0;  // what one pass counts: options.bytes in whole floats
  int passes = 0;             // passes made
  size_t bytes_summed = 0;    // over all passes, the bytes of the ranges the threads summed
  double sum = 0;             // over all passes, the sum of every float read
};

// The buffer holds float(i & 1023) at float index i (each pass sums all of it).
// The buffer is allocated and touched on the first call for a given size and page
// mode and reused afterwards (so repeated calls measure reads, not page faults).
// Thread-safety: calls from several threads take turns (one measurement at a time:
// two at once would share the memory bus and the cached buffer).
BandwidthReport MeasureReadBandwidthReport(ThreadPool* pool, const BandwidthOptions& options = {});

// MeasureReadBandwidthReport's figure: the median read bandwidth over `passes` full
// passes, in GB/s (1e9 B/s).
double MeasureReadBandwidth(ThreadPool* pool, const BandwidthOptions& options = {});

// Sums `n` floats with SIMD (the streaming read used above); exposed for tests.
float StreamSum(const float* data, size_t n);

}  // namespace dk::kernels

#endif  // DK_KERNELS_BANDWIDTH_BANDWIDTH_H_
