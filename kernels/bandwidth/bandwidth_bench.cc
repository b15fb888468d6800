// Read bandwidth of this machine: streaming sum over a 1 GiB buffer (32x the L3),
// 1 and 2 threads, 4 KiB pages and huge pages.
//   ./bazelw run --config=opt //kernels/bandwidth:bandwidth_bench
#include <algorithm>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/bandwidth/bandwidth.h"

namespace dk::kernels {
namespace {

void BM_ReadBandwidth(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  BandwidthOptions options;
  options.passes = 1;
  options.page_mode = state.range(1) ? PageMode::kHugePages : PageMode::kDefault;
  MeasureReadBandwidth(&pool, options);  // allocate and touch outside the timing
  std::vector<double> samples;
  for (auto _ : state) {
    samples.push_back(MeasureReadBandwidth(&pool, options));
  }
  std::sort(samples.begin(), samples.end());
  state.counters["GB/s"] = samples[samples.size() / 2];
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * options.bytes);
}
BENCHMARK(BM_ReadBandwidth)
    ->ArgNames({"threads", "hugepages"})
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dk::kernels
