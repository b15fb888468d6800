// GEMV throughput at llama32_1b decode shapes, as a fraction of the read bandwidth
// measured in the same benchmark, right before the timed loop, with the same threads.
// As in decode, weights come from memory: each benchmark rotates over enough
// distinct matrices (>= 256 MiB) to defeat the 32 MiB last-level cache.
//   ./bazelw run --config=opt //kernels/gemv:gemv_bench
// Counters: GB/s (weight bytes / time), bw_GB/s (streaming read bandwidth, same
// threads), pct_bw = 100 * GB/s / bw_GB/s.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/bandwidth/bandwidth.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_x12.h"

namespace dk::kernels {
namespace {

struct Shape {
  size_t rows, cols;
};
// q/o proj, k/v proj, gate/up, down, LM head.
constexpr Shape kShapes[] = {
    {2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}};
constexpr size_t kMinRotationBytes = size_t{256} << 20;

// Distinct matrices for one (shape, layout), on huge pages as decode's weight BOs
// are; built once, reused by all thread counts.
const std::vector<AlignedBuffer<bf16>>& WeightSet(const Shape& s, bool packed) {
  static auto* sets =
      new std::map<std::tuple<size_t, size_t, bool>, std::vector<AlignedBuffer<bf16>>>();
  auto& set = (*sets)[{s.rows, s.cols, packed}];
  if (!set.empty()) return set;
  const size_t bytes = s.rows * s.cols * sizeof(bf16);
  const size_t copies = std::max<size_t>(1, (kMinRotationBytes + bytes - 1) / bytes);
  uint32_t state = 12345;
  std::vector<bf16> w(s.rows * s.cols);
  for (size_t c = 0; c < copies; ++c) {
    for (auto& e : w) {
      state = state * 1664525u + 1013904223u;
      e = F32ToBf16(static_cast<float>(static_cast<int32_t>(state >> 8)) * 1e-9f);
    }
    if (packed) {
      set.push_back(PackGemvWeights(w.data(), s.rows, s.cols, PageMode::kHugePages).data);
    } else {
      AlignedBuffer<bf16> buf(w.size(), PageMode::kHugePages);
      std::copy(w.begin(), w.end(), buf.data());
      set.push_back(std::move(buf));
    }
  }
  return set;
}

void BM_Gemv(benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  const bool packed = state.range(1) != 0;
  ThreadPool pool(static_cast<int>(state.range(2)));
  const auto& set = WeightSet(s, packed);
  std::vector<bf16> x(s.cols);
  for (size_t k = 0; k < s.cols; ++k) x[k] = F32ToBf16(static_cast<float>(k % 13) - 6);
  std::vector<float> y(s.rows);

  BandwidthOptions bw_options;
  bw_options.passes = 3;
  bw_options.page_mode = PageMode::kHugePages;  // as the weights (and decode's weight BOs)
  const double bw = MeasureReadBandwidth(&pool, bw_options);

  size_t i = 0, calls = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const bf16* w = set[i].data();
    if (packed) {
      PackedGemv(w, s.rows, s.cols, x.data(), y.data(), &pool);
    } else {
      Gemv(w, s.rows, s.cols, x.data(), y.data(), &pool);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                   .count();
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % set.size();
    ++calls;
  }
  const double gbs = static_cast<double>(calls) * s.rows * s.cols * sizeof(bf16) /
                     seconds * 1e-9;
  state.counters["GB/s"] = gbs;
  state.counters["bw_GB/s"] = bw;
  state.counters["pct_bw"] = 100.0 * gbs / bw;
  state.SetLabel(std::string(packed ? "packed " : "rowmajor ") + GemvTargetName());
}
// The same matrices in the 12-bit lossless layout (gemv_x12.h): GB/s counts the bf16
// bytes the GEMV computes on (as BM_Gemv, so the two compare), read_GB/s the bytes it
// streams.
void BM_X12Gemv(benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  ThreadPool pool(static_cast<int>(state.range(1)));
  static auto* sets = new std::map<std::pair<size_t, size_t>, std::vector<AlignedBuffer<uint8_t>>>();
  auto& set = (*sets)[{s.rows, s.cols}];
  size_t streamed = 0;
  if (set.empty()) {
    for (const auto& packed : WeightSet(s, /*packed=*/true)) {
      std::vector<bf16> w(s.rows * s.cols);
      for (size_t r = 0; r < s.rows; ++r) UnpackGemvRow(packed.data(), s.rows, s.cols, r, w.data() + r * s.cols);
      set.emplace_back(X12GemvBytes(s.rows, s.cols), PageMode::kHugePages);
      PackX12GemvWeights(w.data(), s.rows, s.cols, set.back().data());
    }
  }
  streamed = X12GemvStats(set[0].data(), s.rows, s.cols).streamed_bytes;
  std::vector<bf16> x(s.cols);
  for (size_t k = 0; k < s.cols; ++k) x[k] = F32ToBf16(static_cast<float>(k % 13) - 6);
  std::vector<float> y(s.rows);
  BandwidthOptions bw_options;
  bw_options.passes = 3;
  bw_options.page_mode = PageMode::kHugePages;
  const double bw = MeasureReadBandwidth(&pool, bw_options);
  size_t i = 0, calls = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    X12Gemv(set[i].data(), s.rows, s.cols, x.data(), y.data(), &pool);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % set.size();
    ++calls;
  }
  const double gbs = static_cast<double>(calls) * s.rows * s.cols * sizeof(bf16) / seconds * 1e-9;
  state.counters["GB/s"] = gbs;
  state.counters["read_GB/s"] = static_cast<double>(calls) * streamed / seconds * 1e-9;
  state.counters["bw_GB/s"] = bw;
  state.counters["pct_bw"] = 100.0 * gbs / bw;
  state.SetLabel(std::string("x12 ") + GemvTargetName());
}
BENCHMARK(BM_X12Gemv)
    ->ArgNames({"shape", "threads"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();

// The same rotation, read by the streaming sum instead of a GEMV: the bandwidth a
// read of one matrix-sized buffer reaches (short reads pay a fixed start-up cost,
// so small GEMVs are compared with this too).
void BM_StreamSameBuffers(benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  ThreadPool pool(static_cast<int>(state.range(1)));
  const auto& set = WeightSet(s, /*packed=*/true);
  const size_t floats = PackedGemvElements(s.rows, s.cols) / 2;
  const int threads = pool.num_threads();
  size_t i = 0, calls = 0;
  double seconds = 0;
  std::vector<float> partial(threads * 16);
  for (auto _ : state) {
    const float* data = reinterpret_cast<const float*>(set[i].data());
    const auto start = std::chrono::steady_clock::now();
    pool.Run(threads, [&](int64_t t, int thread) {
      const size_t b = SplitPoint(floats, threads, t, 16), e = SplitPoint(floats, threads, t + 1, 16);
      partial[thread * 16] += StreamSum(data + b, e - b);
    });
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    i = (i + 1) % set.size();
    ++calls;
  }
  benchmark::DoNotOptimize(partial.data());
  state.counters["GB/s"] = static_cast<double>(calls) * floats * sizeof(float) / seconds * 1e-9;
}
BENCHMARK(BM_StreamSameBuffers)
    ->ArgNames({"shape", "threads"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();

BENCHMARK(BM_Gemv)
    ->ArgNames({"shape", "packed", "threads"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
