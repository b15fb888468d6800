#include "kernels/gemv/gemv_fused.h"

#include <algorithm>
#include <cstdint>

#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_rows.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/norm/rmsnorm.h"
#include "util/aligned_buffer.h"
#include "util/check.h"

namespace dk::kernels {
namespace {

// Rows per unit of work: a multiple of the packed panel (8 rows) and of the
// quantized kernels' row groups (4). Units are what the pool's tasks split, so they
// are small: 64-row units left 9 units for a 576-row GEMV, 5 on one thread and 4 on
// the other (SmolLM2's O and down projections ran 3% slower than unfused).
constexpr size_t kUnitRows = 8;
// SiLU*mul's units are also a multiple of every SIMD width SiluMul uses, so each
// unit splits vector / scalar tail (whose exp differ in the last bit) as the
// whole-length call does. The residual add rounds the same in both paths.
constexpr size_t kSiluUnitRows = 64;

// x prepared once for every weight of the call.
struct PreparedX {
  WeightFormat format;
  internal::Bf16X bf16;
  internal::QuantX quant;
};

PreparedX Prepare(WeightFormat format, const bf16* x, size_t cols, const GemvVariants& v, KernelScratch& scratch,
                  int thread) {
  PreparedX p{format, {}, {}};
  if (formats::IsBlockFormat(format)) {
    DK_CHECK(cols % formats::BlockElems(format) == 0);
    p.quant = internal::PrepareQuantX(format, x, cols, v, scratch, thread);
  } else {
    p.bf16 = internal::PrepareBf16X(x, cols, v, scratch, thread);
  }
  return p;
}

// acc[r] = (W x)[r] for r in [r0, r1), on pool thread `thread` (its buffers of `scratch`).
void Rows(const PreparedX& x, const FusedWeight& w, size_t r0, size_t r1, float* acc, KernelScratch& scratch,
          int thread) {
  switch (x.format) {
    case WeightFormat::kBf16RowMajor:
      return internal::Bf16RowMajorRows(static_cast<const bf16*>(w.data), x.bf16, r0, r1, acc);
    case WeightFormat::kBf16Packed:
      return internal::Bf16PackedRows(static_cast<const bf16*>(w.data), w.rows, x.bf16, r0, r1, acc);
    case WeightFormat::kBf16X12:
      return internal::Bf16X12Rows(static_cast<const uint8_t*>(w.data), w.rows, x.bf16, r0, r1, acc, scratch, thread);
    default:
      return internal::QuantRows(static_cast<const uint8_t*>(w.data), x.quant, r0, r1, acc);
  }
}

// The f32 rows of weight i of a call, in the calling thread's scratch (one slot per
// weight, so that a call's buffers stay apart).
static_assert(kFusedAcc0 + kMaxFusedWeights == kFusedNormedX, "a scratch slot per fused weight");
float* Acc(KernelScratch& scratch, int thread, int i, size_t rows) {
  return scratch.Get<float>(thread, kFusedAcc0 + i, rows);
}

// The scratch of one fused call and the thread it runs on (CallerThread()).
struct FusedScratch {
  FusedScratch(KernelScratch* given, ThreadPool* pool)
      : scratch(given, pool != nullptr ? pool->num_threads() : 1), thread(CallerThread()) {}
  CallScratch scratch;
  int thread;
};

// The units of all weights i < n (unit_rows rows each, the last of a weight shorter)
// spread over the pool as one job (ParallelRanges: one stream per thread); each
// range calls body(i, r0, r1, thread) once per weight for the rows [r0, r1) of its units of
// that weight (r0 a multiple of unit_rows), so the per-call work of the rows kernels
// is paid once per range, not per unit.
template <typename F>
void ForUnits(const FusedWeight* w, int n, size_t unit_rows, ThreadPool* pool, const F& body) {
  size_t first[kMaxFusedWeights + 1] = {0};
  for (int i = 0; i < n; ++i) first[i + 1] = first[i] + (w[i].rows + unit_rows - 1) / unit_rows;
  const size_t units = first[n];
  if (units == 0) return;
  ParallelRanges(pool, units, [&](size_t u0, size_t u1, int thread) {
    int i = 0;
    for (size_t u = u0; u < u1;) {
      while (u >= first[i + 1]) ++i;
      const size_t end = std::min(u1, first[i + 1]);
      body(i, (u - first[i]) * unit_rows, std::min(w[i].rows, (end - first[i]) * unit_rows), thread);
      u = end;
    }
  });
}

const bf16* NormScratch(const bf16* x, const bf16* norm, float eps, size_t cols, KernelScratch& scratch,
                        int thread) {
  bf16* xn = scratch.Get<bf16>(thread, kFusedNormedX, cols);
  RmsNorm(x, norm, cols, eps, xn);
  return xn;
}

}  // namespace

void RmsNormGemv(WeightFormat format, const bf16* x, const bf16* norm, float eps, size_t cols,
                 const FusedWeight* w, int n, void* const* y, bool y_f32, ThreadPool* pool,
                 const GemvVariants& variants, KernelScratch* scratch) {
  DK_CHECK(n >= 1 && n <= kMaxFusedWeights);
  const FusedScratch fs(scratch, pool);
  KernelScratch& s = *fs.scratch;
  const PreparedX px = Prepare(format, NormScratch(x, norm, eps, cols, s, fs.thread), cols, variants, s, fs.thread);
  float* acc[kMaxFusedWeights];
  for (int i = 0; i < n; ++i) acc[i] = y_f32 ? static_cast<float*>(y[i]) : Acc(s, fs.thread, i, w[i].rows);
  ForUnits(w, n, kUnitRows, pool, [&](int i, size_t r0, size_t r1, int thread) {
    Rows(px, w[i], r0, r1, acc[i], s, thread);
    if (y_f32) return;
    bf16* out = static_cast<bf16*>(y[i]);
    for (size_t r = r0; r < r1; ++r) out[r] = F32ToBf16(acc[i][r]);
  });
}

void RmsNormGemvSiluMul(WeightFormat format, const bf16* x, const bf16* norm, float eps, size_t cols,
                        FusedWeight gate, FusedWeight up, bf16* y, ThreadPool* pool,
                        const GemvVariants& variants, KernelScratch* scratch) {
  DK_CHECK(gate.rows == up.rows);
  const FusedScratch fs(scratch, pool);
  KernelScratch& s = *fs.scratch;
  const PreparedX px = Prepare(format, NormScratch(x, norm, eps, cols, s, fs.thread), cols, variants, s, fs.thread);
  float* g = Acc(s, fs.thread, 0, gate.rows);
  float* u = Acc(s, fs.thread, 1, up.rows);
  ForUnits(&gate, 1, kSiluUnitRows, pool, [&](int, size_t r0, size_t r1, int thread) {
    Rows(px, gate, r0, r1, g, s, thread);
    Rows(px, up, r0, r1, u, s, thread);
    bf16 gb[kSiluUnitRows], ub[kSiluUnitRows];
    for (size_t c0 = r0; c0 < r1; c0 += kSiluUnitRows) {  // SiluMul per unit, as the whole-length call splits
      const size_t c1 = std::min(r1, c0 + kSiluUnitRows);
      for (size_t r = c0; r < c1; ++r) {
        gb[r - c0] = F32ToBf16(g[r]);
        ub[r - c0] = F32ToBf16(u[r]);
      }
      SiluMul(gb, ub, c1 - c0, y + c0);
    }
  });
}

void GemvAdd(WeightFormat format, const bf16* x, size_t cols, FusedWeight w, const bf16* residual,
             bf16* y, ThreadPool* pool, const GemvVariants& variants, KernelScratch* scratch) {
  const FusedScratch fs(scratch, pool);
  KernelScratch& s = *fs.scratch;
  const PreparedX px = Prepare(format, x, cols, variants, s, fs.thread);
  float* acc = Acc(s, fs.thread, 0, w.rows);
  ForUnits(&w, 1, kUnitRows, pool, [&](int, size_t r0, size_t r1, int thread) {
    Rows(px, w, r0, r1, acc, s, thread);
    bf16 o[kUnitRows];
    for (size_t c0 = r0; c0 < r1; c0 += kUnitRows) {
      const size_t c1 = std::min(r1, c0 + kUnitRows);
      for (size_t r = c0; r < c1; ++r) o[r - c0] = F32ToBf16(acc[r]);
      Add(residual + c0, o, c1 - c0, y + c0);
    }
  });
}

}  // namespace dk::kernels
