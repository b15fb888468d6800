// Scalar f64 reference for the quantized-weight GEMVs (tests only). Independent of
// the kernels: it reads the blocks through util/ggml_blocks.h one element at a
// time and quantizes activations with its own scalar code.
#ifndef DK_KERNELS_GEMV_GEMV_QUANT_REF_H_
#define DK_KERNELS_GEMV_GEMV_QUANT_REF_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gemv/gemv_quant.h"
#include "util/ggml_blocks.h"

namespace dk::kernels::ref {

// Element k of a row of blocks, as GGUF defines it (exact in f64): `w` is the
// weight; `mag` bounds the magnitude of what a kernel may sum for it before the
// offset is folded in (|d q| + 8 |d| for Q4_0, |d q| + |m| for Q4_1, |w| for Q8_0).
struct QuantElem {
  double w, mag;
};
inline QuantElem QuantWeight(WeightFormat format, const uint8_t* row, size_t k) {
  const size_t b = k / ggml::kBlockElems, i = k % ggml::kBlockElems;
  switch (format) {
    case WeightFormat::kQ8_0: {
      const auto& blk = reinterpret_cast<const ggml::BlockQ8_0*>(row)[b];
      const double w = static_cast<double>(ggml::F16FieldToF32(blk.d)) * blk.qs[i];
      return {w, std::fabs(w)};
    }
    case WeightFormat::kQ4_0: {
      const auto& blk = reinterpret_cast<const ggml::BlockQ4_0*>(row)[b];
      const double d = ggml::F16FieldToF32(blk.d);
      const int q = ggml::Nibble(blk.qs, i);
      return {d * (q - 8), std::fabs(d) * (q + 8)};
    }
    case WeightFormat::kQ4_1: {
      const auto& blk = reinterpret_cast<const ggml::BlockQ4_1*>(row)[b];
      const double d = ggml::F16FieldToF32(blk.d), m = ggml::F16FieldToF32(blk.m);
      const int q = ggml::Nibble(blk.qs, i);
      return {d * q + m, std::fabs(d) * q + std::fabs(m)};
    }
    default: break;  // not a block format
  }
  return {0, 0};
}

// Activations quantized as the kInt8 strategy defines it, in f32 operations:
// dx = max|x| / 127 per 32-block, q = nearbyint(x * (1 / dx)) (0 if dx == 0).
// Returns the dequantized values dx * q (exact in f64) and the block scales.
inline std::vector<double> QuantizeActivations(const float* x, size_t cols,
                                               std::vector<double>* scales) {
  std::vector<double> xq(cols);
  scales->assign(cols / ggml::kBlockElems, 0.0);
  for (size_t b = 0; b < cols / ggml::kBlockElems; ++b) {
    const float* xb = x + b * ggml::kBlockElems;
    float amax = 0.0f;
    for (size_t i = 0; i < ggml::kBlockElems; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t i = 0; i < ggml::kBlockElems; ++i) {
      const float p = xb[i] * inv;
      xq[b * ggml::kBlockElems + i] = static_cast<double>(d) * std::nearbyint(p);
    }
    (*scales)[b] = d;
  }
  return xq;
}

// y[n] = sum_k W[n, k] x[k] in f64, with sum_k mag[n, k] |x[k]| in `abs_sum` (the
// scale of the rounding error an f32 accumulation may make) and, if `scales` is
// given, sum_k |W[n, k]| * scales[k / 32] in `w_scale_sum` (the scale of the
// activation-quantization error).
inline std::vector<double> QuantGemv(WeightFormat format, const uint8_t* w, size_t rows,
                                     size_t cols, const double* x,
                                     std::vector<double>* abs_sum,
                                     const std::vector<double>* scales = nullptr,
                                     std::vector<double>* w_scale_sum = nullptr) {
  const size_t row_bytes = formats::RowBytes(format, cols);
  std::vector<double> y(rows, 0.0);
  abs_sum->assign(rows, 0.0);
  if (w_scale_sum) w_scale_sum->assign(rows, 0.0);
  for (size_t n = 0; n < rows; ++n) {
    for (size_t k = 0; k < cols; ++k) {
      const QuantElem e = QuantWeight(format, w + n * row_bytes, k);
      y[n] += e.w * x[k];
      (*abs_sum)[n] += e.mag * std::fabs(x[k]);
      if (w_scale_sum) (*w_scale_sum)[n] += std::fabs(e.w) * (*scales)[k / ggml::kBlockElems];
    }
  }
  return y;
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_GEMV_GEMV_QUANT_REF_H_
