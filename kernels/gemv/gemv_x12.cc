#include "kernels/gemv/gemv_x12.h"

#include <immintrin.h>

// GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized on its own locals.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/gemv/gemm_tiles.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_avx512bf16.h"
#include "kernels/gemv/gemv_rows.h"
#include "util/aligned_buffer.h"
#include "util/check.h"

namespace dk::kernels {
namespace {

// The layout's sizes (formats/weight_format.h).
constexpr size_t kPairCols = formats::kX12BlockCols;         // 64 columns per block
constexpr size_t kRowBytes = kPairCols + kPairCols / 2;      // 64 low bytes + 32 code bytes
constexpr size_t kBlockBytes = formats::kX12CodeBytes;       // 768
static_assert(kBlockBytes == kPanelRows * kRowBytes);
constexpr size_t kTableBytes = formats::kX12TableBytes;
constexpr size_t kRawBytes = formats::kX12RawBytes;          // 1024
constexpr size_t kHeaderBytes = formats::kX12HeaderBytes;
constexpr char kMagic[8] = "DKX12v1";
constexpr uint32_t kModeBlocks = 0, kModePlain = 1;
// Software prefetch distance of the kernel, in blocks (6 KiB), for all 12 lines of a
// block, non-temporal, where GemvVariants::prefetch (gemv_variants.h) says to prefetch at all.
// Prefetching only two lines per block left the rest to the hardware prefetcher, which
// fell behind one core's x12 stream; shorter distances hurt most on 1 thread and in the
// fast bandwidth mode, where each core must stream the most (docs/gemv-kernels.md).
constexpr size_t kPrefetchBlocks = 8;

size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

struct Geometry {
  size_t rows, cols, panels, chunks, pairs, blocks;
  size_t tables, spill, spill_capacity, header;  // byte offsets; blocks in the spill area
};

Geometry Geo(size_t rows, size_t cols) {
  Geometry g;
  g.rows = rows;
  g.cols = cols;
  g.panels = formats::X12Panels(rows);
  g.chunks = (cols + kChunkCols - 1) / kChunkCols;
  g.pairs = formats::X12BlocksPerPanel(cols);
  g.blocks = formats::X12Blocks(rows, cols);
  g.tables = kBlockBytes * g.blocks;
  g.spill = RoundUp((kBlockBytes + kTableBytes) * g.blocks, 64);
  g.header = kRawBytes * g.blocks;
  g.spill_capacity = g.header > g.spill ? (g.header - g.spill) / kRawBytes : 0;
  return g;
}

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
void StoreU32(uint32_t v, uint8_t* p) { std::memcpy(p, &v, sizeof(v)); }

bool Plain(const uint8_t* x12, const Geometry& g) { return LoadU32(x12 + g.header + 8) == kModePlain; }

// The stats of a matrix of geometry g: plain, or blocks of which `raw` are raw.
X12PackStats StatsOf(const Geometry& g, bool plain, size_t raw) {
  X12PackStats stats;
  stats.blocks = g.blocks;
  stats.plain = plain;
  stats.raw_blocks = plain ? 0 : raw;
  stats.streamed_bytes = plain ? PackedGemvElements(g.rows, g.cols) * sizeof(bf16)
                               : formats::X12StreamedBytes(g.blocks, raw);
  return stats;
}

// Position of column i (< 64) of a chunk pair in a row's 64 low bytes (see the header).
size_t Position(size_t i) {
  const size_t half = i / kChunkCols, j = i % kChunkCols;
  return 16 * (j / 8) + 8 * half + j % 8;
}

// Row r of block (p, q) as 64 bf16 (chunk 2q's 32 columns, then 2q + 1's).
void DecodeBlockRow(const uint8_t* x12, const Geometry& g, size_t p, size_t q, size_t r, bf16* out) {
  const size_t b = p * g.pairs + q;
  const uint8_t* table = x12 + g.tables + kTableBytes * b;
  if (!(table[8] & 0x80)) {  // raw
    const uint8_t* raw = x12 + g.spill + kRawBytes * LoadU32(table);
    for (size_t half = 0; half < 2; ++half) {
      std::memcpy(out + half * kChunkCols, raw + (half * kPanelRows + r) * kChunkCols * sizeof(bf16),
                  kChunkCols * sizeof(bf16));
    }
    return;
  }
  const uint8_t* row = x12 + kBlockBytes * b + kRowBytes * r;
  for (size_t i = 0; i < kPairCols; ++i) {
    const size_t t = Position(i);
    const uint8_t code = t < 32 ? (row[kPairCols + t] & 0x0f) : (row[kPairCols + t - 32] >> 4);
    out[i] = bf16{static_cast<uint16_t>(table[code] << 8 | row[t])};
  }
}

// Panel p in the packed panel layout (gemv.h) into `out` (chunks * 8 * 32 elements).
void DecodePanel(const uint8_t* x12, const Geometry& g, size_t p, bf16* out) {
  bf16 row[kPairCols];
  for (size_t q = 0; q < g.pairs; ++q) {
    for (size_t r = 0; r < kPanelRows; ++r) {
      DecodeBlockRow(x12, g, p, q, r, row);
      for (size_t half = 0; half < 2 && 2 * q + half < g.chunks; ++half) {
        std::memcpy(out + ((2 * q + half) * kPanelRows + r) * kChunkCols, row + half * kChunkCols,
                    kChunkCols * sizeof(bf16));
      }
    }
  }
}

#define DK_X12_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

DK_X12_TARGET inline __m512bh LoadBh(const void* p) { return (__m512bh)_mm512_loadu_si512(p); }

// Every cache line of [p, p + bytes), non-temporal (see kPrefetchBlocks).
inline void PrefetchNta(const uint8_t* p, size_t bytes) {
  for (size_t line = 0; line < bytes; line += 64) _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_NTA);
}

// Row `row` of a compact block rebuilt: chunk 2q's 32 weights into *w0, 2q + 1's
// into *w1 (`tab` the block's table in each 128-bit lane). Code bytes are broadcast
// to both 256-bit halves; the upper half's 16-bit lanes shift right by 4 to bring
// the high nibbles down.
DK_X12_TARGET inline void DecodeRow(const uint8_t* row, __m512i tab, __m512bh* w0, __m512bh* w1) {
  const __m512i shift = _mm512_set_epi64(0x0004000400040004ll, 0x0004000400040004ll, 0x0004000400040004ll,
                                         0x0004000400040004ll, 0, 0, 0, 0);
  const __m512i codes = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + kPairCols)));
  const __m512i upper =
      _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srlv_epi16(codes, shift), _mm512_set1_epi8(0x0f)));
  const __m512i lower = _mm512_loadu_si512(row);
  *w0 = (__m512bh)_mm512_unpacklo_epi8(lower, upper);
  *w1 = (__m512bh)_mm512_unpackhi_epi8(lower, upper);
}

DK_X12_TARGET inline __m512i LoadTable(const uint8_t* table) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
}

// One block (8 rows x the chunk pair) into the panel's accumulators: chunk 2q into
// acc0, 2q + 1 into acc1 (kBoth false: an odd last chunk, alone; x ends there).
template <bool kBoth>
DK_X12_TARGET inline void Block(const uint8_t* x12, const Geometry& g, const uint8_t* block, const uint8_t* table,
                                const bf16* x, __m512* acc0, __m512* acc1) {
  const __m512bh x0 = LoadBh(x);
  const __m512bh x1 = kBoth ? LoadBh(x + kChunkCols) : x0;
  if (__builtin_expect(table[8] & 0x80, 1)) {
    const __m512i tab = LoadTable(table);
#pragma GCC unroll 8
    for (size_t r = 0; r < kPanelRows; ++r) {
      __m512bh w0, w1;
      DecodeRow(block + r * kRowBytes, tab, &w0, &w1);
      acc0[r] = _mm512_dpbf16_ps(acc0[r], w0, x0);
      if (kBoth) acc1[r] = _mm512_dpbf16_ps(acc1[r], w1, x1);
    }
  } else {
    const uint8_t* raw = x12 + g.spill + kRawBytes * LoadU32(table);
#pragma GCC unroll 8
    for (size_t r = 0; r < kPanelRows; ++r) {
      acc0[r] = _mm512_dpbf16_ps(acc0[r], LoadBh(raw + r * 64), x0);
      if (kBoth) acc1[r] = _mm512_dpbf16_ps(acc1[r], LoadBh(raw + kRawBytes / 2 + r * 64), x1);
    }
  }
}

// The vdpbf16ps loop of gemv_avx512bf16.cc (chunk c into accumulator c % 2, the two
// added and reduced at the end) on weights rebuilt in registers: bit-identical to it.
DK_X12_TARGET void PanelsDpBf16(const uint8_t* x12, const Geometry& g, size_t p0, size_t p1, const bf16* x,
                                float* y, bool prefetch) {
  const size_t full = g.chunks / 2;
  // The range's first blocks and tables up front: the loop prefetches kPrefetchBlocks
  // ahead, and a task range is a new stream (small GEMVs are mostly such starts).
  if (prefetch) {
    PrefetchNta(x12 + p0 * g.pairs * kBlockBytes, std::min(kPrefetchBlocks, (p1 - p0) * g.pairs) * kBlockBytes);
    PrefetchNta(x12 + g.tables + p0 * g.pairs * kTableBytes, 1);
  }
  for (size_t p = p0; p < p1; ++p) {
    const uint8_t* data = x12 + p * g.pairs * kBlockBytes;
    const uint8_t* tables = x12 + g.tables + p * g.pairs * kTableBytes;
    __m512 acc0[kPanelRows], acc1[kPanelRows];
    for (size_t r = 0; r < kPanelRows; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (size_t q = 0; q < full; ++q) {
      const uint8_t* block = data + q * kBlockBytes;
      // Every line of the block kPrefetchBlocks ahead and, one line per 4 blocks, the
      // tables' (a second stream); see kPrefetchBlocks.
      if (prefetch) {
        PrefetchNta(block + kPrefetchBlocks * kBlockBytes, kBlockBytes);
        PrefetchNta(tables + (q + 32) * kTableBytes, 1);
      }
      Block<true>(x12, g, block, tables + q * kTableBytes, x + q * kPairCols, acc0, acc1);
    }
    if (g.chunks % 2) Block<false>(x12, g, data + full * kBlockBytes, tables + full * kTableBytes, x + full * kPairCols, acc0, acc1);
    const size_t base = p * kPanelRows;
    for (size_t r = 0; r < kPanelRows && base + r < g.rows; ++r) {
      y[base + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
    }
  }
}

// Block (p, q)'s rows [r, r + kRows) decoded once each (as Block does) and applied to
// kTokens token rows: chunk 2q into acc0, 2q + 1 into acc1 (kBoth false: an odd last
// chunk, alone), `col` the block's first column in every x[t].
template <bool kBoth, size_t kRows, size_t kTokens>
DK_X12_TARGET inline void BlockTokens(const uint8_t* x12, const Geometry& g, const uint8_t* block,
                                      const uint8_t* table, size_t r, const bf16* const* x, size_t col,
                                      __m512 (*acc0)[kTokens], __m512 (*acc1)[kTokens]) {
  const bool compact = __builtin_expect(table[8] & 0x80, 1);
  const __m512i tab = LoadTable(table);
  const uint8_t* raw = compact ? nullptr : x12 + g.spill + kRawBytes * LoadU32(table);
#pragma GCC unroll 4
  for (size_t i = 0; i < kRows; ++i) {
    __m512bh w0, w1;
    if (compact) {
      DecodeRow(block + (r + i) * kRowBytes, tab, &w0, &w1);
    } else {
      w0 = LoadBh(raw + (r + i) * 64);
      w1 = LoadBh(raw + kRawBytes / 2 + (r + i) * 64);
    }
#pragma GCC unroll 6
    for (size_t t = 0; t < kTokens; ++t) {
      acc0[i][t] = _mm512_dpbf16_ps(acc0[i][t], w0, LoadBh(x[t] + col));
      if (kBoth) acc1[i][t] = _mm512_dpbf16_ps(acc1[i][t], w1, LoadBh(x[t] + col + kChunkCols));
    }
  }
}

// Rows [r, r + kRows) of panel p (n of its rows real) for kTokens token rows, blocks
// [q0, q1) of the panel: each (row, token) pair is PanelsDpBf16's sum. Between column
// slices the accumulators wait in `mem` (stored and reloaded exactly); the last
// slice reduces them into out[t * out_stride + row in panel].
template <size_t kRows, size_t kTokens>
DK_X12_TARGET void PanelTile(const uint8_t* x12, const Geometry& g, size_t p, size_t q0, size_t q1, bool first,
                             bool last, size_t r, size_t n, const bf16* const* x, __m512* mem, float* out,
                             size_t out_stride) {
  const uint8_t* data = x12 + p * g.pairs * kBlockBytes;
  const uint8_t* tables = x12 + g.tables + p * g.pairs * kTableBytes;
  __m512 acc0[kRows][kTokens], acc1[kRows][kTokens];
  internal::StartTile<kRows, kTokens>(first, mem, acc0, acc1);
  const size_t full = std::min(q1, g.chunks / 2);
  for (size_t q = q0; q < full; ++q) {
    BlockTokens<true, kRows, kTokens>(x12, g, data + q * kBlockBytes, tables + q * kTableBytes, r, x, q * kPairCols,
                                      acc0, acc1);
  }
  if (last && g.chunks % 2) {
    BlockTokens<false, kRows, kTokens>(x12, g, data + full * kBlockBytes, tables + full * kTableBytes, r, x,
                                       full * kPairCols, acc0, acc1);
  }
  internal::FinishTile<kRows, kTokens>(last, r, n, acc0, acc1, mem, out, out_stride);
}

// Chunk pairs per slice of a long panel: a 4 x 3 tile's blocks and x of one slice stay
// in L1 (as kSliceChunks of the packed kernel, gemv_avx512bf16.cc).
constexpr size_t kSlicePairs = 16;

// All m token rows over panel p (n of its rows real): out[t * out_stride + row in panel].
template <size_t kRows, size_t kTokens>
void PanelAllTokens(const uint8_t* x12, const Geometry& g, size_t p, size_t n, const bf16* const* x, size_t m,
                    float* out, size_t out_stride, KernelScratch& scratch, int thread) {
  constexpr size_t kSlot = 2 * kRows * kTokens;  // accumulators of one tile
  const size_t floats = internal::PanelSlots(m, kRows, kTokens) * kSlot * 16;
  // Short panels run in one slice and keep their accumulators in registers.
  __m512* mem = g.pairs > 2 * kSlicePairs
                    ? reinterpret_cast<__m512*>(scratch.Get<float>(thread, kX12Tiles, floats))
                    : nullptr;
  internal::ForPanelSlices<kRows, kTokens>(g.pairs, kSlicePairs, n, m, [&](auto tokens, size_t q0, size_t q1,
                                                                           bool first, bool last, size_t r, size_t t,
                                                                           size_t slot) {
    PanelTile<kRows, tokens>(x12, g, p, q0, q1, first, last, r, n, x + t, mem + slot * kSlot, out + t * out_stride,
                             out_stride);
  });
}

// Panels [p0, p1) of a blocks-mode matrix rebuilt in the packed panel layout (gemv.h)
// into `out`: each compact row as Block rebuilds it, raw blocks copied (they are in
// that layout already), an odd last chunk's missing half skipped.
// `prefetch` as PanelsDpBf16: one stream of blocks.
DK_X12_TARGET void DecodePanels(const uint8_t* x12, const Geometry& g, size_t p0, size_t p1, bf16* out,
                                bool prefetch) {
  constexpr size_t kPanel = kPanelRows * kChunkCols;
  for (size_t p = p0; p < p1; ++p) {
    bf16* panel = out + (p - p0) * g.chunks * kPanel;
    for (size_t q = 0; q < g.pairs; ++q) {
      const size_t b = p * g.pairs + q;
      const uint8_t* block = x12 + b * kBlockBytes;
      const uint8_t* table = x12 + g.tables + b * kTableBytes;
      if (prefetch) PrefetchNta(block + kPrefetchBlocks * kBlockBytes, kBlockBytes);
      bf16* c0 = panel + 2 * q * kPanel;
      const bool both = 2 * q + 1 < g.chunks;
      if (!(table[8] & 0x80)) {
        const uint8_t* raw = x12 + g.spill + kRawBytes * LoadU32(table);
        std::memcpy(c0, raw, (both ? 2 : 1) * kPanel * sizeof(bf16));
        continue;
      }
      const __m512i tab = LoadTable(table);
#pragma GCC unroll 8
      for (size_t r = 0; r < kPanelRows; ++r) {
        __m512bh w0, w1;
        DecodeRow(block + r * kRowBytes, tab, &w0, &w1);
        _mm512_storeu_si512(c0 + r * kChunkCols, (__m512i)w0);
        if (both) _mm512_storeu_si512(c0 + kPanel + r * kChunkCols, (__m512i)w1);
      }
    }
  }
}

void StoreRows(const float* src, size_t n, bf16* y) {
  for (size_t i = 0; i < n; ++i) y[i] = F32ToBf16(src[i]);
}

template <typename YT>
void Gemv(const uint8_t* x12, size_t rows, size_t cols, const bf16* x, YT* y, ThreadPool* pool,
          const GemvVariants& variants, KernelScratch* given) {
  if (rows == 0) return;
  const CallScratch scratch(given, pool != nullptr ? pool->num_threads() : 1);
  const internal::Bf16X px = internal::PrepareBf16X(x, cols, variants, *scratch, CallerThread());
  const size_t panels = (rows + kPanelRows - 1) / kPanelRows;
  ParallelRanges(pool, panels, [&](size_t p0, size_t p1, int thread) {
    const size_t r0 = p0 * kPanelRows, r1 = std::min(rows, p1 * kPanelRows);
    if (r0 >= r1) return;
    if constexpr (std::is_same_v<YT, float>) {
      internal::Bf16X12Rows(x12, rows, px, r0, r1, y, *scratch, thread);
    } else {
      float* acc = scratch->Get<float>(thread, kX12RowsY, rows);  // indexed by row, as the rows kernels write
      internal::Bf16X12Rows(x12, rows, px, r0, r1, acc, *scratch, thread);
      StoreRows(acc + r0, r1 - r0, y + r0);
    }
  });
}

}  // namespace

size_t X12GemvBytes(size_t rows, size_t cols) { return formats::X12TensorBytes(rows, cols); }

namespace {

// Block (p, q) of row-major W, zero-padded: block[r][i] = W[8p + r, 64q + i].
void GatherBlock(const bf16* w, const Geometry& g, size_t p, size_t q, uint16_t (*block)[kPairCols]) {
  for (size_t r = 0; r < kPanelRows; ++r) {
    const size_t row = p * kPanelRows + r, col = q * kPairCols;
    const size_t n = row < g.rows && col < g.cols ? std::min(kPairCols, g.cols - col) : 0;
    if (n) std::memcpy(block[r], w + row * g.cols + col, n * sizeof(bf16));
    std::fill(block[r] + n, block[r] + kPairCols, uint16_t{0});
  }
}

// The values of v = exponent >> 1 (bits 8..14 of a bf16) in a block, as a bitmap.
struct VSet {
  uint64_t bits[2] = {0, 0};
  int Count() const { return __builtin_popcountll(bits[0]) + __builtin_popcountll(bits[1]); }
};
VSet ValuesOfV(const uint16_t (*block)[kPairCols]) {
  VSet set;
  for (size_t r = 0; r < kPanelRows; ++r) {
    for (size_t i = 0; i < kPairCols; ++i) {
      const unsigned v = (block[r][i] >> 8) & 0x7f;
      set.bits[v / 64] |= uint64_t{1} << (v % 64);
    }
  }
  return set;
}

// Writes a compact block: its table and its 8 rows of low bytes and codes.
void WriteCompact(const uint16_t (*block)[kPairCols], const VSet& set, uint8_t* table, uint8_t* data) {
  uint8_t index[128];
  int k = 0;
  for (unsigned v = 0; v < 128; ++v) {
    if (!(set.bits[v / 64] >> (v % 64) & 1)) continue;
    index[v] = static_cast<uint8_t>(k);
    table[k] = static_cast<uint8_t>(v);
    table[k + 8] = static_cast<uint8_t>(0x80 | v);
    ++k;
  }
  for (; k < 8; ++k) {  // unused codes: copies of code 0
    table[k] = table[0];
    table[k + 8] = table[8];
  }
  static const auto* positions = [] {
    auto* t = new std::array<uint8_t, kPairCols>();
    for (size_t i = 0; i < kPairCols; ++i) (*t)[i] = static_cast<uint8_t>(Position(i));
    return t;
  }();
  for (size_t r = 0; r < kPanelRows; ++r) {
    uint8_t* row = data + kRowBytes * r;
    std::memset(row + kPairCols, 0, kPairCols / 2);
    for (size_t i = 0; i < kPairCols; ++i) {
      const uint16_t value = block[r][i];
      const size_t t = (*positions)[i];
      row[t] = static_cast<uint8_t>(value & 0xff);
      const unsigned code = (value >> 15) << 3 | index[(value >> 8) & 0x7f];
      row[kPairCols + t % 32] |= static_cast<uint8_t>(code << (t / 32 * 4));
    }
  }
}

}  // namespace

X12PackStats PackX12GemvWeights(const bf16* w, size_t rows, size_t cols, uint8_t* out, ThreadPool* pool,
                                bool out_zeroed) {
  const Geometry g = Geo(rows, cols);
  uint8_t* header = out + g.header;
  std::memset(header, 0, kHeaderBytes);
  std::memcpy(header, kMagic, sizeof(kMagic));
  const int64_t tasks = TaskCount(g.panels, pool);
  auto parallel = [&](const auto& panel_fn) {
    auto body = [&](int64_t t, int) {
      for (size_t p = SplitPoint(g.panels, tasks, t, 1); p < SplitPoint(g.panels, tasks, t + 1, 1); ++p) panel_fn(p);
    };
    if (g.panels == 0) return;
    pool ? pool->Run(tasks, body) : body(0, 0);
  };
  // 1: each block's values of v; those with more than 8 are raw, their spill slots
  // numbered in block order.
  std::vector<VSet> sets(g.blocks);
  parallel([&](size_t p) {
    uint16_t block[kPanelRows][kPairCols];
    for (size_t q = 0; q < g.pairs; ++q) {
      GatherBlock(w, g, p, q, block);
      sets[p * g.pairs + q] = ValuesOfV(block);
    }
  });
  std::vector<uint32_t> spill(g.blocks, 0);  // 1 + slot for raw blocks
  uint32_t raw = 0;
  for (size_t b = 0; b < g.blocks; ++b) spill[b] = sets[b].Count() > 8 ? ++raw : 0;
  if (raw > g.spill_capacity) {  // more raw blocks than the spill area holds: all plain
    std::memset(out, 0, g.header);
    PackGemvWeights(w, rows, cols, reinterpret_cast<bf16*>(out));
    StoreU32(kModePlain, header + 8);
    return StatsOf(g, /*plain=*/true, 0);
  }
  // 2: every block, compact or raw (its data zeroed, its table pointing at its slot).
  parallel([&](size_t p) {
    uint16_t block[kPanelRows][kPairCols];
    for (size_t q = 0; q < g.pairs; ++q) {
      const size_t b = p * g.pairs + q;
      GatherBlock(w, g, p, q, block);
      uint8_t* table = out + g.tables + kTableBytes * b;
      uint8_t* data = out + kBlockBytes * b;
      if (!spill[b]) {
        WriteCompact(block, sets[b], table, data);
        continue;
      }
      std::memset(table, 0, kTableBytes);  // byte 8 == 0: raw
      StoreU32(spill[b] - 1, table);
      std::memset(data, 0, kBlockBytes);
      uint8_t* dst = out + g.spill + kRawBytes * (spill[b] - 1);
      for (size_t half = 0; half < 2; ++half) {
        for (size_t r = 0; r < kPanelRows; ++r) {
          std::memcpy(dst + (half * kPanelRows + r) * kChunkCols * sizeof(bf16), block[r] + half * kChunkCols,
                      kChunkCols * sizeof(bf16));
        }
      }
    }
  });
  // The gaps: after the tables, and the spill area's unused slots.
  std::memset(out + g.tables + kTableBytes * g.blocks, 0, g.spill - (g.tables + kTableBytes * g.blocks));
  if (!out_zeroed) std::memset(out + g.spill + kRawBytes * raw, 0, g.header - (g.spill + kRawBytes * raw));
  StoreU32(kModeBlocks, header + 8);
  StoreU32(raw, header + 12);
  return StatsOf(g, /*plain=*/false, raw);
}

X12PackStats X12GemvStats(const uint8_t* x12, size_t rows, size_t cols) {
  const Geometry g = Geo(rows, cols);
  DK_CHECK(std::memcmp(x12 + g.header, kMagic, sizeof(kMagic)) == 0);
  return StatsOf(g, Plain(x12, g), LoadU32(x12 + g.header + 12));
}

void UnpackX12GemvRow(const uint8_t* x12, size_t rows, size_t cols, size_t row, bf16* out) {
  DK_CHECK(row < rows);
  const Geometry g = Geo(rows, cols);
  if (Plain(x12, g)) return UnpackGemvRow(reinterpret_cast<const bf16*>(x12), rows, cols, row, out);
  bf16 pair[kPairCols];
  for (size_t q = 0; q < g.pairs; ++q) {
    DecodeBlockRow(x12, g, row / kPanelRows, q, row % kPanelRows, pair);
    const size_t col = q * kPairCols;
    std::memcpy(out + col, pair, std::min(kPairCols, cols - col) * sizeof(bf16));
  }
}

void X12Gemv(const uint8_t* x12, size_t rows, size_t cols, const bf16* x, float* y, ThreadPool* pool,
             const GemvVariants& variants, KernelScratch* scratch) {
  Gemv(x12, rows, cols, x, y, pool, variants, scratch);
}
void X12Gemv(const uint8_t* x12, size_t rows, size_t cols, const bf16* x, bf16* y, ThreadPool* pool,
             const GemvVariants& variants, KernelScratch* scratch) {
  Gemv(x12, rows, cols, x, y, pool, variants, scratch);
}

namespace internal {

void Bf16X12Rows(const uint8_t* x12, size_t rows, const Bf16X& x, size_t r0, size_t r1, float* y,
                 KernelScratch& scratch, int thread) {
  DK_CHECK(r0 % kPanelRows == 0 && (r1 % kPanelRows == 0 || r1 == rows) && r1 <= rows);
  const Geometry g = Geo(rows, x.cols);
  if (Plain(x12, g)) return Bf16PackedRows(reinterpret_cast<const bf16*>(x12), rows, x, r0, r1, y);
  const size_t p0 = r0 / kPanelRows, p1 = (r1 + kPanelRows - 1) / kPanelRows;
  if (x.dot) return PanelsDpBf16(x12, g, p0, p1, x.padded, y, x.prefetch);
  // No vdpbf16ps: each panel unpacked to the packed layout, then PackedGemv's loop.
  bf16* panel = scratch.Get<bf16>(thread, kX12Panel, g.chunks * kPanelRows * kChunkCols);
  for (size_t p = p0; p < p1; ++p) {
    DecodePanel(x12, g, p, panel);
    const size_t base = p * kPanelRows, n = std::min(kPanelRows, rows - base);
    Bf16PackedRows(panel, n, x, 0, n, y + base);
  }
}

const bf16* X12PanelsAsPacked(const uint8_t* x12, size_t rows, size_t cols, size_t p0, size_t p1, bf16* scratch,
                              const Bf16X& x) {
  const Geometry g = Geo(rows, cols);
  DK_CHECK(p0 <= p1 && p1 <= g.panels);
  const size_t panel = g.chunks * kPanelRows * kChunkCols;
  if (Plain(x12, g)) return reinterpret_cast<const bf16*>(x12) + p0 * panel;
  if (x.dot) {  // AVX512_BF16 CPUs (and not switched off)
    DecodePanels(x12, g, p0, p1, scratch, x.prefetch);
  } else {
    for (size_t p = p0; p < p1; ++p) DecodePanel(x12, g, p, scratch + (p - p0) * panel);
  }
  return scratch;
}

void Bf16X12RowsTokens(const uint8_t* x12, size_t rows, size_t cols, size_t r0, size_t r1,
                       const bf16* const* x, size_t m, float* out, size_t out_stride, KernelScratch& scratch,
                       int thread) {
  DK_CHECK(r0 % kPanelRows == 0 && (r1 % kPanelRows == 0 || r1 == rows) && r1 <= rows);
  const Geometry g = Geo(rows, cols);
  const size_t p0 = r0 / kPanelRows, p1 = (r1 + kPanelRows - 1) / kPanelRows;
  if (Plain(x12, g)) {
    return PackedPanelsDpBf16Tokens(reinterpret_cast<const bf16*>(x12), rows, g.chunks, p0, p1, x, m, out, out_stride,
                                    scratch, thread);
  }
  for (size_t p = p0; p < p1; ++p) {
    PanelAllTokens<4, 3>(x12, g, p, std::min(kPanelRows, rows - p * kPanelRows), x, m, out + (p - p0) * kPanelRows,
                         out_stride, scratch, thread);
  }
}

}  // namespace internal
}  // namespace dk::kernels
