// Multi-row GEMM (gemm.h) throughput for batched prefill, in GFLOP/s = 2 rows cols m
// / time, at the llama32_1b (2048x2048 q/o, 8192x2048 gate/up, 2048x8192 down) and
// SmolLM2-135M (576x576, 1536x576, 576x1536) shapes, per weight format, for m token
// rows in {1, 5, 8, 16, 32, 64, 512} (block formats: 1, 64, 512 here and 2..8 beside the
// single-row GEMV, RegisterDraftChecks) and 1 or 2 threads. Weights rotate over >= 64 MiB of
// distinct matrices so that, as in a prefill over many layers, they come from DRAM.
//   ./bazelw run --config=opt //kernels/gemv:gemm_bench -- --benchmark_filter=...
// Arguments: format (kFormats index), shape (kShapes index), m, threads. Counter solo:
// the share of the pool's runs kept on the caller because the host looked contended.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/gemv/gemm.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_quant_ref.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/gemv/quantize.h"
#include "util/aligned_buffer.h"

namespace dk::kernels {
namespace {

struct Shape {
  size_t rows, cols;
};
constexpr Shape kShapes[] = {{2048, 2048}, {8192, 2048}, {2048, 8192}, {576, 576}, {1536, 576}, {576, 1536}};
constexpr WeightFormat kFormats[] = {WeightFormat::kBf16Packed, WeightFormat::kBf16X12, WeightFormat::kQ8_0,
                                     WeightFormat::kQ4_K,       WeightFormat::kQ5_0,    WeightFormat::kQ6_K,
                                     WeightFormat::kBf16RowMajor, WeightFormat::kQ4_0,  WeightFormat::kQ4_1};
constexpr size_t kMinRotationBytes = size_t{64} << 20;

// Random bf16 weights of a trained matrix's range (about 1e-2, few exponents per block).
std::vector<bf16> RandomWeights(size_t n, uint32_t* state) {
  std::vector<bf16> w(n);
  for (auto& e : w) {
    *state = *state * 1664525u + 1013904223u;
    e = F32ToBf16(static_cast<float>(static_cast<int32_t>(*state >> 8)) * 1e-9f);
  }
  return w;
}

// One matrix of `s` in `f`.
AlignedBuffer<uint8_t> MakeWeights(WeightFormat f, const Shape& s, uint32_t* state) {
  if (formats::IsBlockFormat(f) && !CanQuantizeWeights(f)) {  // only read from files: random blocks
    const std::vector<uint8_t> blocks = ref::RandomBlocks(f, s.rows, s.cols, *state += 7);
    AlignedBuffer<uint8_t> out(blocks.size(), PageMode::kHugePages);
    std::copy(blocks.begin(), blocks.end(), out.data());
    return out;
  }
  const std::vector<bf16> w = RandomWeights(s.rows * s.cols, state);
  size_t bytes = s.rows * s.cols * sizeof(bf16);
  if (f == WeightFormat::kBf16Packed) bytes = PackedGemvElements(s.rows, s.cols) * sizeof(bf16);
  if (f == WeightFormat::kBf16X12) bytes = X12GemvBytes(s.rows, s.cols);
  if (formats::IsBlockFormat(f)) bytes = s.rows * formats::RowBytes(f, s.cols);
  AlignedBuffer<uint8_t> out(bytes, PageMode::kHugePages);
  if (f == WeightFormat::kBf16RowMajor) std::copy(w.begin(), w.end(), reinterpret_cast<bf16*>(out.data()));
  if (f == WeightFormat::kBf16Packed) PackGemvWeights(w.data(), s.rows, s.cols, reinterpret_cast<bf16*>(out.data()));
  if (f == WeightFormat::kBf16X12) PackX12GemvWeights(w.data(), s.rows, s.cols, out.data());
  if (formats::IsBlockFormat(f)) QuantizeWeights(f, w.data(), s.rows, s.cols, out.data());
  return out;
}

const std::vector<AlignedBuffer<uint8_t>>& WeightSet(WeightFormat f, const Shape& s) {
  static auto* sets = new std::map<std::tuple<int, size_t, size_t>, std::vector<AlignedBuffer<uint8_t>>>();
  auto& set = (*sets)[{static_cast<int>(f), s.rows, s.cols}];
  if (!set.empty()) return set;
  uint32_t state = 12345;
  set.push_back(MakeWeights(f, s, &state));
  const size_t copies = std::max<size_t>(1, (kMinRotationBytes + set[0].size() - 1) / set[0].size());
  while (set.size() < copies) set.push_back(MakeWeights(f, s, &state));
  return set;
}

// One benchmark: format, shape, m and threads from the arguments; call(f, s, m, set, i,
// x, y, pool) is timed on weight matrices i = 0, step, 2 step, ... of the rotation, and
// GFLOP/s counts `matrices` GEMMs of the shape per call.
template <typename Call>
void Run(benchmark::State& state, size_t step, double matrices, const Call& call) {
  const WeightFormat f = kFormats[state.range(0)];
  const Shape s = kShapes[state.range(1)];
  const size_t m = static_cast<size_t>(state.range(2));
  ThreadPool pool(static_cast<int>(state.range(3)));
  const auto& set = WeightSet(f, s);
  std::vector<bf16> x(m * s.cols);
  for (size_t k = 0; k < x.size(); ++k) x[k] = F32ToBf16(static_cast<float>(k % 13) - 6);
  std::vector<bf16> y(m * s.rows);
  size_t i = 0, calls = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    call(f, s, m, set, i, x.data(), y.data(), &pool);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(y.data());
    i = (i + step) % set.size();
    ++calls;
  }
  state.counters["GFLOP/s"] = matrices * 2.0 * s.rows * s.cols * m * static_cast<double>(calls) / seconds * 1e-9;
  // The pool keeps runs on the caller while it judges the host contended (util/thread_pool.h,
  // ContentionOptions): the share of runs that went solo, so that a 2-thread figure that
  // ran on one thread says so.
  const auto& stats = pool.stats();
  const double runs = static_cast<double>(stats.parallel_runs + stats.solo_runs);
  state.counters["solo"] = runs > 0 ? static_cast<double>(stats.solo_runs) / runs : 0.0;
  state.SetLabel(std::string(formats::Name(f)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                 " " + (formats::IsBlockFormat(f) ? QuantGemvTargetName(QuantActivations::kInt8) : GemvTargetName()));
}

using WeightSetT = std::vector<AlignedBuffer<uint8_t>>;

void BM_Gemm(benchmark::State& state) {
  Run(state, 1, 1.0, [](WeightFormat f, const Shape& s, size_t m, const WeightSetT& set, size_t i, const bf16* x,
                        bf16* y, ThreadPool* pool) {
    Gemm(f, set[i].data(), s.rows, s.cols, x, s.cols, m, y, s.rows, pool);
  });
}

// The fused MLP entry: RmsNormGemmSiluMul over gate and up (two matrices of the shape),
// GFLOP/s of both GEMMs. Arguments: format, shape, m, threads.
void BM_RmsNormGemmSiluMul(benchmark::State& state) {
  const std::vector<bf16> norm(kShapes[state.range(1)].cols, F32ToBf16(1.0f));
  Run(state, 2, 2.0, [&](WeightFormat f, const Shape& s, size_t m, const WeightSetT& set, size_t i, const bf16* x,
                         bf16* y, ThreadPool* pool) {
    const FusedWeight gate{set[i].data(), s.rows}, up{set[(i + 1) % set.size()].data(), s.rows};
    RmsNormGemmSiluMul(f, x, s.cols, m, norm.data(), 1e-5f, s.cols, gate, up, y, s.rows, pool);
  });
}
BENCHMARK(BM_RmsNormGemmSiluMul)
    ->ArgsProduct({{0, 1, 2}, {1, 4}, {64, 512}, {1, 2}})
    ->UseRealTime()
    ->MinTime(0.2);

void Args(benchmark::internal::Benchmark* b) {
  for (int f = 0; f < static_cast<int>(std::size(kFormats)); ++f) {
    for (int s = 0; s < static_cast<int>(std::size(kShapes)); ++s) {
      if (kShapes[s].cols % formats::BlockElems(kFormats[f]) != 0) continue;  // K-quants at SmolLM2's 576
      for (int m : {1, 5, 8, 16, 32, 64, 512}) {
        if (formats::IsBlockFormat(kFormats[f]) && (m == 5 || m == 8)) continue;  // RegisterDraftChecks
        if (formats::IsBlockFormat(kFormats[f]) && (m == 16 || m == 32)) continue;  // bf16: around kX12RebuildTokens
        for (int threads : {1, 2}) b->Args({f, s, m, threads});
      }
    }
  }
}
BENCHMARK(BM_Gemm)->Apply(Args)->UseRealTime()->MinTime(0.2);

// The single-row entry the decode programs call (QuantGemv, kInt8, bf16 x and y): the
// baseline that a small-m Gemm (a draft check of m = k + 1 rows) is held against.
// Arguments: format, shape, 1, threads.
void BM_QuantGemv(benchmark::State& state) {
  Run(state, 1, 1.0, [](WeightFormat f, const Shape& s, size_t, const WeightSetT& set, size_t i, const bf16* x,
                        bf16* y, ThreadPool* pool) {
    QuantGemv(f, QuantActivations::kInt8, set[i].data(), s.rows, s.cols, x, y, pool);
  });
}

// Draft checks: m in 2..8 on the quantized formats at SmolLM2's shapes (576x1536,
// 1536x576, 576x576) and llama32_1b's MLP (8192x2048, 2048x8192), registered per
// format, shape and thread count right after BM_QuantGemv on the same shape, so that
// the ratios to it compare runs seconds apart on this host's varying bandwidth.
void RegisterDraftChecks() {
  for (int f : {2, 8, 7, 3, 4, 5}) {  // Q8_0, Q4_1, Q4_0, Q4_K, Q5_0, Q6_K
    for (int s : {5, 4, 3, 1, 2}) {
      if (kShapes[s].cols % formats::BlockElems(kFormats[f]) != 0) continue;
      for (int threads : {1, 2}) {
        benchmark::RegisterBenchmark("BM_QuantGemv", BM_QuantGemv)->Args({f, s, 1, threads})->UseRealTime()->MinTime(0.2);
        for (int m : {2, 3, 4, 5, 8}) {
          benchmark::RegisterBenchmark("BM_Gemm", BM_Gemm)->Args({f, s, m, threads})->UseRealTime()->MinTime(0.2);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dk::kernels

int main(int argc, char** argv) {
  dk::kernels::RegisterDraftChecks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
