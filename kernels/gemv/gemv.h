// GEMV for decode (M = 1): y[n] = sum_k W[n, k] * x[k], W bf16, f32 accumulation.
//
// Two weight layouts:
//  * row-major W [rows, cols] exactly as a checkpoint stores it (Gemv);
//  * the packed panel layout (PackedGemv), produced once by PackGemvWeights. It is
//    what the layout-alignment optimization switches launches to.
//
// Packed panel layout (version 1). Rows are grouped into panels of kPanelRows rows,
// columns into chunks of kChunkCols. For panel p, chunk c and row r of the panel,
// the kChunkCols weights W[p*kPanelRows + r, c*kChunkCols .. +kChunkCols) are
// stored contiguously at element offset ((p * chunks + c) * kPanelRows + r) *
// kChunkCols. Rows are zero-padded to a multiple of kPanelRows and columns to a
// multiple of kChunkCols. A chunk is one 64-byte cache line, so one thread reads
// its panels as a single sequential stream and one x chunk serves 8 rows.
//
// All entry points are parallel over rows on `pool` (nullptr: the caller alone),
// dispatch to the best Highway target at run time and accept any pointer alignment.
// Their per-thread scratch (x prepared, O(cols)) comes from `scratch`, the caller's
// (scratch.h): given one, a call allocates nothing once it has grown; null, the call
// allocates its own. Thread-safety: concurrent calls from different threads are safe
// if they use different pools and different scratch (each is single-owner).
#ifndef DK_KERNELS_GEMV_GEMV_H_
#define DK_KERNELS_GEMV_GEMV_H_

#include <cstddef>

#include "formats/weight_format.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_variants.h"
#include "util/aligned_buffer.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {

// Row-major W [rows, cols]. `variants` picks the inner loop (gemv_variants.h; the
// outputs are the same bits for every value).
void Gemv(const bf16* w, size_t rows, size_t cols, const float* x, float* y,
          ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);
void Gemv(const bf16* w, size_t rows, size_t cols, const bf16* x, float* y,
          ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);
void Gemv(const bf16* w, size_t rows, size_t cols, const float* x, bf16* y,
          ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);
void Gemv(const bf16* w, size_t rows, size_t cols, const bf16* x, bf16* y,
          ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);

inline constexpr size_t kPanelRows = formats::kPanelRows;
inline constexpr size_t kChunkCols = formats::kChunkCols;

// Number of bf16 elements the packed layout of a [rows, cols] matrix occupies.
size_t PackedGemvElements(size_t rows, size_t cols);

// Packs row-major W [rows, cols] (any alignment) into `out`, which must hold
// PackedGemvElements(rows, cols) elements.
void PackGemvWeights(const bf16* w, size_t rows, size_t cols, bf16* out);

// Row `row` (< rows) of a matrix packed by PackGemvWeights, back in row-major order:
// the `cols` elements into `out` (the inverse of the packing for one row).
void UnpackGemvRow(const bf16* packed, size_t rows, size_t cols, size_t row, bf16* out);

// A packed matrix that owns its storage (64-byte aligned, optionally huge pages).
struct PackedGemvWeights {
  size_t rows = 0;
  size_t cols = 0;
  AlignedBuffer<bf16> data;  // [rows_padded / 8][cols_padded / 32][8][32]
};
PackedGemvWeights PackGemvWeights(const bf16* w, size_t rows, size_t cols,
                                  PageMode mode = PageMode::kDefault);

// y = W x with W in the packed layout (`packed` as written by PackGemvWeights for
// the same rows, cols).
void PackedGemv(const bf16* packed, size_t rows, size_t cols, const float* x,
                float* y, ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);
void PackedGemv(const bf16* packed, size_t rows, size_t cols, const bf16* x,
                float* y, ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);
void PackedGemv(const bf16* packed, size_t rows, size_t cols, const float* x,
                bf16* y, ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);
void PackedGemv(const bf16* packed, size_t rows, size_t cols, const bf16* x,
                bf16* y, ThreadPool* pool, const GemvVariants& variants = GemvVariants(),
          KernelScratch* scratch = nullptr);

// Name of the Highway target the dispatcher picks on this machine (e.g. "AVX3"),
// with "+BF16DOT" when bf16-x GEMVs under `variants` use vdpbf16ps (AVX512_BF16 CPUs).
const char* GemvTargetName(const GemvVariants& variants = GemvVariants());

// Whether GEMVs with bf16 x under `variants` use vdpbf16ps: variants.bf16_dot on a
// CPU with AVX512_BF16 and an AVX-512 target.
bool GemvUsesBf16Dot(const GemvVariants& variants = GemvVariants());

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMV_H_
