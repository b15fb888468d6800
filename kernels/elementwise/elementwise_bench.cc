// Elementwise kernels at decode sizes (llama32_1b: hidden 2048, FFN 8192). These
// run from L1/L2 in decode, so GB/s here is cache bandwidth, not memory.
//   ./bazelw run --config=opt //kernels/elementwise:elementwise_bench
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/elementwise/elementwise.h"

namespace dk::kernels {
namespace {

std::vector<bf16> Values(size_t n, float scale) {
  std::vector<bf16> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = F32ToBf16(scale * ((i * 37 % 101) / 50.0f - 1));
  return v;
}

void BM_SiluMul(benchmark::State& state) {
  const size_t n = state.range(0);
  const auto g = Values(n, 8), u = Values(n, 2);
  std::vector<bf16> out(n);
  for (auto _ : state) {
    SiluMul(g.data(), u.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 3 * sizeof(bf16));
}
BENCHMARK(BM_SiluMul)->Arg(1536)->Arg(8192);

void BM_GeluTanhMul(benchmark::State& state) {
  const size_t n = state.range(0);
  const auto g = Values(n, 8), u = Values(n, 2);
  std::vector<bf16> out(n);
  for (auto _ : state) {
    GeluTanhMul(g.data(), u.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 3 * sizeof(bf16));
}
BENCHMARK(BM_GeluTanhMul)->Arg(2048);  // Gemma 3 270M FFN

void BM_Add(benchmark::State& state) {
  const size_t n = state.range(0);
  const auto a = Values(n, 8), b = Values(n, 2);
  std::vector<bf16> out(n);
  for (auto _ : state) {
    Add(a.data(), b.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 3 * sizeof(bf16));
}
BENCHMARK(BM_Add)->Arg(576)->Arg(2048);

void BM_AddBias(benchmark::State& state) {
  const size_t n = state.range(0);
  const std::vector<float> x(n, 0.5f);
  const auto bias = Values(n, 2);
  std::vector<bf16> out(n);
  for (auto _ : state) {
    AddBias(x.data(), bias.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * n * (sizeof(float) + 2 * sizeof(bf16)));
}
BENCHMARK(BM_AddBias)->Arg(128)->Arg(896);  // Qwen2.5-0.5B: k/v 128, q 896

void BM_Embedding(benchmark::State& state) {
  const size_t vocab = 128256, dim = 2048;
  const auto table = Values(vocab * dim, 1);
  std::vector<bf16> out(dim);
  uint32_t id = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(EmbeddingLookup(table.data(), vocab, dim, id, out.data()));
    id = (id + 7919) % vocab;
  }
  state.SetBytesProcessed(state.iterations() * dim * sizeof(bf16));
}
BENCHMARK(BM_Embedding);

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
