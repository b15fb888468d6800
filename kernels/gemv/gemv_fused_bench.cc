// A decoder layer's GEMVs, fused (gemv_fused.h) against unfused (RmsNorm, PackedGemv,
// SiluMul, Add launched one after the other), bf16 packed weights at llama32_1b and
// SmolLM2 shapes; "fused 2" runs the fused kernels on the x12 layout (gemv_x12.h). Each iteration runs one whole layer's worth: norm + q/k/v, O + add,
// norm + gate/up + SiLU*mul, down + add. Weights rotate over >= 256 MiB of distinct
// layers so they come from memory, as in decode. Interleave the two (the host's
// bandwidth drifts); the decode A/B (tools/bench decode_bench) is what claims cite.
//   ./bazelw run --config=opt //kernels/gemv:gemv_fused_bench
// Counters: GB/s of weight bytes.
#include <algorithm>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/bandwidth/bandwidth.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fused.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/norm/rmsnorm.h"

namespace dk::kernels {
namespace {

struct Model {
  size_t hidden, q, kv, ffn;
};
constexpr Model kModels[] = {{2048, 2048, 512, 8192}, {576, 576, 192, 1536}};
constexpr size_t kMinRotationBytes = size_t{256} << 20;

// Each matrix packed, and in the x12 layout (gemv_x12.h).
struct Matrix {
  PackedGemvWeights packed;
  AlignedBuffer<uint8_t> x12;
  const void* As(bool x12_layout) const {
    return x12_layout ? static_cast<const void*>(x12.data()) : static_cast<const void*>(packed.data.data());
  }
};
struct Layer {
  Matrix q, k, v, o, gate, up, down;
};

const std::vector<Layer>& Layers(int model) {
  static std::vector<Layer> sets[2];
  auto& set = sets[model];
  if (!set.empty()) return set;
  const Model m = kModels[model];
  const size_t bytes = 2 * (m.hidden * (m.q + 2 * m.kv) + m.q * m.hidden + 3 * m.hidden * m.ffn);
  const size_t copies = std::max<size_t>(1, (kMinRotationBytes + bytes - 1) / bytes);
  uint32_t state = 12345;
  auto make = [&](size_t rows, size_t cols) {
    std::vector<bf16> w(rows * cols);
    for (auto& e : w) {
      state = state * 1664525u + 1013904223u;
      e = F32ToBf16(static_cast<float>(static_cast<int32_t>(state >> 8)) * 1e-9f);
    }
    Matrix mat{PackGemvWeights(w.data(), rows, cols, PageMode::kHugePages),
               AlignedBuffer<uint8_t>(X12GemvBytes(rows, cols), PageMode::kHugePages)};
    PackX12GemvWeights(w.data(), rows, cols, mat.x12.data());
    return mat;
  };
  for (size_t c = 0; c < copies; ++c) {
    set.push_back({make(m.q, m.hidden), make(m.kv, m.hidden), make(m.kv, m.hidden), make(m.hidden, m.q),
                   make(m.ffn, m.hidden), make(m.ffn, m.hidden), make(m.hidden, m.ffn)});
  }
  return set;
}

void BM_Layer(benchmark::State& state) {
  const int model = static_cast<int>(state.range(0));
  const bool fused = state.range(1) != 0;
  const bool x12 = state.range(1) >= 2;   // fused, on the x12 layout
  const bool team = state.range(1) == 3;  // ... the layer's four launches as one team run
  const WeightFormat f = x12 ? WeightFormat::kBf16X12 : WeightFormat::kBf16Packed;
  ThreadPool pool(static_cast<int>(state.range(2)));
  const Model m = kModels[model];
  const auto& layers = Layers(model);
  std::vector<bf16> h(m.hidden, F32ToBf16(0.5f)), norm(m.hidden, F32ToBf16(1.0f)), xn(m.hidden), q(m.q), k(m.kv),
      v(m.kv), attn(m.q, F32ToBf16(0.25f)), o(m.hidden), h_mid(m.hidden), g(m.ffn), u(m.ffn), act(m.ffn),
      down(m.hidden), h_out(m.hidden);
  size_t i = 0;
  const size_t bytes = 2 * (m.hidden * (m.q + 2 * m.kv) + m.q * m.hidden + 3 * m.hidden * m.ffn);
  dk::internal::Team layer_team(4);
  for (auto _ : state) {
    const Layer& L = layers[i++ % layers.size()];
    if (fused) {
      auto layer = [&] {
        const FusedWeight w[3] = {{L.q.As(x12), m.q}, {L.k.As(x12), m.kv}, {L.v.As(x12), m.kv}};
        void* y[3] = {q.data(), k.data(), v.data()};
        RmsNormGemv(f, h.data(), norm.data(), 1e-5f, m.hidden, w, 3, y, false, &pool);
        GemvAdd(f, attn.data(), m.q, {L.o.As(x12), m.hidden}, h.data(), h_mid.data(), &pool);
        RmsNormGemvSiluMul(f, h_mid.data(), norm.data(), 1e-5f, m.hidden, {L.gate.As(x12), m.ffn},
                           {L.up.As(x12), m.ffn}, act.data(), &pool);
        GemvAdd(f, act.data(), m.ffn, {L.down.As(x12), m.hidden}, h_mid.data(), h_out.data(), &pool);
      };
      team ? pool.RunTeam(layer_team, layer) : layer();
    } else {
      RmsNorm(h.data(), norm.data(), m.hidden, 1e-5f, xn.data());
      PackedGemv(L.q.packed.data.data(), m.q, m.hidden, xn.data(), q.data(), &pool);
      PackedGemv(L.k.packed.data.data(), m.kv, m.hidden, xn.data(), k.data(), &pool);
      PackedGemv(L.v.packed.data.data(), m.kv, m.hidden, xn.data(), v.data(), &pool);
      PackedGemv(L.o.packed.data.data(), m.hidden, m.q, attn.data(), o.data(), &pool);
      Add(h.data(), o.data(), m.hidden, h_mid.data());
      RmsNorm(h_mid.data(), norm.data(), m.hidden, 1e-5f, xn.data());
      PackedGemv(L.gate.packed.data.data(), m.ffn, m.hidden, xn.data(), g.data(), &pool);
      PackedGemv(L.up.packed.data.data(), m.ffn, m.hidden, xn.data(), u.data(), &pool);
      SiluMul(g.data(), u.data(), m.ffn, act.data());
      PackedGemv(L.down.packed.data.data(), m.hidden, m.ffn, act.data(), down.data(), &pool);
      Add(h_mid.data(), down.data(), m.hidden, h_out.data());
    }
    benchmark::DoNotOptimize(h_out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * state.iterations(),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::string(model == 0 ? "llama32_1b" : "smollm2_135m") +
                 (team ? " fused x12, team run" : x12 ? " fused x12" : fused ? " fused" : " unfused"));
}
// Interleaved: unfused, fused, fused x12, fused x12 as one team run, twice, for each
// model and thread count (GB/s: the bf16 bytes of the layer, in every mode).
BENCHMARK(BM_Layer)
    ->ArgNames({"model", "fused", "threads"})
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 0, 1, 2, 3}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The layer's x12 bytes (the seven matrices of fused x12 above) read as a plain
// stream (StreamSum), one ParallelRanges call per matrix as the kernels launch them:
//   mode 0: each call a pool job (one stream per thread per call);
//   mode 1: Run over TaskCount's tasks instead (4 per thread, the split before ParallelRanges);
//   mode 2: the layer's calls in one team run (ThreadPool::RunTeam: a barrier per call,
//           one job per layer), as the CPU device runs a group;
//   mode 3: as 2, on a copy of the layer laid out per member (member i's shares of the
//           seven matrices back to back, one stream per thread across the calls).
// against one long stream (bw_GB/s, MeasureReadBandwidth before the loop): what the
// per-launch stream starts and hand-offs cost on their own, with no GEMV arithmetic
// (docs/peer-comparison.md).
void BM_LayerStream(benchmark::State& state) {
  const int model = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  ThreadPool pool(static_cast<int>(state.range(2)));
  const Model m = kModels[model];
  const auto& layers = Layers(model);
  BandwidthOptions bw_options;
  bw_options.passes = 3;
  bw_options.page_mode = PageMode::kHugePages;  // as the matrices
  const double bw = MeasureReadBandwidth(&pool, bw_options);
  const size_t rows[7] = {m.q, m.kv, m.kv, m.hidden, m.ffn, m.ffn, m.hidden};
  const size_t cols[7] = {m.hidden, m.hidden, m.hidden, m.q, m.hidden, m.hidden, m.ffn};
  size_t lines[7], bytes = 0;  // cache lines of each matrix
  for (int j = 0; j < 7; ++j) {
    lines[j] = X12GemvBytes(rows[j], cols[j]) / 64;
    bytes += lines[j] * 64;
  }
  // Mode 3's layout: line u of matrix j, in member s's share [b, e), is line
  // at[s][j] + (u - b) of the copy.
  const int members = pool.num_threads();
  std::vector<std::vector<size_t>> at(members, std::vector<size_t>(7));
  size_t total = 0;
  for (int s = 0; s < members; ++s) {
    for (int j = 0; j < 7; ++j) {
      at[s][j] = total;
      total += SplitPoint(lines[j], members, s + 1, 1) - SplitPoint(lines[j], members, s, 1);
    }
  }
  std::vector<AlignedBuffer<float>> copies;
  if (mode == 3) {
    for (size_t c = 0; c < layers.size(); ++c) {
      copies.emplace_back(total * 16, PageMode::kHugePages);
      for (size_t k = 0; k < total * 16; ++k) copies.back()[k] = static_cast<float>(k & 1023);
    }
  }
  dk::internal::Team team(7);
  std::vector<float> sums(64);
  size_t i = 0;
  for (auto _ : state) {
    const size_t li = i++ % layers.size();
    const Layer& L = layers[li];
    const Matrix* mats[7] = {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down};
    auto layer = [&] {
      for (int j = 0; j < 7; ++j) {
        const float* data = reinterpret_cast<const float*>(mats[j]->x12.data());
        if (mode == 1) {
          const int64_t n = TaskCount(lines[j], &pool);
          pool.Run(n, [&](int64_t t, int thread) {
            const size_t b = SplitPoint(lines[j], n, t, 1), e = SplitPoint(lines[j], n, t + 1, 1);
            sums[thread * 8] += StreamSum(data + 16 * b, 16 * (e - b));
          });
          continue;
        }
        ParallelRanges(&pool, lines[j], [&](size_t b, size_t e, int thread) {
          const float* from = data + 16 * b;
          if (mode == 3) {  // a range stays inside one share
            int s = members - 1;
            while (SplitPoint(lines[j], members, s, 1) > b) --s;
            from = copies[li].data() + 16 * (at[s][j] + b - SplitPoint(lines[j], members, s, 1));
          }
          sums[thread * 8] += StreamSum(from, 16 * (e - b));
        });
      }
    };
    mode >= 2 ? pool.RunTeam(team, layer) : layer();
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * state.iterations(),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["bw_GB/s"] = bw;
  static const char* const kModes[] = {"a job per matrix", "4 tasks per thread", "team run",
                                       "team run, per-member layout"};
  state.SetLabel(std::string(model == 0 ? "llama32_1b" : "smollm2_135m") + " x12 bytes, " + kModes[mode]);
}
// Interleaved, three times; GB/s / bw_GB/s is the fraction of the long stream's rate
// that the per-launch reads reach.
BENCHMARK(BM_LayerStream)
    ->ArgNames({"model", "mode", "threads"})
    ->ArgsProduct({{1, 0}, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, {2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
