#include "kernels/gemv/gemv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/gemv/gemv_avx512bf16.h"
#include "kernels/gemv/gemv_rows.h"

#include "util/check.h"

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemv/gemv.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// bf16 pairs are widened without shuffles: a u32 lane holding the pair
// (W[2j], W[2j+1]) yields W[2j] as (u32 << 16) and W[2j+1] as (u32 & 0xffff0000).
// x is therefore split once per call into its even (xe) and odd (xo) elements,
// and the dot product is sum(even * xe) + sum(odd * xo).

inline void StoreOut(float v, float* y) { *y = v; }
inline void StoreOut(float v, bf16* y) { *y = F32ToBf16(v); }


// Both layouts sum in the same order, so switching a launch from row-major to the
// packed layout leaves every output bit-identical (on the same SIMD target): per
// row, 32-column chunk c is accumulated into accumulator c % 2, its vectors in
// order, even elements before odd ones; the two accumulators are added and
// reduced at the end. A partial last chunk is zero-padded, as the packer pads it.

// One 32-column chunk of one row into `acc`.
template <class DF, class V>
HWY_INLINE V ChunkFma(DF df, const bf16* HWY_RESTRICT chunk, const float* HWY_RESTRICT xe,
                      const float* HWY_RESTRICT xo, V acc) {
  const hn::RebindToUnsigned<DF> du;
  const size_t nf = hn::Lanes(df);
  const auto hi_mask = hn::Set(du, 0xffff0000u);
  for (size_t sub = 0; sub < kChunkCols; sub += 2 * nf) {
    const auto pairs = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + sub));
    acc = hn::MulAdd(hn::BitCast(df, hn::ShiftLeft<16>(pairs)), hn::Load(df, xe + sub / 2), acc);
    acc = hn::MulAdd(hn::BitCast(df, hn::And(pairs, hi_mask)), hn::Load(df, xo + sub / 2), acc);
  }
  return acc;
}

// One row of row-major W: a single sequential stream per thread, which the
// hardware prefetcher follows best.
template <typename YT>
HWY_INLINE void OneRow(const bf16* HWY_RESTRICT row, size_t cols, size_t r,
                       const float* HWY_RESTRICT xe, const float* HWY_RESTRICT xo,
                       YT* HWY_RESTRICT y) {
  const hn::ScalableTag<float> df;
  constexpr size_t kHalf = kChunkCols / 2;
  const size_t full = cols / kChunkCols;
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  size_t c = 0;
  for (; c + 2 <= full; c += 2) {
    acc0 = ChunkFma(df, row + c * kChunkCols, xe + c * kHalf, xo + c * kHalf, acc0);
    acc1 = ChunkFma(df, row + (c + 1) * kChunkCols, xe + (c + 1) * kHalf, xo + (c + 1) * kHalf, acc1);
  }
  if (c < full) {
    acc0 = ChunkFma(df, row + c * kChunkCols, xe + c * kHalf, xo + c * kHalf, acc0);
    ++c;
  }
  if (c * kChunkCols < cols) {  // partial last chunk, zero-padded like the packer does
    alignas(64) bf16 tail[kChunkCols] = {};
    std::memcpy(tail, row + c * kChunkCols, (cols - c * kChunkCols) * sizeof(bf16));
    if (c % 2 == 0) {
      acc0 = ChunkFma(df, tail, xe + c * kHalf, xo + c * kHalf, acc0);
    } else {
      acc1 = ChunkFma(df, tail, xe + c * kHalf, xo + c * kHalf, acc1);
    }
  }
  StoreOut(hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1))), y + r);
}

template <typename YT>
void RowMajorRows(const bf16* w, size_t cols, size_t r0, size_t r1,
                  const float* xe, const float* xo, YT* y) {
  for (size_t r = r0; r < r1; ++r) OneRow(w + r * cols, cols, r, xe, xo, y);
}

// Panels [p0, p1) of the packed layout; `chunks` = cols_padded / kChunkCols.
// Eight rows advance together, each with the two accumulators of OneRow.
template <typename YT>
void PackedPanels(const bf16* HWY_RESTRICT packed, size_t rows, size_t chunks,
                  size_t p0, size_t p1, const float* HWY_RESTRICT xe,
                  const float* HWY_RESTRICT xo, YT* HWY_RESTRICT y) {
  const hn::ScalableTag<float> df;
  constexpr size_t kHalf = kChunkCols / 2;
  constexpr size_t kPanel = kPanelRows * kChunkCols;  // elements per chunk of a panel

  for (size_t p = p0; p < p1; ++p) {
    const bf16* panel = packed + p * chunks * kPanel;
    decltype(hn::Zero(df)) acc0[kPanelRows], acc1[kPanelRows];
    for (size_t r = 0; r < kPanelRows; ++r) acc0[r] = acc1[r] = hn::Zero(df);
    size_t c = 0;
    for (; c + 2 <= chunks; c += 2) {
      const bf16* block = panel + c * kPanel;
      // Software prefetch 4 KiB ahead of the stream: with the hardware prefetcher
      // alone, one thread read well below the streaming bandwidth (docs/gemv-kernels.md).
      hwy::Prefetch(block + 8 * kPanel);
      hwy::Prefetch(block + 9 * kPanel);
#pragma GCC unroll 8
      for (size_t r = 0; r < kPanelRows; ++r) {
        acc0[r] = ChunkFma(df, block + r * kChunkCols, xe + c * kHalf, xo + c * kHalf, acc0[r]);
      }
#pragma GCC unroll 8
      for (size_t r = 0; r < kPanelRows; ++r) {
        acc1[r] = ChunkFma(df, block + kPanel + r * kChunkCols, xe + (c + 1) * kHalf,
                           xo + (c + 1) * kHalf, acc1[r]);
      }
    }
    if (c < chunks) {
      const bf16* block = panel + c * kPanel;
#pragma GCC unroll 8
      for (size_t r = 0; r < kPanelRows; ++r) {
        acc0[r] = ChunkFma(df, block + r * kChunkCols, xe + c * kHalf, xo + c * kHalf, acc0[r]);
      }
    }
    const size_t base = p * kPanelRows;
    for (size_t r = 0; r < kPanelRows && base + r < rows; ++r) {
      StoreOut(hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[r], acc1[r]))), y + base + r);
    }
  }
}

// Whether this target may use AVX-512 instructions (the vdpbf16ps path).
bool IsAvx512Target() { return HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL; }

void RowMajorF32(const bf16* w, size_t cols, size_t r0, size_t r1, const float* xe,
                 const float* xo, float* y) {
  RowMajorRows(w, cols, r0, r1, xe, xo, y);
}
void RowMajorBf16(const bf16* w, size_t cols, size_t r0, size_t r1, const float* xe,
                  const float* xo, bf16* y) {
  RowMajorRows(w, cols, r0, r1, xe, xo, y);
}
void PackedF32(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
               const float* xe, const float* xo, float* y) {
  PackedPanels(packed, rows, chunks, p0, p1, xe, xo, y);
}
void PackedBf16(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                const float* xe, const float* xo, bf16* y) {
  PackedPanels(packed, rows, chunks, p0, p1, xe, xo, y);
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(IsAvx512Target);
HWY_EXPORT(RowMajorF32);
HWY_EXPORT(RowMajorBf16);
HWY_EXPORT(PackedF32);
HWY_EXPORT(PackedBf16);

namespace {

inline float ToF32(float v) { return v; }
inline float ToF32(bf16 v) { return Bf16ToF32(v); }

size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// x split into even / odd elements, zero-padded to `padded_cols` / 2 each, in
// thread `thread`'s buffer kGemvSplitX of `scratch`.
template <typename XT>
void SplitX(const XT* x, size_t cols, size_t padded_cols, const float** xe,
            const float** xo, KernelScratch& scratch, int thread) {
  const size_t half = RoundUp(padded_cols, kChunkCols) / 2;
  float* e = scratch.Get<float>(thread, kGemvSplitX, 2 * half);
  float* o = e + half;
  size_t k = 0;
  for (; k + 1 < cols; k += 2) {
    e[k / 2] = ToF32(x[k]);
    o[k / 2] = ToF32(x[k + 1]);
  }
  for (size_t j = k / 2; j < half; ++j) e[j] = o[j] = 0.0f;
  if (k < cols) e[k / 2] = ToF32(x[k]);
  *xe = e;
  *xo = o;
}

// vdpbf16ps applies when chosen, the CPU has it, and the target Highway chose is
// an AVX-512 one (respects hwy::SetSupportedTargetsForTest, so per-target tests
// stay per-target). Asked through the dispatch table, which caches the choice:
// hwy::SupportedTargets() runs CPUID, far too slow to ask per GEMV.
bool UseBf16Dot(const GemvVariants& v) {
  return v.bf16_dot && internal::CpuHasAvx512Bf16() &&
         HWY_DYNAMIC_DISPATCH(IsAvx512Target)();
}

// x as bf16 zero-padded to whole chunks, in thread `thread`'s buffer kGemvPaddedX
// of `scratch`.
const bf16* PadX(const bf16* x, size_t cols, KernelScratch& scratch, int thread) {
  const size_t padded = RoundUp(cols, kChunkCols);
  bf16* out = scratch.Get<bf16>(thread, kGemvPaddedX, padded);
  std::memcpy(out, x, cols * sizeof(bf16));
  std::memset(static_cast<void*>(out + cols), 0, (padded - cols) * sizeof(bf16));
  return out;
}

template <typename XT, typename YT>
void RowMajor(const bf16* w, size_t rows, size_t cols, const XT* x, YT* y,
              ThreadPool* pool, const GemvVariants& v, KernelScratch* given) {
  if (rows == 0) return;
  const CallScratch scratch(given, pool != nullptr ? pool->num_threads() : 1);
  const int thread = CallerThread();
  // Units of 4 rows, one stream per thread (ParallelRanges).
  const size_t blocks = (rows + 3) / 4;
  auto row_range = [rows](size_t b) { return std::min(rows, 4 * b); };
  if constexpr (std::is_same_v<XT, bf16>) {
    if (UseBf16Dot(v)) {
      const bf16* xp = PadX(x, cols, *scratch, thread);
      ParallelRanges(pool, blocks, [&](size_t b0, size_t b1, int) {
        internal::RowMajorRowsDpBf16(w, cols, row_range(b0), row_range(b1), xp, y);
      });
      return;
    }
  }
  const float *xe, *xo;
  SplitX(x, cols, cols, &xe, &xo, *scratch, thread);
  ParallelRanges(pool, blocks, [&](size_t b0, size_t b1, int) {
    const size_t r0 = row_range(b0), r1 = row_range(b1);
    if constexpr (std::is_same_v<YT, float>) {
      HWY_DYNAMIC_DISPATCH(RowMajorF32)(w, cols, r0, r1, xe, xo, y);
    } else {
      HWY_DYNAMIC_DISPATCH(RowMajorBf16)(w, cols, r0, r1, xe, xo, y);
    }
  });
}

template <typename XT, typename YT>
void Packed(const bf16* packed, size_t rows, size_t cols, const XT* x, YT* y,
            ThreadPool* pool, const GemvVariants& v, KernelScratch* given) {
  if (rows == 0) return;
  const CallScratch scratch(given, pool != nullptr ? pool->num_threads() : 1);
  const int thread = CallerThread();
  const size_t padded_cols = RoundUp(cols, kChunkCols);
  const size_t panels = (rows + kPanelRows - 1) / kPanelRows;
  const size_t chunks = padded_cols / kChunkCols;
  if constexpr (std::is_same_v<XT, bf16>) {
    if (UseBf16Dot(v)) {
      const bf16* xp = PadX(x, cols, *scratch, thread);
      ParallelRanges(pool, panels, [&](size_t p0, size_t p1, int) {
        internal::PackedPanelsDpBf16(packed, rows, chunks, p0, p1, xp, y, v.prefetch);
      });
      return;
    }
  }
  const float *xe, *xo;
  SplitX(x, cols, padded_cols, &xe, &xo, *scratch, thread);
  ParallelRanges(pool, panels, [&](size_t p0, size_t p1, int) {
    if constexpr (std::is_same_v<YT, float>) {
      HWY_DYNAMIC_DISPATCH(PackedF32)(packed, rows, chunks, p0, p1, xe, xo, y);
    } else {
      HWY_DYNAMIC_DISPATCH(PackedBf16)(packed, rows, chunks, p0, p1, xe, xo, y);
    }
  });
}

}  // namespace

namespace internal {

Bf16X PrepareBf16X(const bf16* x, size_t cols, const GemvVariants& v, KernelScratch& scratch, int thread) {
  Bf16X p;
  p.cols = cols;
  p.dot = UseBf16Dot(v);
  p.prefetch = v.prefetch;
  if (p.dot) {
    p.padded = PadX(x, cols, scratch, thread);
  } else {
    SplitX(x, cols, cols, &p.xe, &p.xo, scratch, thread);
  }
  return p;
}

void Bf16RowMajorRows(const bf16* w, const Bf16X& x, size_t r0, size_t r1, float* y) {
  if (x.dot) {
    RowMajorRowsDpBf16(w, x.cols, r0, r1, x.padded, y);
  } else {
    HWY_DYNAMIC_DISPATCH(RowMajorF32)(w, x.cols, r0, r1, x.xe, x.xo, y);
  }
}

void Bf16PackedRows(const bf16* packed, size_t rows, const Bf16X& x, size_t r0, size_t r1, float* y) {
  DK_CHECK(r0 % kPanelRows == 0 && (r1 % kPanelRows == 0 || r1 == rows) && r1 <= rows);
  const size_t chunks = RoundUp(x.cols, kChunkCols) / kChunkCols;
  const size_t p0 = r0 / kPanelRows, p1 = (r1 + kPanelRows - 1) / kPanelRows;
  if (x.dot) {
    PackedPanelsDpBf16(packed, rows, chunks, p0, p1, x.padded, y, x.prefetch);
  } else {
    HWY_DYNAMIC_DISPATCH(PackedF32)(packed, rows, chunks, p0, p1, x.xe, x.xo, y);
  }
}

}  // namespace internal

void Gemv(const bf16* w, size_t rows, size_t cols, const float* x, float* y,
          ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  RowMajor(w, rows, cols, x, y, pool, variants, scratch);
}
void Gemv(const bf16* w, size_t rows, size_t cols, const bf16* x, float* y,
          ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  RowMajor(w, rows, cols, x, y, pool, variants, scratch);
}
void Gemv(const bf16* w, size_t rows, size_t cols, const float* x, bf16* y,
          ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  RowMajor(w, rows, cols, x, y, pool, variants, scratch);
}
void Gemv(const bf16* w, size_t rows, size_t cols, const bf16* x, bf16* y,
          ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  RowMajor(w, rows, cols, x, y, pool, variants, scratch);
}

void PackedGemv(const bf16* packed, size_t rows, size_t cols, const float* x,
                float* y, ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  Packed(packed, rows, cols, x, y, pool, variants, scratch);
}
void PackedGemv(const bf16* packed, size_t rows, size_t cols, const bf16* x,
                float* y, ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  Packed(packed, rows, cols, x, y, pool, variants, scratch);
}
void PackedGemv(const bf16* packed, size_t rows, size_t cols, const float* x,
                bf16* y, ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  Packed(packed, rows, cols, x, y, pool, variants, scratch);
}
void PackedGemv(const bf16* packed, size_t rows, size_t cols, const bf16* x,
                bf16* y, ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  Packed(packed, rows, cols, x, y, pool, variants, scratch);
}

size_t PackedGemvElements(size_t rows, size_t cols) {
  return static_cast<size_t>(formats::PackedPanelElements(static_cast<int64_t>(rows), static_cast<int64_t>(cols)));
}

void PackGemvWeights(const bf16* w, size_t rows, size_t cols, bf16* out) {
  const size_t chunks = RoundUp(cols, kChunkCols) / kChunkCols;
  const size_t panels = RoundUp(rows, kPanelRows) / kPanelRows;
  for (size_t p = 0; p < panels; ++p) {
    for (size_t c = 0; c < chunks; ++c) {
      bf16* block = out + (p * chunks + c) * kPanelRows * kChunkCols;
      for (size_t r = 0; r < kPanelRows; ++r) {
        bf16* dst = block + r * kChunkCols;
        const size_t row = p * kPanelRows + r;
        const size_t col = c * kChunkCols;
        const size_t n = row < rows ? std::min(kChunkCols, cols - col) : 0;
        if (n) std::memcpy(dst, w + row * cols + col, n * sizeof(bf16));
        std::memset(static_cast<void*>(dst + n), 0, (kChunkCols - n) * sizeof(bf16));
      }
    }
  }
}

void UnpackGemvRow(const bf16* packed, size_t rows, size_t cols, size_t row, bf16* out) {
  DK_CHECK(row < rows);
  const size_t chunks = RoundUp(cols, kChunkCols) / kChunkCols;
  const bf16* panel = packed + row / kPanelRows * chunks * kPanelRows * kChunkCols;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t col = c * kChunkCols;
    std::memcpy(out + col, panel + (c * kPanelRows + row % kPanelRows) * kChunkCols,
                std::min(kChunkCols, cols - col) * sizeof(bf16));
  }
}

PackedGemvWeights PackGemvWeights(const bf16* w, size_t rows, size_t cols,
                                  PageMode mode) {
  PackedGemvWeights packed;
  packed.rows = rows;
  packed.cols = cols;
  packed.data = AlignedBuffer<bf16>(PackedGemvElements(rows, cols), mode);
  DK_CHECK(packed.data.size() == PackedGemvElements(rows, cols));
  PackGemvWeights(w, rows, cols, packed.data.data());
  return packed;
}

const char* GemvTargetName(const GemvVariants& variants) {
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  static const std::string with_dot = std::string(hwy::TargetName(targets & -targets)) + "+BF16DOT";
  return UseBf16Dot(variants) ? with_dot.c_str() : hwy::TargetName(targets & -targets);
}

bool GemvUsesBf16Dot(const GemvVariants& variants) { return UseBf16Dot(variants); }

}  // namespace dk::kernels
#endif  // HWY_ONCE
