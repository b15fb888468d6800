#include "kernels/gemv/gemv_ksplit.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/gemv/gemv.h"
#include "util/aligned_buffer.h"
#include "util/check.h"

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemv/gemv_ksplit.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Where the kChunkCols columns of 32-column block `c` of row `r` start.
HWY_INLINE const bf16* Block(const bf16* w, bool packed, size_t cols, size_t r, size_t c) {
  if (!packed) return w + r * cols + c * kChunkCols;
  const size_t chunks = cols / kChunkCols;
  return w + ((r / kPanelRows * chunks + c) * kPanelRows + r % kPanelRows) * kChunkCols;
}

// Rows [r0, r1): per K chunk an f32 vector accumulation reduced to one partial,
// the partials added in chunk order.
void Rows(const bf16* HWY_RESTRICT w, bool packed, size_t cols, size_t k_chunk, size_t r0, size_t r1,
          const float* HWY_RESTRICT x, float* HWY_RESTRICT y) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const size_t n = hn::Lanes(df);
  const size_t blocks_per_chunk = k_chunk / kChunkCols;
  for (size_t r = r0; r < r1; ++r) {
    float total = 0.0f;
    for (size_t c0 = 0; c0 < cols / kChunkCols; c0 += blocks_per_chunk) {
      auto acc = hn::Zero(df);
      for (size_t c = c0; c < c0 + blocks_per_chunk; ++c) {
        const uint16_t* block = reinterpret_cast<const uint16_t*>(Block(w, packed, cols, r, c));
        const float* xc = x + c * kChunkCols;
        for (size_t i = 0; i < kChunkCols; i += n) {
          const auto wf = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, block + i))));
          acc = hn::MulAdd(wf, hn::LoadU(df, xc + i), acc);
        }
      }
      total += hn::GetLane(hn::SumOfLanes(df, acc));
    }
    y[r] = total;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(Rows);

namespace {

inline float ToF32(float v) { return v; }
inline float ToF32(bf16 v) { return Bf16ToF32(v); }

template <typename XT, typename YT>
void Run(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const XT* x, YT* y,
         ThreadPool* pool, KernelScratch* scratch) {
  DK_CHECK(KSplitGemvShapeOk(cols, k_chunk));
  if (rows == 0) return;
  // x as f32 (the kernel's operand), and for bf16 y the f32 sums before their one
  // rounding, in the calling thread's scratch.
  const CallScratch s(scratch, pool != nullptr ? pool->num_threads() : 1);
  const int thread = CallerThread();
  float* xs = s->Get<float>(thread, kKSplitX, cols);
  for (size_t k = 0; k < cols; ++k) xs[k] = ToF32(x[k]);
  float* out;
  if constexpr (std::is_same_v<YT, float>) {
    out = y;
  } else {
    out = s->Get<float>(thread, kKSplitY, rows);
  }
  const float* xf = xs;
  ParallelRanges(pool, rows, [&](size_t r0, size_t r1, int) {  // one stream per thread
    HWY_DYNAMIC_DISPATCH(Rows)(w, packed, cols, k_chunk, r0, r1, xf, out);
  });
  if constexpr (!std::is_same_v<YT, float>) {
    for (size_t r = 0; r < rows; ++r) y[r] = F32ToBf16(out[r]);
  }
}

}  // namespace

bool KSplitGemvShapeOk(size_t cols, size_t k_chunk) {
  return k_chunk > 0 && k_chunk % kChunkCols == 0 && cols % k_chunk == 0;
}

void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const float* x,
                float* y, ThreadPool* pool, KernelScratch* scratch) {
  Run(w, packed, rows, cols, k_chunk, x, y, pool, scratch);
}
void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const bf16* x,
                float* y, ThreadPool* pool, KernelScratch* scratch) {
  Run(w, packed, rows, cols, k_chunk, x, y, pool, scratch);
}
void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const float* x,
                bf16* y, ThreadPool* pool, KernelScratch* scratch) {
  Run(w, packed, rows, cols, k_chunk, x, y, pool, scratch);
}
void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const bf16* x,
                bf16* y, ThreadPool* pool, KernelScratch* scratch) {
  Run(w, packed, rows, cols, k_chunk, x, y, pool, scratch);
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
