// GEMV on bf16 weights stored losslessly in 12 bits each (the compress_weights
// optimization's layout, "packed_panel_x12_v1"). Decode GEMVs are bound by the
// weight stream; this layout streams 0.77x the bytes of the packed panel layout
// (gemv.h) and rebuilds every weight bit for bit in registers, so every output is
// bit-identical to PackedGemv on the same SIMD target.
//
// Why 12 bits hold a bf16 weight: a bf16 is sign (1 bit), exponent e (8), mantissa
// (7). In one block of 8 rows x 64 columns of a trained (or random) matrix the
// exponent takes few values: the upper 7 bits of e (v = e >> 1) rarely take more
// than 8 values, since a block's smallest weights are seldom 2^-15 of its largest.
// Each weight is stored as one byte (e & 1, mantissa) and a 4-bit code
// (sign, index of v in the block's 8-entry table); the block's 16-byte table maps
// a code to the weight's upper byte (sign, v). A block whose weights need more than
// 8 values of v is stored raw (plain bf16) in a spill area; a matrix with more such
// blocks than the spill area holds is stored whole in the packed panel layout (the
// "plain" mode). Either way nothing is rounded.
//
// Layout of a [rows, cols] matrix, X12GemvBytes(rows, cols) bytes. Panels of 8
// rows (kPanelRows) and chunks of 32 columns (kChunkCols) as in gemv.h; chunk pairs
// (2q, 2q + 1), q < Q = ceil(chunks / 2); block (p, q) is panel p, chunk pair q,
// b = p * Q + q; B blocks in all.
//  * [0, 768 B): block b's data at 768 * b: per row r of the panel, 96 bytes at
//    96 * r: 64 "low" bytes, then 32 code bytes. For lane L < 4 and j < 8, weight
//    32 * (2q) + 8L + j of row r sits at position t = 16L + j, weight
//    32 * (2q + 1) + 8L + j at t = 16L + 8 + j (the byte order of unpacklo / unpackhi
//    of 128-bit lanes); low byte t = (e & 1) << 7 | mantissa; the code of position
//    t < 32 is the low nibble of code byte t, of t >= 32 the high nibble of code
//    byte t - 32; code = sign << 3 | k.
//  * [768 B, +16 B): block b's table at 768 * B + 16 * b: byte k < 8 is v_k, byte
//    k + 8 is 0x80 | v_k, so table[code] is the weight's upper byte. A raw block
//    has byte 8 == 0 and its spill index (u32, little endian) in bytes 0..3.
//  * spill area from S = RoundUp(784 * B, 64): raw block i at S + 1024 * i, the
//    packed panel layout of its two chunks (chunk 2q's 8 rows of 32, then 2q + 1's).
//  * the last 64 bytes (at 1024 * B): header, "DKX12v1" NUL, u32 mode (0 blocks as
//    above, 1 plain: the packed panel layout of the whole matrix from offset 0),
//    u32 raw block count.
// Padding (rows to a multiple of 8, columns to 64) is zero.
//
// All GEMV entry points take bf16 x (the layout's fast path is a vdpbf16ps loop;
// without AVX512_BF16, or with GemvVariants::bf16_dot false, each panel is unpacked to the
// packed layout in per-thread scratch and run through PackedGemv's inner loop).
// Thread-safety: as Gemv (gemv.h).
#ifndef DK_KERNELS_GEMV_GEMV_X12_H_
#define DK_KERNELS_GEMV_GEMV_X12_H_

#include <cstddef>
#include <cstdint>

#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_variants.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {

// Bytes of the x12 layout of a [rows, cols] matrix (fixed by the shape: 1024 per
// block plus the 64-byte header; the packed layout's bytes at most, plus 576).
size_t X12GemvBytes(size_t rows, size_t cols);

struct X12PackStats {
  size_t blocks = 0;      // 8 x 64 blocks of the matrix
  size_t raw_blocks = 0;  // of them stored raw (bf16) in the spill area
  bool plain = false;     // the whole matrix in the packed panel layout
  // Bytes a GEMV streams: 768 per compact block, 1024 per raw block, plus tables.
  size_t streamed_bytes = 0;
};

// Packs row-major W [rows, cols] (any alignment) into `out` (X12GemvBytes bytes),
// its panels split over `pool` (nullptr: the caller alone); every byte of `out` is
// written, so equal weights give equal bytes. `out_zeroed`: `out` holds zeros
// already, so the spill area's unused slots (about a quarter of the bytes where
// every block compresses) are left as they are: fresh memory's pages there are
// never touched, never resident. The bytes are the same either way.
X12PackStats PackX12GemvWeights(const bf16* w, size_t rows, size_t cols, uint8_t* out, ThreadPool* pool = nullptr,
                                bool out_zeroed = false);

// The stats of a matrix packed by PackX12GemvWeights (from its header and tables).
X12PackStats X12GemvStats(const uint8_t* x12, size_t rows, size_t cols);

// Row `row` (< rows) of a packed matrix back in row-major order (`cols` elements).
void UnpackX12GemvRow(const uint8_t* x12, size_t rows, size_t cols, size_t row, bf16* out);

// y = W x with W packed by PackX12GemvWeights for the same rows, cols.
void X12Gemv(const uint8_t* x12, size_t rows, size_t cols, const bf16* x, float* y, ThreadPool* pool,
             const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);
void X12Gemv(const uint8_t* x12, size_t rows, size_t cols, const bf16* x, bf16* y, ThreadPool* pool,
             const GemvVariants& variants = GemvVariants(), KernelScratch* scratch = nullptr);

namespace internal {
struct Bf16X;  // gemv_rows.h

// y[r] for r in [r0, r1) (r0 % kPanelRows == 0; r1 % kPanelRows == 0 or r1 == rows),
// bit-identical to Bf16PackedRows on the packed layout of the same matrix. Without
// vdpbf16ps each panel is decoded into thread `thread`'s kX12Panel of `scratch`.
void Bf16X12Rows(const uint8_t* x12, size_t rows, const Bf16X& x, size_t r0, size_t r1, float* y,
                 KernelScratch& scratch, int thread);

// Bf16X12Rows's vdpbf16ps loop (AVX512_BF16 CPUs only) for m token rows x[t] at once,
// each x[t] zero-padded to whole 32-column chunks, each weight decoded once for
// several of them: out[t * out_stride + r - r0], bit-identical to Bf16X12Rows on x[t].
// Long panels spill accumulators to thread `thread`'s buffers of `scratch`.
void Bf16X12RowsTokens(const uint8_t* x12, size_t rows, size_t cols, size_t r0, size_t r1,
                       const bf16* const* x, size_t m, float* out, size_t out_stride, KernelScratch& scratch,
                       int thread);

// Panels [p0, p1) of the ceil(rows / 8) in the packed panel layout (gemv.h), bit for
// bit: a plain matrix's own, else rebuilt into `scratch` ((p1 - p0) *
// PackedGemvElements(8, cols) elements, any alignment), decoded by the loop x's
// variants chose (x: a token row prepared for this matrix; x.dot, x.prefetch). For many token rows over one
// tile of weights: rebuilding it once costs little next to m rows of vdpbf16ps, and
// the packed kernel's tiles then need no decode registers.
const bf16* X12PanelsAsPacked(const uint8_t* x12, size_t rows, size_t cols, size_t p0, size_t p1, bf16* scratch,
                              const Bf16X& x);
}  // namespace internal

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMV_X12_H_
