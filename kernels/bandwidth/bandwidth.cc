#include "kernels/bandwidth/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
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

double MeasureReadBandwidth(ThreadPool* pool, const BandwidthOptions& options) {
  const size_t floats = options.bytes / sizeof(float);
  AlignedBuffer<float>& buf = CachedBuffer(floats, options.page_mode);
  if (buf.empty()) return 0.0;
  const int threads = pool ? pool->num_threads() : 1;
  std::vector<float> partial(threads * 16, 0.0f);
  std::vector<double> gbs;
  for (int pass = 0; pass < std::max(1, options.passes); ++pass) {
    const auto start = std::chrono::steady_clock::now();
    auto body = [&](int64_t t, int thread) {
      // 64-byte aligned split so no cache line is read by both threads.
      const size_t b = SplitPoint(floats, threads, t, 16);
      const size_t e = SplitPoint(floats, threads, t + 1, 16);
      partial[thread * 16] += StreamSum(buf.data() + b, e - b);
    };
    if (pool) {
      pool->Run(threads, body);
    } else {
      body(0, 0);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    gbs.push_back(static_cast<double>(floats * sizeof(float)) / secs * 1e-9);
  }
  float total = 0;
  for (float p : partial) total += p;
  g_sink.store(total, std::memory_order_relaxed);
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
