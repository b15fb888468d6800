// K-split GEMV: y[n] = sum_k W[n, k] x[k] with K reduced in chunks of `k_chunk`
// columns. Each chunk's dot product is summed in f32 on its own, and the chunk
// partials are added in chunk order in f32, rounded once to y's type. This is the
// arithmetic of an NPU GEMV whose tiles each reduce one K chunk and pass their
// partial sum on (the reference deployment's matvec_2tile_add, K in chunks of 512,
// which lets its K=8192 down projection into one device run), so a program planned
// for npu2 computes on the CPU device what it would compute there, up to the f32
// summation order inside a chunk (SIMD lanes here).
//
// W is bf16 [rows, cols], row-major or in the packed panel layout of gemv.h. cols
// must be a multiple of k_chunk, and k_chunk a multiple of kChunkCols (32). Parallel
// over rows on `pool` (nullptr: the caller alone); any pointer alignment.
// Thread-safety: as gemv.h (per-thread scratch; one pool per caller thread).
#ifndef DK_KERNELS_GEMV_GEMV_KSPLIT_H_
#define DK_KERNELS_GEMV_GEMV_KSPLIT_H_

#include <cstddef>

#include "util/bf16.h"
#include "kernels/common/scratch.h"
#include "util/thread_pool.h"

namespace dk::kernels {

// Whether KSplitGemv takes a [*, cols] matrix in chunks of k_chunk.
bool KSplitGemvShapeOk(size_t cols, size_t k_chunk);

void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const float* x,
                float* y, ThreadPool* pool, KernelScratch* scratch = nullptr);
void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const bf16* x,
                float* y, ThreadPool* pool, KernelScratch* scratch = nullptr);
void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const float* x,
                bf16* y, ThreadPool* pool, KernelScratch* scratch = nullptr);
void KSplitGemv(const bf16* w, bool packed, size_t rows, size_t cols, size_t k_chunk, const bf16* x,
                bf16* y, ThreadPool* pool, KernelScratch* scratch = nullptr);

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMV_KSPLIT_H_
