// Sampler::Sample on one decode step's logits (vocabulary 262144, Gemma 3's), with a
// repetition penalty of 1.1 over 64 history tokens: greedy, typical options
// (temperature 0.8, top-k 40, top-p 0.95), top-p alone and the full softmax (top-k 0,
// top-p 1). Counter: us per Sample.
//   ./bazelw run --config=opt //runtime:sampling_bench
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "runtime/sampling.h"

namespace dk::runtime {
namespace {

// Logit-like values: normal, with a few dozen clear favourites as a trained model
// has.
std::vector<float> Logits(size_t n) {
  std::vector<float> v(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  for (float& x : v) x = normal(rng);
  for (size_t i = 0; i < 40; ++i) v[(i * 7919) % n] = 14.0f + 0.1f * i;
  return v;
}

void BM_Sample(benchmark::State& state, float temperature, int top_k, float top_p) {
  const std::vector<float> logits = Logits(262144);
  const std::vector<uint32_t> history(64, 17);
  SamplingOptions options;
  options.temperature = temperature;
  options.top_k = top_k;
  options.top_p = top_p;
  options.repetition_penalty = 1.1f;
  Sampler sampler = *Sampler::Create(options);
  size_t calls = 0;
  double seconds = 0;
  uint64_t sink = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    sink += sampler.Sample(logits, history);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++calls;
  }
  benchmark::DoNotOptimize(sink);
  state.counters["us_per_sample"] = seconds / static_cast<double>(calls) * 1e6;
}

BENCHMARK_CAPTURE(BM_Sample, greedy, 0.0f, 0, 1.0f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, typical_t08_k40_p095, 0.8f, 40, 0.95f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, t08_p095_no_k, 0.8f, 0, 0.95f)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sample, full_softmax_t08, 0.8f, 0, 1.0f)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dk::runtime

BENCHMARK_MAIN();
