// RMSNorm at decode sizes (hidden 576 and 2048); runs from L1 in decode.
//   ./bazelw run --config=opt //kernels/norm:rmsnorm_bench
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/norm/rmsnorm.h"

namespace dk::kernels {
namespace {

void BM_RmsNorm(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<bf16> x(n), w(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = F32ToBf16((i % 17) * 0.1f - 0.8f);
    w[i] = F32ToBf16(1.0f + (i % 5) * 0.01f);
  }
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), n, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 3 * sizeof(bf16));
}
BENCHMARK(BM_RmsNorm)->Arg(576)->Arg(2048);

// QK-norm: heads x head_dim (Qwen3-0.6B: q 16 x 128, k 8 x 128).
void BM_RmsNormHeads(benchmark::State& state) {
  const size_t heads = state.range(0), hd = state.range(1), n = heads * hd;
  std::vector<bf16> x(n), w(hd), out(n);
  for (size_t i = 0; i < n; ++i) x[i] = F32ToBf16((i % 17) * 0.1f - 0.8f);
  for (size_t i = 0; i < hd; ++i) w[i] = F32ToBf16(1.0f + (i % 5) * 0.01f);
  for (auto _ : state) {
    RmsNormHeads(x.data(), w.data(), heads, hd, 1e-6f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * (2 * n + hd) * sizeof(bf16));
}
BENCHMARK(BM_RmsNormHeads)->Args({16, 128})->Args({8, 128});

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
