// Quantized-weight GEMV throughput at LLM decode shapes, as a fraction of the read
// bandwidth measured in the same benchmark, right before the timed loop, with the
// same threads. As in decode, weights come from memory: each benchmark rotates over
// enough distinct matrices (>= 256 MiB) to defeat the 32 MiB last-level cache.
//   ./bazelw run --config=opt //kernels/gemv:gemv_quant_bench -- --benchmark_filter='threads:2/'
// Counters: GB/s (weight bytes as stored / time), bw_GB/s (streaming read bandwidth,
// same threads), pct_bw = 100 * GB/s / bw_GB/s. Format "BF16" is the bf16 row-major
// Gemv with bf16 x on the same shapes, for comparison (act is ignored for it).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/bandwidth/bandwidth.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"

namespace dk::kernels {
namespace {

struct Shape {
  size_t rows, cols;
};
// llama32_1b q/o proj, gate/up, down; SmolLM2-135M LM head; Gemma 3 270M's gate / up
// (K = 640) and a quarter of its LM head (262144 x 640).
constexpr Shape kShapes[] = {{2048, 2048}, {8192, 2048}, {2048, 8192}, {49152, 576}, {2048, 640}, {65536, 640}};
constexpr WeightFormat kFormats[] = {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_1,
                                     WeightFormat::kQ5_0, WeightFormat::kQ4_K, WeightFormat::kQ6_K};
constexpr int kBf16 = 6;  // format index of the bf16 baseline
constexpr size_t kMinRotationBytes = size_t{256} << 20;

size_t MatrixBytes(const Shape& s, int format) {
  return format == kBf16 ? s.rows * s.cols * sizeof(bf16)
                         : s.rows * formats::RowBytes(kFormats[format], s.cols);
}

// Distinct copies of one random matrix (valid f16 scales, random quants), on huge
// pages as decode's weight BOs are. Only the latest (shape, format) is kept, so the
// benchmark holds one rotation at a time.
const std::vector<AlignedBuffer<uint8_t>>& WeightSet(const Shape& s, int format) {
  static auto* key = new std::tuple<size_t, size_t, int>(0, 0, -1);
  static auto* set = new std::vector<AlignedBuffer<uint8_t>>();
  if (*key == std::make_tuple(s.rows, s.cols, format)) return *set;
  set->clear();
  *key = {s.rows, s.cols, format};
  const size_t bytes = MatrixBytes(s, format);
  std::vector<uint8_t> w(bytes);
  std::mt19937 rng(12345);
  if (format == kBf16) {
    for (size_t i = 0; i < bytes; i += 2) {
      const bf16 v = F32ToBf16(static_cast<float>(static_cast<int32_t>(rng() >> 8)) * 1e-9f);
      std::memcpy(&w[i], &v, 2);
    }
  } else {
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const WeightFormat f = kFormats[format];
    const size_t block = formats::BlockBytes(f);
    // Byte offsets of the block's f16 fields: d first, then Q4_1's m / Q4_K's dmin;
    // Q6_K's d is last.
    const size_t d_at = f == WeightFormat::kQ6_K ? block - 2 : 0;
    const bool second = f == WeightFormat::kQ4_1 || f == WeightFormat::kQ4_K;
    for (size_t off = 0; off < bytes; off += block) {
      const uint16_t d = 0x2000 | (rng() & 0x3FF);  // ~2^-7, normal
      std::memcpy(&w[off + d_at], &d, 2);
      if (second) std::memcpy(&w[off + 2], &d, 2);
    }
  }
  const size_t copies = std::max<size_t>(1, (kMinRotationBytes + bytes - 1) / bytes);
  for (size_t c = 0; c < copies; ++c) {
    AlignedBuffer<uint8_t> buf(bytes, PageMode::kHugePages);
    std::memcpy(buf.data(), w.data(), bytes);
    set->push_back(std::move(buf));
  }
  return *set;
}

void BM_QuantGemv(benchmark::State& state) {
  // Arguments in this order so that runs sharing a weight rotation are adjacent
  // (the first argument varies fastest).
  ThreadPool pool(static_cast<int>(state.range(0)));
  const QuantActivations act =
      state.range(1) == 0 ? QuantActivations::kInt8 : QuantActivations::kFloat;
  const int format = static_cast<int>(state.range(2));
  const Shape s = kShapes[state.range(3)];
  if (format != kBf16 && s.cols % formats::BlockElems(kFormats[format]) != 0) {
    state.SkipWithError("cols is not a multiple of the format's block");
    return;
  }
  const auto& set = WeightSet(s, format);
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
    const uint8_t* w = set[i].data();
    if (format == kBf16) {
      Gemv(reinterpret_cast<const bf16*>(w), s.rows, s.cols, x.data(), y.data(), &pool);
    } else {
      QuantGemv(kFormats[format], act, w, s.rows, s.cols, x.data(), y.data(), &pool);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                   .count();
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % set.size();
    ++calls;
  }
  const double gbs = static_cast<double>(calls) * MatrixBytes(s, format) / seconds * 1e-9;
  state.counters["GB/s"] = gbs;
  state.counters["bw_GB/s"] = bw;
  state.counters["pct_bw"] = 100.0 * gbs / bw;
  state.counters["us/call"] = seconds / static_cast<double>(calls) * 1e6;
  state.SetLabel(format == kBf16
                     ? std::string("BF16 ") + GemvTargetName()
                     : std::string(formats::GgufTypeName(kFormats[format])) +
                           (act == QuantActivations::kInt8 ? " int8-x " : " float-x ") +
                           QuantGemvTargetName(act));
}
BENCHMARK(BM_QuantGemv)
    ->ArgNames({"threads", "act", "format", "shape"})
    ->ArgsProduct({{1, 2}, {0, 1}, {0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseRealTime();

// Compute ceiling: one thread, one matrix read over and over (shape 0: 256 x 2048,
// 0.53 MiB in Q8_0, 1 MiB in bf16; shape 1: 64 x 8192, the same bytes in longer rows;
// shape 2: 768 x 640, Gemma 3 270M's K: in the 1 MiB L2 of a Zen core or near it),
// so memory is not the limit. A kernel whose GB/s here is not well above the
// bandwidth above cannot reach that bandwidth.
void BM_QuantGemvHot(benchmark::State& state) {
  const QuantActivations act =
      state.range(0) == 0 ? QuantActivations::kInt8 : QuantActivations::kFloat;
  const int format = static_cast<int>(state.range(1));
  constexpr Shape kHotShapes[] = {{256, 2048}, {64, 8192}, {768, 640}};
  const Shape s = kHotShapes[state.range(2)];
  const AlignedBuffer<uint8_t>& w = WeightSet(s, format)[0];
  std::vector<bf16> x(s.cols);
  for (size_t k = 0; k < s.cols; ++k) x[k] = F32ToBf16(static_cast<float>(k % 13) - 6);
  std::vector<float> y(s.rows);
  for (auto _ : state) {
    if (format == kBf16) {
      Gemv(reinterpret_cast<const bf16*>(w.data()), s.rows, s.cols, x.data(), y.data(), nullptr);
    } else {
      QuantGemv(kFormats[format], act, w.data(), s.rows, s.cols, x.data(), y.data(), nullptr);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * MatrixBytes(s, format)));
  state.SetLabel(format == kBf16 ? std::string("BF16")
                                 : std::string(formats::GgufTypeName(kFormats[format])) +
                                       (act == QuantActivations::kInt8 ? " int8-x" : " float-x"));
}
BENCHMARK(BM_QuantGemvHot)
    ->ArgNames({"act", "format", "shape"})
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4, 5, 6}, {0, 1, 2}})
    ->MinTime(0.3);

}  // namespace
}  // namespace dk::kernels

BENCHMARK_MAIN();
