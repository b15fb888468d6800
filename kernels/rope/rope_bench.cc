// RoPE for one decode position: 32 query heads + 8 key heads of 64 (llama32_1b).
//   ./bazelw run --config=opt //kernels/rope:rope_bench
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/rope/rope.h"

namespace dk::kernels {
namespace {

void BM_Rope(benchmark::State& state) {
  const size_t heads = state.range(0), head_dim = 64;
  RopeConfig c;
  c.theta = 500000.0f;
  c.llama3_scaling = true;
  auto table = RopeTable::Create(c, 2048);
  std::vector<bf16> x(heads * head_dim, F32ToBf16(0.5f));
  size_t pos = 0;
  for (auto _ : state) {
    RopeHalfSplit(x.data(), heads, head_dim, table->cos(pos), table->sin(pos));
    benchmark::DoNotOptimize(x.data());
    pos = (pos + 1) % 2048;
  }
  state.SetBytesProcessed(state.iterations() * heads * head_dim * 2 * sizeof(bf16));
}
BENCHMARK(BM_Rope)->Arg(8)->Arg(32);

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
