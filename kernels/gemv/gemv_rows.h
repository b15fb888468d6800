// Internal: the GEMV kernels split into "prepare x once" and "rows [r0, r1) from
// any thread", for kernels that run several GEMVs sharing one x, or a GEMV with the
// elementwise step before or after it, in one parallel pass (gemv_fused.h).
// Rows computed here are bit-identical to the same rows of the whole-matrix entry
// points (Gemv, PackedGemv, QuantGemv with QuantActivations::kInt8) with bf16 x on
// the same SIMD target: they are the same inner loops, and no row's sum depends on
// which range it is computed in.
// Thread-safety: a prepared x lives in the buffers of `scratch` of the pool thread
// `thread` that prepared it (scratch.h; the caller's, CallerThread()), valid until
// that thread's next GEMV with that scratch; any thread may read it.
#ifndef DK_KERNELS_GEMV_GEMV_ROWS_H_
#define DK_KERNELS_GEMV_GEMV_ROWS_H_

#include <cstddef>
#include <cstdint>

#include "formats/weight_format.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_variants.h"
#include "util/bf16.h"

namespace dk::kernels {
using formats::WeightFormat;
}  // namespace dk::kernels

namespace dk::kernels::internal {

// bf16 x for bf16 weights (row-major or packed panels).
struct Bf16X {
  size_t cols = 0;
  bool dot = false;               // the vdpbf16ps loops (padded x) or the widening ones (xe, xo)
  const bf16* padded = nullptr;   // dot: x zero-padded to whole 32-column chunks
  const float* xe = nullptr;      // !dot: even and odd elements, zero-padded
  const float* xo = nullptr;
  bool prefetch = false;          // dot: the packed / x12 loops prefetch their weights
};
Bf16X PrepareBf16X(const bf16* x, size_t cols, const GemvVariants& variants, KernelScratch& scratch, int thread);

// y[r] for r in [r0, r1) (y indexed by row of W). Row-major: any range. Packed
// (`rows` = the matrix's rows): r0 % kPanelRows == 0 and r1 % kPanelRows == 0 or r1 == rows.
void Bf16RowMajorRows(const bf16* w, const Bf16X& x, size_t r0, size_t r1, float* y);
void Bf16PackedRows(const bf16* packed, size_t rows, const Bf16X& x, size_t r0, size_t r1, float* y);

// bf16 x quantized per 32-element block for `format` weights (the kInt8 strategy).
struct QuantX {
  WeightFormat format{};
  size_t cols = 0;
  int path = 0;           // the int8 inner loop this CPU and target take
  bool avx512_vnni = false;  // that loop is QuantRowsVnni (gemv_quant_vnni.h)
  const void* act = nullptr;  // internal::Q8Activations
};
QuantX PrepareQuantX(WeightFormat format, const bf16* x, size_t cols, const GemvVariants& variants,
                     KernelScratch& scratch, int thread);  // cols % 32 == 0
// y[r] for r in [r0, r1) of W in `format` blocks (r0 % 4 == 0).
void QuantRows(const uint8_t* w, const QuantX& x, size_t r0, size_t r1, float* y);

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMV_ROWS_H_
