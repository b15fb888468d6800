// Argmax / TopK over decode-sized logits (smollm2 49152, llama3 128256 vocab).
// The logits stay in the cache between iterations, as in decode, where the LM head
// has just written them. Counter: GB/s of logits scanned. No pct_bw: the scan
// reads from cache, so DRAM bandwidth is not its bound.
//   ./bazelw run --config=opt //kernels/topk:topk_bench
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/topk/topk.h"

namespace dk::kernels {
namespace {

// Logit-like values (normal); `ascending` is the adversarial case where every
// element enters the top-k.
std::vector<float> Logits(size_t n, bool ascending) {
  std::vector<float> v(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (size_t i = 0; i < n; ++i) v[i] = ascending ? static_cast<float>(i) : normal(rng);
  return v;
}

template <typename Fn>
void Run(benchmark::State& state, size_t n, const Fn& fn) {
  size_t calls = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                   .count();
    ++calls;
  }
  state.counters["GB/s"] = static_cast<double>(calls) * n * sizeof(float) / seconds * 1e-9;
  state.SetLabel(TopKTargetName());
}

void BM_Argmax(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> logits = Logits(n, false);
  Run(state, n, [&] { benchmark::DoNotOptimize(Argmax(logits.data(), n)); });
}
BENCHMARK(BM_Argmax)->ArgName("n")->Arg(49152)->Arg(128256)->Unit(benchmark::kMicrosecond);

void BM_TopK(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const size_t k = static_cast<size_t>(state.range(1));
  const std::vector<float> logits = Logits(n, state.range(2) != 0);
  std::vector<uint32_t> ids(k);
  std::vector<float> values(k);
  Run(state, n, [&] {
    TopK(logits.data(), n, k, ids.data(), values.data());
    benchmark::DoNotOptimize(ids.data());
  });
}
BENCHMARK(BM_TopK)
    ->ArgNames({"n", "k", "ascending"})
    ->ArgsProduct({{49152, 128256}, {5, 16}, {0}})
    ->Args({128256, 5, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
