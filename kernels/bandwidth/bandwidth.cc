#include "kernels/bandwidth/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/bandwidth/bandwidth.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float StreamSumImpl(const float* HWY_RESTRICT data, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t nf = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * nf <= n; i += 4 * nf) {
    a0 = hn::Add(a0, hn::LoadU(d, data + i));
    a1 = hn::Add(a1, hn::LoadU(d, data + i + nf));
    a2 = hn::Add(a2, hn::LoadU(d, data + i + 2 * nf));
    a3 = hn::Add(a3, hn::LoadU(d, data + i + 3 * nf));
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) sum += data[i];
  return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(StreamSumImpl);

float StreamSum(const float* data, size_t n) {
  return HWY_DYNAMIC_DISPATCH(StreamSumImpl)(data, n);
}

namespace {
std::atomic<float> g_sink{0.0f};  // keeps the sums observable

// The probe's buffers, kept between calls (a tool measures the same size again and
// again: allocating and touching it each time would cost more than a pass). Held
// under the mutex for a whole measurement, so that calls from several threads take
// turns: two probes at once would share the memory bus and each measure half of it.
std::mutex& ProbeMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

// Call with ProbeMutex() held.
AlignedBuffer<float>& CachedBuffer(size_t floats, PageMode mode) {
  static auto* buffers = new std::map<std::pair<size_t, int>, AlignedBuffer<float>>();
  auto& buf = (*buffers)[{floats, static_cast<int>(mode)}];
  if (buf.size() != floats) {
    buf = AlignedBuffer<float>(floats, mode);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i & 1023);
  }
  return buf;
}
}  // namespace

BandwidthReport MeasureReadBandwidthReport(ThreadPool* pool, const BandwidthOptions& options) {
  const size_t floats = options.bytes / sizeof(float);
  std::lock_guard<std::mutex> lock(ProbeMutex());
  AlignedBuffer<float>& buf = CachedBuffer(floats, options.page_mode);
  BandwidthReport report;
  if (buf.empty()) return report;
  report.bytes_per_pass = floats * sizeof(float);
  const int threads = pool ? pool->num_threads() : 1;
  // Per pool thread, a cache line of its own: what it summed.
  struct alignas(64) Summed {
    double sum = 0;
    size_t bytes = 0;
  };
  std::vector<Summed> summed(threads);
  std::vector<std::pair<double, double>> passes;  // (GB/s, seconds)
  for (int pass = 0; pass < std::max(1, options.passes); ++pass) {
    const auto start = std::chrono::steady_clock::now();
    auto body = [&](int64_t t, int thread) {
      // 64-byte aligned split so no cache line is read by both threads.
      const size_t b = SplitPoint(floats, threads, t, 16);
      const size_t e = SplitPoint(floats, threads, t + 1, 16);
      summed[thread].sum += StreamSum(buf.data() + b, e - b);
      summed[thread].bytes += (e - b) * sizeof(float);
    };
    if (pool) {
      pool->Run(threads, body);
    } else {
      body(0, 0);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    passes.emplace_back(static_cast<double>(report.bytes_per_pass) / secs * 1e-9, secs);
  }
  for (const Summed& s : summed) {
    report.sum += s.sum;
    report.bytes_summed += s.bytes;
  }
  g_sink.store(static_cast<float>(report.sum), std::memory_order_relaxed);
  std::sort(passes.begin(), passes.end());
  report.passes = static_cast<int>(passes.size());
  std::tie(report.gbs, report.seconds) = passes[passes.size() / 2];
  return report;
}

double MeasureReadBandwidth(ThreadPool* pool, const BandwidthOptions& options) {
  return MeasureReadBandwidthReport(pool, options).gbs;
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
