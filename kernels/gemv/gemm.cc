#include "kernels/gemv/gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemm_q4_vnni.h"
#include "kernels/gemv/gemv_avx512bf16.h"
#include "kernels/gemv/gemv_kquant.h"
#include "kernels/gemv/gemv_quant_vnni.h"
#include "kernels/gemv/gemv_rows.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/norm/rmsnorm.h"
#include "util/aligned_buffer.h"
#include "util/check.h"

// Loop order. The single-row kernels stream the whole matrix per token; here the
// rows each thread owns are cut into tiles of at most kTileBytes of weights, and
// every block of token rows runs over a tile while it is in L2, so the weights come
// from DRAM once per call. On AVX-512 CPUs the bf16 vdpbf16ps paths (row-major,
// packed, x12) and the VNNI paths of Q8_0, Q4_0, Q4_1, Q5_0, Q4_K and Q6_K go further: each
// loaded (or decoded) weight vector feeds several token rows' accumulators held in
// registers (the *Tokens kernels beside their single-row ones: gemv_avx512bf16.h,
// gemv_x12.h, gemv_quant_vnni.h, gemm_q4_vnni.h, gemv_kquant.h); x12 from
// kX12RebuildTokens token rows rebuilds each tile in the packed layout and runs the
// packed kernel on it. Elsewhere (the widening and Highway int8 loops, AVX-VNNI,
// targets without AVX-512) a tile runs the single-row kernels once per token row
// (gemv_rows.h), bit-identical by construction.
namespace dk::kernels {
namespace {

using internal::Bf16X;
using internal::Q8Activations;
using internal::QuantX;

// m token rows, each prepared exactly as the single-row kernels prepare x.
struct GemmX {
  WeightFormat format{};
  size_t cols = 0;
  size_t m = 0;
  const Bf16X* bf16x = nullptr;    // [m], bf16 formats
  const bf16* const* padded = nullptr;  // [m], their zero-padded x where the vdpbf16ps loops run
  const QuantX* quant = nullptr;   // [m], block formats
  const Q8Activations* acts = nullptr;  // [m], their int8 activations
  KernelScratch* scratch = nullptr;     // the call's: where the above live, and each thread's buffers
};

size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// The threads a call's scratch covers: the pool's (the caller alone without one).
int Threads(const ThreadPool* pool) { return pool != nullptr ? pool->num_threads() : 1; }

// Units of work are 8-row panels: a multiple of the packed layouts' panel and of the
// quantized kernels' row groups (4).
constexpr size_t kUnitRows = kPanelRows;
// Weights of one tile: well inside a core's L2, with room for the token rows.
constexpr size_t kTileBytes = 512 * 1024;
// SiLU*mul's units: as gemv_fused.cc, a multiple of every SIMD width SiluMul uses, so
// each unit splits vector / scalar tail as the whole-length call does.
constexpr size_t kSiluUnitRows = 64;

// Bytes of one token row's prepared data, each part 64-byte aligned.
size_t PreparedBytes(WeightFormat format, size_t cols, const GemvVariants& v) {
  if (!formats::IsBlockFormat(format)) {  // padded bf16 x, or its even / odd f32 halves
    return GemvUsesBf16Dot(v) ? RoundUp(cols * sizeof(bf16), 64) : 2 * RoundUp(RoundUp(cols, kChunkCols) * 2, 64);
  }
  const size_t blocks = cols / 32;
  return RoundUp(cols, 64) * 3 + 4 * RoundUp(blocks * 4, 64) + RoundUp(cols / 16 * 4, 64);
}

// Copies `n` bytes to *arena and advances it (64-byte steps); nullptr stays nullptr.
template <typename T>
const T* Keep(const T* src, size_t n, uint8_t** arena) {
  if (src == nullptr) return nullptr;
  std::memcpy(*arena, src, n * sizeof(T));
  const T* kept = reinterpret_cast<const T*>(*arena);
  *arena += RoundUp(n * sizeof(T), 64);
  return kept;
}

// Each token row prepared by the single-row preparation (PrepareBf16X / PrepareQuantX,
// which leave it in the GEMV's slots of the calling thread), then copied to a place
// of its own in that thread's kGemmPrepared; their descriptions in kGemmRowsX,
// kGemmActs and kGemmPadded.
GemmX PrepareRows(WeightFormat format, const bf16* x, size_t x_stride, size_t m, size_t cols,
                  const GemvVariants& v, KernelScratch& scratch) {
  const int thread = CallerThread();
  const size_t row_bytes = PreparedBytes(format, cols, v);
  uint8_t* arena = scratch.Get<uint8_t>(thread, kGemmPrepared, m * row_bytes);
  GemmX g;
  g.format = format;
  g.cols = cols;
  g.m = m;
  g.scratch = &scratch;
  const bool block = formats::IsBlockFormat(format);
  if (block) DK_CHECK(cols % formats::BlockElems(format) == 0);
  QuantX* qx = nullptr;
  Q8Activations* acts = nullptr;
  Bf16X* bx = nullptr;
  const bf16** padded = nullptr;
  if (block) {
    qx = scratch.Get<QuantX>(thread, kGemmRowsX, m);
    acts = scratch.Get<Q8Activations>(thread, kGemmActs, m);
  } else {
    bx = scratch.Get<Bf16X>(thread, kGemmRowsX, m);
    padded = scratch.Get<const bf16*>(thread, kGemmPadded, m);
  }
  for (size_t i = 0; i < m; ++i) {
    uint8_t* slot = arena + i * row_bytes;
    if (!block) {
      Bf16X p = internal::PrepareBf16X(x + i * x_stride, cols, v, scratch, thread);
      const size_t padded_cols = RoundUp(cols, kChunkCols);
      p.padded = Keep(p.padded, padded_cols, &slot);
      p.xe = Keep(p.xe, padded_cols / 2, &slot);
      p.xo = Keep(p.xo, padded_cols / 2, &slot);
      new (&bx[i]) Bf16X(p);
      padded[i] = p.padded;
      continue;
    }
    QuantX p = internal::PrepareQuantX(format, x + i * x_stride, cols, v, scratch, thread);
    const Q8Activations& a = *static_cast<const Q8Activations*>(p.act);
    const size_t blocks = cols / 32;
    new (&acts[i]) Q8Activations{Keep(a.q, cols, &slot),  Keep(a.d, blocks, &slot),
                                 Keep(a.sum, blocks, &slot), Keep(a.sx, blocks, &slot),
                                 Keep(a.quad, blocks / 16 * 16 * 32, &slot), Keep(a.sum16, cols / 16, &slot)};
    if (format == WeightFormat::kQ8_0 && p.avx512_vnni) {  // Q8RowsVnniTokens' unsigned x + 128
      uint8_t* biased = slot;
      for (size_t k = 0; k < cols; ++k) biased[k] = static_cast<uint8_t>(acts[i].q[k] + 128);
      acts[i].biased = biased;
    }
    p.act = &acts[i];
    new (&qx[i]) QuantX(p);
  }
  g.bf16x = bx;
  g.padded = !block && bx[0].dot ? padded : nullptr;
  g.quant = qx;
  g.acts = acts;
  return g;
}

// Token rows per block: a block's x (at most kTokenBlockBytes of bf16, at most 64
// rows) stays in L2 beside a weight tile.
constexpr size_t kTokenBlockBytes = 256 * 1024;
size_t TokenBlock(size_t cols) { return std::clamp<size_t>(kTokenBlockBytes / (cols * sizeof(bf16) + 1), 3, 64); }

// The register-blocked kernel for x's format on x's path, if it has one.
enum class TokenKernel { kNone, kPacked, kRowMajor, kX12, kQ8, kQ4, kKQuant };
TokenKernel TokenKernelOf(const GemmX& x) {
  const bool vnni = x.quant != nullptr && x.quant[0].avx512_vnni;
  if (x.format == WeightFormat::kBf16Packed && x.padded) return TokenKernel::kPacked;
  if (x.format == WeightFormat::kBf16RowMajor && x.padded) return TokenKernel::kRowMajor;
  if (x.format == WeightFormat::kBf16X12 && x.padded) return TokenKernel::kX12;
  if (x.format == WeightFormat::kQ8_0 && vnni) return TokenKernel::kQ8;
  if ((x.format == WeightFormat::kQ4_0 || x.format == WeightFormat::kQ4_1) && vnni) return TokenKernel::kQ4;
  if (internal::IsKQuantKernelFormat(x.format) && vnni) return TokenKernel::kKQuant;
  return TokenKernel::kNone;
}

// Rows [s, e) of W (s % kUnitRows == 0, e likewise or == rows) for token rows [t0,
// t1): out[(t - t0) * out_stride + r - s]. The register-blocked kernels where this
// format and path have one; otherwise the single-row kernels once per token row. On
// pool thread `thread` (its buffers of x.scratch).
void TileRows(const GemmX& x, const void* w, size_t rows, size_t s, size_t e, size_t t0, size_t t1, float* out,
              size_t out_stride, int thread) {
  const size_t cols = x.cols, n = e - s;
  const size_t chunks = RoundUp(cols, kChunkCols) / kChunkCols;
  const size_t row_bytes = formats::IsBlockFormat(x.format) ? formats::RowBytes(x.format, cols) : 0;
  const uint8_t* blocks = static_cast<const uint8_t*>(w) + s * row_bytes;  // block formats: from row s
  // One token row (the tail of a token block, or m = 1): the single-row kernels
  // themselves, as fast as the GEMV by construction.
  const TokenKernel kernel = t1 - t0 == 1 && formats::IsBlockFormat(x.format) ? TokenKernel::kNone : TokenKernelOf(x);
  switch (kernel) {
    case TokenKernel::kPacked:
      return internal::PackedPanelsDpBf16Tokens(static_cast<const bf16*>(w), rows, chunks, s / kPanelRows,
                                                (e + kPanelRows - 1) / kPanelRows, x.padded + t0, t1 - t0, out,
                                                out_stride, *x.scratch, thread);
    case TokenKernel::kRowMajor:
      return internal::RowMajorRowsDpBf16Tokens(static_cast<const bf16*>(w) + s * cols, cols, n, x.padded + t0,
                                                t1 - t0, out, out_stride);
    case TokenKernel::kX12:
      return internal::Bf16X12RowsTokens(static_cast<const uint8_t*>(w), rows, cols, s, e, x.padded + t0, t1 - t0,
                                         out, out_stride, *x.scratch, thread);
    case TokenKernel::kQ8:
      return internal::Q8RowsVnniTokens(blocks, cols, n, x.acts + t0, t1 - t0, out, out_stride);
    case TokenKernel::kQ4:
      return internal::Q4RowsVnniTokens(x.format, blocks, cols, n, x.acts + t0, t1 - t0, out, out_stride);
    case TokenKernel::kKQuant:
      return internal::KQuantRowsVnniTokens(x.format, blocks, cols, n, x.acts + t0, t1 - t0, out, out_stride);
    case TokenKernel::kNone:
      break;
  }
  float* abs = x.format == WeightFormat::kBf16X12 ? x.scratch->Get<float>(thread, kGemmX12Rows, rows) : nullptr;
  for (size_t i = t0; i < t1; ++i) {
    float* o = out + (i - t0) * out_stride;
    switch (x.format) {
      case WeightFormat::kBf16RowMajor:
        internal::Bf16RowMajorRows(static_cast<const bf16*>(w) + s * cols, x.bf16x[i], 0, n, o);
        break;
      case WeightFormat::kBf16Packed:
        internal::Bf16PackedRows(static_cast<const bf16*>(w) + s / kPanelRows * chunks * kPanelRows * kChunkCols, n,
                                 x.bf16x[i], 0, n, o);
        break;
      case WeightFormat::kBf16X12:  // tables sit after all blocks: rows indexed absolutely
        internal::Bf16X12Rows(static_cast<const uint8_t*>(w), rows, x.bf16x[i], s, e, abs, *x.scratch, thread);
        std::memcpy(o, abs + s, n * sizeof(float));
        break;
      default:
        internal::QuantRows(blocks, x.quant[i], 0, n, o);
        break;
    }
  }
}

// Token rows from which Rows rebuilds each x12 tile in the packed layout once and runs
// the packed kernel on it (bit-identical: X12Gemv is PackedGemv bit for bit). The x12
// tiles decode every weight again for each 3 token rows, and their decode registers
// leave the 4 x 3 tile's 24 accumulators too few to spare; but rebuilding first reads
// the tile's x12 stream without arithmetic to overlap it, which at fewer token rows
// cost more than it saved (gemm_bench, m = 16 and 32).
constexpr size_t kX12RebuildTokens = 32;

// Rows' tile [s, e) of x12 W (every token block of `block` rows) rebuilt in the
// packed layout in thread `thread`'s kGemmX12Tile (a plain matrix is that layout
// already), then run as rows [0, e - s) of a packed matrix of rows - s.
void RebuiltX12Tile(const GemmX& x, const FusedWeight& w, size_t s, size_t e, size_t block, float* out,
                    size_t out_stride, int thread) {
  GemmX packed = x;
  packed.format = WeightFormat::kBf16Packed;
  const size_t p0 = s / kPanelRows, p1 = (e + kPanelRows - 1) / kPanelRows;
  bf16* scratch = x.scratch->Get<bf16>(thread, kGemmX12Tile, (p1 - p0) * kPanelRows * RoundUp(x.cols, kChunkCols));
  const bf16* tile = internal::X12PanelsAsPacked(static_cast<const uint8_t*>(w.data), w.rows, x.cols, p0, p1, scratch,
                                                  x.bf16x[0]);
  for (size_t t0 = 0; t0 < x.m; t0 += block) {
    TileRows(packed, tile, w.rows - s, 0, e - s, t0, std::min(x.m, t0 + block), out + t0 * out_stride, out_stride,
             thread);
  }
}

// out[i * out_stride + r - r0] = (W X[i])[r] for r in [r0, r1) (r0 % kUnitRows == 0,
// r1 likewise or == rows), tile by tile, each tile for every block of token rows, on
// pool thread `thread`.
void Rows(const GemmX& x, const FusedWeight& w, size_t r0, size_t r1, float* out, size_t out_stride, int thread) {
  const size_t row_bytes = formats::IsBlockFormat(x.format) ? formats::RowBytes(x.format, x.cols)
                                                            : RoundUp(x.cols, kChunkCols) * sizeof(bf16);
  const size_t tile = std::max(kUnitRows, kTileBytes / row_bytes / kUnitRows * kUnitRows);
  const size_t block = TokenBlock(x.cols);
  const bool rebuild = x.m >= kX12RebuildTokens && TokenKernelOf(x) == TokenKernel::kX12;
  for (size_t s = r0; s < r1; s += tile) {
    const size_t e = std::min(r1, s + tile);
    if (rebuild) {
      RebuiltX12Tile(x, w, s, e, block, out + (s - r0), out_stride, thread);
      continue;
    }
    for (size_t t0 = 0; t0 < x.m; t0 += block) {
      TileRows(x, w.data, w.rows, s, e, t0, std::min(x.m, t0 + block), out + t0 * out_stride + (s - r0),
               out_stride, thread);
    }
  }
}

// The units of all weights j < n (unit_rows rows each) spread over the pool as one
// job; body(j, r0, r1, thread) per weight for the rows of each range's units of it
// on pool thread `thread` (as ForUnits in gemv_fused.cc).
template <typename F>
void ForUnits(const FusedWeight* w, int n, size_t unit_rows, ThreadPool* pool, const F& body) {
  size_t first[kMaxFusedWeights + 1] = {0};
  for (int j = 0; j < n; ++j) first[j + 1] = first[j] + (w[j].rows + unit_rows - 1) / unit_rows;
  if (first[n] == 0) return;
  ParallelRanges(pool, first[n], [&](size_t u0, size_t u1, int thread) {
    int j = 0;
    for (size_t u = u0; u < u1;) {
      while (u >= first[j + 1]) ++j;
      const size_t end = std::min(u1, first[j + 1]);
      body(j, (u - first[j]) * unit_rows, std::min(w[j].rows, (end - first[j]) * unit_rows), thread);
      u = end;
    }
  });
}

// Rows [r0, r1) of W for every token row, in blocks of at most `block` rows: f32
// results in pool thread `thread`'s kGemmBlockAcc, handed to emit(i, c0, c1, acc)
// (acc[r - c0]).
template <typename Emit>
void RowsInBlocks(const GemmX& x, const FusedWeight& w, size_t r0, size_t r1, size_t block, int thread,
                  const Emit& emit) {
  float* acc = x.scratch->Get<float>(thread, kGemmBlockAcc, x.m * block);
  for (size_t c0 = r0; c0 < r1; c0 += block) {
    const size_t c1 = std::min(r1, c0 + block);
    Rows(x, w, c0, c1, acc, block, thread);
    for (size_t i = 0; i < x.m; ++i) emit(i, c0, c1, acc + i * block);
  }
}

// Rows of one output block per call of RowsInBlocks for bf16 results.
constexpr size_t kBlockRows = 256;

void StoreBf16(const float* acc, size_t n, bf16* y) {
  for (size_t r = 0; r < n; ++r) y[r] = F32ToBf16(acc[r]);
}

template <typename YT>
void GemmAny(WeightFormat format, const void* w, size_t rows, size_t cols, const bf16* x, size_t x_stride,
             size_t m, YT* y, size_t y_stride, ThreadPool* pool, const GemvVariants& v, KernelScratch* scratch) {
  if (rows == 0 || m == 0) return;
  DK_CHECK(m == 1 || (x_stride >= cols && y_stride >= rows));
  const CallScratch s(scratch, Threads(pool));
  const GemmX px = PrepareRows(format, x, x_stride, m, cols, v, *s);
  const FusedWeight fw{w, rows};
  ForUnits(&fw, 1, kUnitRows, pool, [&](int, size_t r0, size_t r1, int thread) {
    if constexpr (std::is_same_v<YT, float>) {
      Rows(px, fw, r0, r1, y + r0, y_stride, thread);
    } else {
      RowsInBlocks(px, fw, r0, r1, kBlockRows, thread, [&](size_t i, size_t c0, size_t c1, const float* acc) {
        StoreBf16(acc, c1 - c0, y + i * y_stride + c0);
      });
    }
  });
}

// Each token row RmsNorm'd into the calling thread's kGemmNormedX, as the fused
// single-row kernels do.
GemmX NormAndPrepare(WeightFormat format, const bf16* x, size_t x_stride, size_t m, const bf16* norm, float eps,
                     size_t cols, const GemvVariants& v, KernelScratch& scratch) {
  bf16* xn = scratch.Get<bf16>(CallerThread(), kGemmNormedX, m * cols);
  for (size_t i = 0; i < m; ++i) RmsNorm(x + i * x_stride, norm, cols, eps, xn + i * cols);
  return PrepareRows(format, xn, cols, m, cols, v, scratch);
}

}  // namespace

bool internal::GemmRegisterBlocked(WeightFormat format, const GemvVariants& variants) {
  const size_t cols = 256;  // a whole super-block
  const std::vector<bf16> x(cols, F32ToBf16(1.0f));
  const CallScratch scratch(nullptr, 1);
  return TokenKernelOf(PrepareRows(format, x.data(), cols, 1, cols, variants, *scratch)) != TokenKernel::kNone;
}

void Gemm(WeightFormat format, const void* w, size_t rows, size_t cols, const bf16* x, size_t x_stride,
          size_t m, float* y, size_t y_stride, ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  GemmAny(format, w, rows, cols, x, x_stride, m, y, y_stride, pool, variants, scratch);
}
void Gemm(WeightFormat format, const void* w, size_t rows, size_t cols, const bf16* x, size_t x_stride,
          size_t m, bf16* y, size_t y_stride, ThreadPool* pool, const GemvVariants& variants,
          KernelScratch* scratch) {
  GemmAny(format, w, rows, cols, x, x_stride, m, y, y_stride, pool, variants, scratch);
}

void RmsNormGemm(WeightFormat format, const bf16* x, size_t x_stride, size_t m, const bf16* norm, float eps,
                 size_t cols, const FusedWeight* w, int n, void* const* y, const size_t* y_stride, bool y_f32,
                 ThreadPool* pool, const GemvVariants& variants, KernelScratch* scratch) {
  DK_CHECK(n >= 1 && n <= kMaxFusedWeights);
  if (m == 0) return;
  DK_CHECK(m == 1 || x_stride >= cols);
  for (int j = 0; j < n; ++j) DK_CHECK(m == 1 || y_stride[j] >= w[j].rows);
  const CallScratch s(scratch, Threads(pool));
  const GemmX px = NormAndPrepare(format, x, x_stride, m, norm, eps, cols, variants, *s);
  ForUnits(w, n, kUnitRows, pool, [&](int j, size_t r0, size_t r1, int thread) {
    if (y_f32) return Rows(px, w[j], r0, r1, static_cast<float*>(y[j]) + r0, y_stride[j], thread);
    RowsInBlocks(px, w[j], r0, r1, kBlockRows, thread, [&](size_t i, size_t c0, size_t c1, const float* acc) {
      StoreBf16(acc, c1 - c0, static_cast<bf16*>(y[j]) + i * y_stride[j] + c0);
    });
  });
}

void RmsNormGemmSiluMul(WeightFormat format, const bf16* x, size_t x_stride, size_t m, const bf16* norm,
                        float eps, size_t cols, FusedWeight gate, FusedWeight up, bf16* y, size_t y_stride,
                        ThreadPool* pool, const GemvVariants& variants, KernelScratch* scratch) {
  DK_CHECK(gate.rows == up.rows);
  if (m == 0) return;
  DK_CHECK(m == 1 || (x_stride >= cols && y_stride >= gate.rows));
  const CallScratch s(scratch, Threads(pool));
  const GemmX px = NormAndPrepare(format, x, x_stride, m, norm, eps, cols, variants, *s);
  ForUnits(&gate, 1, kSiluUnitRows, pool, [&](int, size_t r0, size_t r1, int thread) {
    float* g = s->Get<float>(thread, kGemmGate, m * kSiluUnitRows);
    float* u = s->Get<float>(thread, kGemmUp, m * kSiluUnitRows);
    for (size_t c0 = r0; c0 < r1; c0 += kSiluUnitRows) {  // SiluMul per unit, as the single-row call splits
      const size_t c1 = std::min(r1, c0 + kSiluUnitRows);
      Rows(px, gate, c0, c1, g, kSiluUnitRows, thread);
      Rows(px, up, c0, c1, u, kSiluUnitRows, thread);
      bf16 gb[kSiluUnitRows], ub[kSiluUnitRows];
      for (size_t i = 0; i < m; ++i) {
        StoreBf16(g + i * kSiluUnitRows, c1 - c0, gb);
        StoreBf16(u + i * kSiluUnitRows, c1 - c0, ub);
        SiluMul(gb, ub, c1 - c0, y + i * y_stride + c0);
      }
    }
  });
}

void GemmAdd(WeightFormat format, const bf16* x, size_t x_stride, size_t m, size_t cols, FusedWeight w,
             const bf16* residual, size_t residual_stride, bf16* y, size_t y_stride, ThreadPool* pool,
             const GemvVariants& variants, KernelScratch* scratch) {
  if (m == 0) return;
  DK_CHECK(m == 1 || (x_stride >= cols && residual_stride >= w.rows && y_stride >= w.rows));
  const CallScratch s(scratch, Threads(pool));
  const GemmX px = PrepareRows(format, x, x_stride, m, cols, variants, *s);
  ForUnits(&w, 1, kUnitRows, pool, [&](int, size_t r0, size_t r1, int thread) {
    // Add rounds each element alone, so its pieces need not be GemvAdd's.
    RowsInBlocks(px, w, r0, r1, kBlockRows, thread, [&](size_t i, size_t c0, size_t c1, const float* acc) {
      bf16 o[kBlockRows];
      StoreBf16(acc, c1 - c0, o);
      Add(residual + i * residual_stride + c0, o, c1 - c0, y + i * y_stride + c0);
    });
  });
}

}  // namespace dk::kernels
