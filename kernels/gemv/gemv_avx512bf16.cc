#include "kernels/gemv/gemv_avx512bf16.h"

#include <immintrin.h>

// GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized on its own locals.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>

#include "kernels/gemv/gemm_tiles.h"
#include "kernels/gemv/gemv.h"
#include "util/aligned_buffer.h"

namespace dk::kernels::internal {
namespace {

#define DK_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

inline void Store(float v, float* y) { *y = v; }
inline void Store(float v, bf16* y) { *y = F32ToBf16(v); }

DK_BF16_TARGET inline __m512bh Load(const bf16* p) {
  return (__m512bh)_mm512_loadu_si512(static_cast<const void*>(p));
}

template <typename YT>
DK_BF16_TARGET void RowMajor(const bf16* w, size_t cols, size_t r0, size_t r1, const bf16* x, YT* y) {
  const size_t full = cols / kChunkCols;
  for (size_t r = r0; r < r1; ++r) {
    const bf16* row = w + r * cols;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    size_t c = 0;
    for (; c + 2 <= full; c += 2) {
      acc0 = _mm512_dpbf16_ps(acc0, Load(row + c * kChunkCols), Load(x + c * kChunkCols));
      acc1 = _mm512_dpbf16_ps(acc1, Load(row + (c + 1) * kChunkCols), Load(x + (c + 1) * kChunkCols));
    }
    if (c < full) {
      acc0 = _mm512_dpbf16_ps(acc0, Load(row + c * kChunkCols), Load(x + c * kChunkCols));
      ++c;
    }
    if (c * kChunkCols < cols) {  // partial chunk, zero-padded as the packer pads it
      alignas(64) bf16 tail[kChunkCols] = {};
      std::memcpy(tail, row + c * kChunkCols, (cols - c * kChunkCols) * sizeof(bf16));
      if (c % 2 == 0) {
        acc0 = _mm512_dpbf16_ps(acc0, Load(tail), Load(x + c * kChunkCols));
      } else {
        acc1 = _mm512_dpbf16_ps(acc1, Load(tail), Load(x + c * kChunkCols));
      }
    }
    Store(_mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)), y + r);
  }
}

template <typename YT>
DK_BF16_TARGET void Packed(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                           const bf16* x, YT* y, bool prefetch) {
  constexpr size_t kPanel = kPanelRows * kChunkCols;
  for (size_t p = p0; p < p1; ++p) {
    const bf16* panel = packed + p * chunks * kPanel;
    __m512 acc0[kPanelRows], acc1[kPanelRows];
    for (size_t r = 0; r < kPanelRows; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    size_t c = 0;
    for (; c + 2 <= chunks; c += 2) {
      const bf16* block = panel + c * kPanel;
      if (prefetch) {  // per CPU, see gemv_variants.h
        _mm_prefetch(reinterpret_cast<const char*>(block + 8 * kPanel), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(block + 9 * kPanel), _MM_HINT_T0);
      }
      const __m512bh x0 = Load(x + c * kChunkCols), x1 = Load(x + (c + 1) * kChunkCols);
#pragma GCC unroll 8
      for (size_t r = 0; r < kPanelRows; ++r) {
        acc0[r] = _mm512_dpbf16_ps(acc0[r], Load(block + r * kChunkCols), x0);
      }
#pragma GCC unroll 8
      for (size_t r = 0; r < kPanelRows; ++r) {
        acc1[r] = _mm512_dpbf16_ps(acc1[r], Load(block + kPanel + r * kChunkCols), x1);
      }
    }
    if (c < chunks) {
      const bf16* block = panel + c * kPanel;
      const __m512bh x0 = Load(x + c * kChunkCols);
#pragma GCC unroll 8
      for (size_t r = 0; r < kPanelRows; ++r) {
        acc0[r] = _mm512_dpbf16_ps(acc0[r], Load(block + r * kChunkCols), x0);
      }
    }
    const size_t base = p * kPanelRows;
    for (size_t r = 0; r < kPanelRows && base + r < rows; ++r) {
      Store(_mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])), y + base + r);
    }
  }
}

}  // namespace

bool CpuHasAvx512Bf16() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return has;
}

void RowMajorRowsDpBf16(const bf16* w, size_t cols, size_t r0, size_t r1, const bf16* x, float* y) {
  RowMajor(w, cols, r0, r1, x, y);
}
void RowMajorRowsDpBf16(const bf16* w, size_t cols, size_t r0, size_t r1, const bf16* x, bf16* y) {
  RowMajor(w, cols, r0, r1, x, y);
}
void PackedPanelsDpBf16(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                        const bf16* x, float* y, bool prefetch) {
  Packed(packed, rows, chunks, p0, p1, x, y, prefetch);
}
void PackedPanelsDpBf16(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                        const bf16* x, bf16* y, bool prefetch) {
  Packed(packed, rows, chunks, p0, p1, x, y, prefetch);
}

}  // namespace dk::kernels::internal

namespace dk::kernels::internal {
namespace {

// kRows rows of one panel (from row `r`) times kTokens token rows, chunks [c0, c1) (c0
// even): each loaded weight chunk feeds kTokens accumulators. Every (row, token) pair
// keeps Packed's two accumulators and their sequence of vdpbf16ps, so its sum is
// Packed's bit for bit. Between column slices the accumulators wait in `mem`
// (stored and reloaded exactly); the last slice reduces them into out[t * out_stride
// + r + i] for the panel's n real rows.
template <size_t kRows, size_t kTokens>
DK_BF16_TARGET inline void PanelTile(const bf16* panel, size_t c0, size_t c1, bool first, bool last, size_t r,
                                     const bf16* const* x, __m512* mem, float* out, size_t out_stride, size_t n) {
  constexpr size_t kPanel = kPanelRows * kChunkCols;
  __m512 acc0[kRows][kTokens], acc1[kRows][kTokens];
  StartTile<kRows, kTokens>(first, mem, acc0, acc1);
  size_t c = c0;
  for (; c + 2 <= c1; c += 2) {
    const bf16* block = panel + c * kPanel + r * kChunkCols;
#pragma GCC unroll 4
    for (size_t i = 0; i < kRows; ++i) {
      const __m512bh w0 = Load(block + i * kChunkCols), w1 = Load(block + kPanel + i * kChunkCols);
#pragma GCC unroll 4
      for (size_t t = 0; t < kTokens; ++t) {
        acc0[i][t] = _mm512_dpbf16_ps(acc0[i][t], w0, Load(x[t] + c * kChunkCols));
        acc1[i][t] = _mm512_dpbf16_ps(acc1[i][t], w1, Load(x[t] + (c + 1) * kChunkCols));
      }
    }
  }
  if (c < c1) {  // an odd last chunk (only the last slice has one)
    const bf16* block = panel + c * kPanel + r * kChunkCols;
    for (size_t i = 0; i < kRows; ++i) {
      const __m512bh w0 = Load(block + i * kChunkCols);
      for (size_t t = 0; t < kTokens; ++t) acc0[i][t] = _mm512_dpbf16_ps(acc0[i][t], w0, Load(x[t] + c * kChunkCols));
    }
  }
  FinishTile<kRows, kTokens>(last, r, n, acc0, acc1, mem, out, out_stride);
}

// Columns per slice of a long panel: a 4 x 3 tile's weights and x of one slice (14 KiB)
// stay in L1, where whole rows of K = 8192 (112 KiB) would not.
constexpr size_t kSliceChunks = 32;

// All token rows over rows [0, n) of one panel, n <= 8: out[t * out_stride + row].
template <size_t kRows, size_t kTokens>
void PanelAllTokens(const bf16* panel, size_t chunks, size_t n, const bf16* const* x, size_t m, float* out,
                    size_t out_stride, KernelScratch& scratch, int thread) {
  constexpr size_t kSlot = 2 * kRows * kTokens;  // accumulators of one tile
  const size_t floats = PanelSlots(m, kRows, kTokens) * kSlot * 16;
  // Short panels run in one slice and keep their accumulators in registers.
  __m512* mem = chunks > 2 * kSliceChunks
                    ? reinterpret_cast<__m512*>(scratch.Get<float>(thread, kDpBf16Tiles, floats))
                    : nullptr;
  ForPanelSlices<kRows, kTokens>(chunks, kSliceChunks, n, m, [&](auto tokens, size_t c0, size_t c1, bool first,
                                                                 bool last, size_t r, size_t t, size_t slot) {
    PanelTile<kRows, tokens>(panel, c0, c1, first, last, r, x + t, mem + slot * kSlot, out + t * out_stride,
                             out_stride, n);
  });
}

// RowMajor's loop on kRows rows (from row r) of row-major W times kTokens token rows,
// each (row, token) pair with RowMajor's two accumulators and order (the partial last
// chunk zero-padded into accumulator c % 2): out[t * out_stride + r + i].
template <size_t kRows, size_t kTokens>
DK_BF16_TARGET inline void RowMajorTile(const bf16* w, size_t cols, size_t r, const bf16* const* x, float* out,
                                        size_t out_stride) {
  const size_t full = cols / kChunkCols;
  const bf16* rows[kRows];
  __m512 acc0[kRows][kTokens], acc1[kRows][kTokens];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = w + (r + i) * cols;
    for (size_t t = 0; t < kTokens; ++t) acc0[i][t] = acc1[i][t] = _mm512_setzero_ps();
  }
  size_t c = 0;
  for (; c + 2 <= full; c += 2) {
#pragma GCC unroll 4
    for (size_t i = 0; i < kRows; ++i) {
      const __m512bh w0 = Load(rows[i] + c * kChunkCols), w1 = Load(rows[i] + (c + 1) * kChunkCols);
#pragma GCC unroll 4
      for (size_t t = 0; t < kTokens; ++t) {
        acc0[i][t] = _mm512_dpbf16_ps(acc0[i][t], w0, Load(x[t] + c * kChunkCols));
        acc1[i][t] = _mm512_dpbf16_ps(acc1[i][t], w1, Load(x[t] + (c + 1) * kChunkCols));
      }
    }
  }
  if (c < full) {
    for (size_t i = 0; i < kRows; ++i) {
      const __m512bh w0 = Load(rows[i] + c * kChunkCols);
      for (size_t t = 0; t < kTokens; ++t) acc0[i][t] = _mm512_dpbf16_ps(acc0[i][t], w0, Load(x[t] + c * kChunkCols));
    }
    ++c;
  }
  if (c * kChunkCols < cols) {
    for (size_t i = 0; i < kRows; ++i) {
      alignas(64) bf16 tail[kChunkCols] = {};
      std::memcpy(tail, rows[i] + c * kChunkCols, (cols - c * kChunkCols) * sizeof(bf16));
      const __m512bh w0 = Load(tail);
      for (size_t t = 0; t < kTokens; ++t) {
        __m512& acc = c % 2 == 0 ? acc0[i][t] : acc1[i][t];
        acc = _mm512_dpbf16_ps(acc, w0, Load(x[t] + c * kChunkCols));
      }
    }
  }
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) {
      out[t * out_stride + r + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i][t], acc1[i][t]));
    }
  }
}

}  // namespace

void PackedPanelsDpBf16Tokens(const bf16* packed, size_t rows, size_t chunks, size_t p0, size_t p1,
                              const bf16* const* x, size_t m, float* out, size_t out_stride,
                              KernelScratch& scratch, int thread) {
  constexpr size_t kPanel = kPanelRows * kChunkCols;
  for (size_t p = p0; p < p1; ++p) {
    const size_t n = std::min(kPanelRows, rows - p * kPanelRows);
    PanelAllTokens<4, 3>(packed + p * chunks * kPanel, chunks, n, x, m, out + (p - p0) * kPanelRows, out_stride,
                         scratch, thread);
  }
}

void RowMajorRowsDpBf16Tokens(const bf16* w, size_t cols, size_t n, const bf16* const* x, size_t m, float* out,
                              size_t out_stride) {
  ForRowTokenTiles<4, 3>(n, m, [&](auto rows, auto tokens, size_t r, size_t t) {
    RowMajorTile<rows, tokens>(w, cols, r, x + t, out + t * out_stride, out_stride);
  });
}

}  // namespace dk::kernels::internal
