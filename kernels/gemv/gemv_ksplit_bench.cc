// The K-split GEMV (npu2's down projection, K=8192 in chunks of 512) against the
// plain GEMV on the same matrices, as weight GB/s. On the CPU the K-split kernel
// exists so that an npu2 program computes what the NPU would; it is not a CPU
// speed path (its inner loop widens bf16 one vector at a time, without the plain
// GEMV's even/odd split or vdpbf16ps).
//   ./bazelw run --config=opt //kernels/gemv:gemv_ksplit_bench
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_ksplit.h"
#include "util/aligned_buffer.h"

namespace dk::kernels {
namespace {

constexpr size_t kRows = 2048, kCols = 8192, kChunk = 512;
constexpr size_t kMinRotationBytes = size_t{256} << 20;  // past the last-level cache

// Distinct packed matrices, enough to read from memory as decode does.
const std::vector<AlignedBuffer<bf16>>& Weights() {
  static auto* set = [] {
    auto* s = new std::vector<AlignedBuffer<bf16>>();
    const size_t bytes = kRows * kCols * sizeof(bf16);
    std::vector<bf16> w(kRows * kCols);
    uint32_t state = 12345;
    for (size_t c = 0; c < std::max<size_t>(1, kMinRotationBytes / bytes); ++c) {
      for (auto& e : w) {
        state = state * 1664525u + 1013904223u;
        e = F32ToBf16(static_cast<float>(static_cast<int32_t>(state >> 8)) * 1e-9f);
      }
      s->push_back(PackGemvWeights(w.data(), kRows, kCols, PageMode::kHugePages).data);
    }
    return s;
  }();
  return *set;
}

void BM_DownProjection(benchmark::State& state) {
  const bool ksplit = state.range(0) != 0;
  ThreadPool pool(static_cast<int>(state.range(1)));
  const auto& set = Weights();
  std::vector<bf16> x(kCols);
  for (size_t k = 0; k < kCols; ++k) x[k] = F32ToBf16(static_cast<float>(k % 13) - 6);
  std::vector<bf16> y(kRows);
  size_t i = 0, calls = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (ksplit) {
      KSplitGemv(set[i].data(), /*packed=*/true, kRows, kCols, kChunk, x.data(), y.data(), &pool);
    } else {
      PackedGemv(set[i].data(), kRows, kCols, x.data(), y.data(), &pool);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % set.size();
    ++calls;
  }
  state.counters["GB/s"] = static_cast<double>(calls) * kRows * kCols * sizeof(bf16) / seconds * 1e-9;
  state.SetLabel(ksplit ? "K-split 512, packed" : "plain, packed");
}
BENCHMARK(BM_DownProjection)
    ->ArgNames({"ksplit", "threads"})
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
