// Decode attention throughput at the llama32_1b shape (32 query heads, 8 kv heads,
// head_dim 64), as a fraction of the read bandwidth measured in the same benchmark,
// right before the timed loop, with the same threads. As in decode (one cache per
// layer), the caches come from memory: each benchmark rotates over enough distinct
// K/V caches (>= 256 MiB) to defeat the 32 MiB last-level cache.
//   ./bazelw run --config=opt //kernels/attention:attention_bench
// Counters: GB/s (K + V bytes attended / time), bw_GB/s (streaming read bandwidth,
// same threads), pct_bw = 100 * GB/s / bw_GB/s.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/attention/attention.h"
#include "kernels/bandwidth/bandwidth.h"
#include "util/aligned_buffer.h"

namespace dk::kernels {
namespace {

constexpr AttentionDims kLlama32_1b = {32, 8, 64, 0};
constexpr size_t kMinRotationBytes = size_t{256} << 20;

size_t CacheElements(size_t ctx) {
  return kLlama32_1b.n_kv_heads * ctx * kLlama32_1b.head_dim;
}

// Distinct [K | V] cache pairs for one context length, filled to max_ctx = ctx;
// built once, reused by all thread counts.
const std::vector<AlignedBuffer<bf16>>& CacheSet(size_t ctx) {
  static auto* sets = new std::map<size_t, std::vector<AlignedBuffer<bf16>>>();
  auto& set = (*sets)[ctx];
  if (!set.empty()) return set;
  const size_t bytes = 2 * CacheElements(ctx) * sizeof(bf16);
  const size_t copies = std::max<size_t>(1, (kMinRotationBytes + bytes - 1) / bytes);
  uint32_t state = 12345;
  for (size_t c = 0; c < copies; ++c) {
    AlignedBuffer<bf16> buf(2 * CacheElements(ctx));
    for (size_t i = 0; i < buf.size(); ++i) {
      state = state * 1664525u + 1013904223u;
      buf[i] = F32ToBf16(static_cast<float>(static_cast<int32_t>(state >> 8)) * 1e-7f);
    }
    set.push_back(std::move(buf));
  }
  return set;
}

void BM_DecodeAttention(benchmark::State& state) {
  const size_t ctx = static_cast<size_t>(state.range(0));
  ThreadPool pool(static_cast<int>(state.range(1)));
  AttentionDims dims = kLlama32_1b;
  dims.max_ctx = ctx;
  const auto& set = CacheSet(ctx);
  std::vector<bf16> q(dims.n_heads * dims.head_dim);
  for (size_t i = 0; i < q.size(); ++i) q[i] = F32ToBf16(static_cast<float>(i % 7) - 3);
  std::vector<bf16> out(q.size());

  BandwidthOptions bw_options;
  bw_options.passes = 3;
  const double bw = MeasureReadBandwidth(&pool, bw_options);

  size_t i = 0, calls = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const bf16* k = set[i].data();
    const bf16* v = k + CacheElements(ctx);
    if (!DecodeAttention(dims, q.data(), k, v, ctx - 1, out.data(), &pool).ok()) {
      state.SkipWithError("DecodeAttention failed");
      return;
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                   .count();
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % set.size();
    ++calls;
  }
  const double gbs = static_cast<double>(calls) * 2 * CacheElements(ctx) *
                     sizeof(bf16) / seconds * 1e-9;
  state.counters["GB/s"] = gbs;
  state.counters["bw_GB/s"] = bw;
  state.counters["pct_bw"] = 100.0 * gbs / bw;
  state.SetLabel(AttentionTargetName());
}
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"ctx", "threads"})
    ->ArgsProduct({{128, 512, 2048}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();

// Prefill chunks: M = 512 query rows at positions pos0.., one layer's attention,
// CausalAttention (rows=1) against the row-by-row DecodeAttention loop the runtime
// ran before (rows=0). Caches are warm (one cache, as right after the chunk's K/V
// were written). Models: 0 SmolLM2 (9/3 heads, head_dim 64), 1 llama32_1b (32/8,
// 64), 2 Gemma 3 (4/1, 256, sliding window 512).
struct ChunkModel {
  AttentionDims dims;
  size_t window;
};
constexpr ChunkModel kChunkModels[] = {
    {{9, 3, 64, 2048}, 0}, {{32, 8, 64, 2048}, 0}, {{4, 1, 256, 2048}, 512}};
constexpr size_t kChunkRows = 512;

void BM_PrefillChunk(benchmark::State& state) {
  const ChunkModel& model = kChunkModels[state.range(0)];
  const size_t pos0 = static_cast<size_t>(state.range(1));
  ThreadPool pool(static_cast<int>(state.range(2)));
  const bool causal = state.range(3) != 0;
  const AttentionDims& dims = model.dims;
  const size_t hd = dims.head_dim, row = dims.n_heads * hd, m = kChunkRows;
  const size_t cache = dims.n_kv_heads * dims.max_ctx * hd;
  std::vector<bf16> q(m * row), k(cache), v(cache), out(m * row);
  uint32_t seed = 7;
  for (auto* buf : {&q, &k, &v}) {
    for (bf16& x : *buf) {
      seed = seed * 1664525u + 1013904223u;
      x = F32ToBf16(static_cast<float>(static_cast<int32_t>(seed >> 8)) * 1e-7f);
    }
  }
  for (auto _ : state) {
    absl::Status st;
    if (causal) {
      st = CausalAttention(dims, q.data(), row, m, pos0, model.window, k.data(),
                           v.data(), out.data(), row, &pool);
    }
    for (size_t i = 0; !causal && i < m && st.ok(); ++i) {
      const size_t pos = pos0 + i;
      const size_t first = model.window && pos >= model.window ? pos + 1 - model.window : 0;
      st = DecodeAttention(dims, q.data() + i * row, k.data() + first * hd,
                           v.data() + first * hd, pos - first, out.data() + i * row, &pool);
    }
    if (!st.ok()) {
      state.SkipWithError("attention failed");
      return;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(AttentionTargetName());
}
BENCHMARK(BM_PrefillChunk)
    ->ArgNames({"model", "pos0", "threads", "rows"})
    ->ArgsProduct({{0, 1, 2}, {0, 1536}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->UseRealTime();

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
