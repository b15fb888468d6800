// One read-bandwidth figure for tools/peer/ab.py, measured between the two engines'
// runs: the median of --passes streaming passes over --mib MiB (8x the L3 by default)
// with --threads threads and huge pages (as decodekit's weight BOs use), exactly the
// measurement decode_bench samples (kernels/bandwidth). Prints one line:
//   read_bandwidth_GBps=<x> threads=<n> mib=<m> passes=<p>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "kernels/bandwidth/bandwidth.h"
#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

ABSL_FLAG(int, threads, 1, "threads reading");
ABSL_FLAG(int, mib, 256, "buffer size in MiB");
ABSL_FLAG(int, passes, 5, "timed passes (the median is printed)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  dk::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  dk::kernels::BandwidthOptions options;
  options.bytes = static_cast<size_t>(absl::GetFlag(FLAGS_mib)) << 20;
  options.page_mode = dk::PageMode::kHugePages;
  options.passes = 1;
  dk::kernels::MeasureReadBandwidth(&pool, options);  // allocate and touch untimed
  options.passes = absl::GetFlag(FLAGS_passes);
  const double gbs = dk::kernels::MeasureReadBandwidth(&pool, options);
  std::printf("read_bandwidth_GBps=%.2f threads=%d mib=%d passes=%d\n", gbs,
              absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_mib), options.passes);
  return 0;
}
