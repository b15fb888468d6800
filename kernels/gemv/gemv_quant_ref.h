// Scalar f64 reference for the quantized-weight GEMVs (tests only). Independent of
// the kernels: it reads the blocks through util/ggml_blocks.h one element at a
// time and quantizes activations with its own scalar code.
#ifndef DK_KERNELS_GEMV_GEMV_QUANT_REF_H_
#define DK_KERNELS_GEMV_GEMV_QUANT_REF_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/gemv/gemv_quant.h"
#include "util/ggml_blocks.h"

namespace dk::kernels::ref {

// Element k of a row of blocks, as GGUF defines it (exact in f64): `w` is the
// weight; `mag` bounds the magnitude of what a kernel may sum for it before the
// offset is folded in (|d q| + 8 |d| for Q4_0, |d q| + |m| for Q4_1, |w| for Q8_0;
// likewise |d| (q5 + 16) for Q5_0, |d sc q| + |dmin m| for Q4_K, |d sc| (q6 + 32)
// for Q6_K).
struct QuantElem {
  double w, mag;
};

// Q5_0: q5 = nibble | bit i of the little-endian qh << 4; w = d (q5 - 16).
inline QuantElem Q5_0Weight(const uint8_t* row, size_t k) {
  const auto& blk = reinterpret_cast<const ggml::BlockQ5_0*>(row)[k / 32];
  const size_t i = k % 32;
  const int fifth = (blk.qh[i / 8] >> (i % 8)) & 1;
  const int q = ggml::Nibble(blk.qs, i) | (fifth << 4);
  const double d = ggml::F16FieldToF32(blk.d);
  return {d * (q - 16), std::fabs(d) * (q + 16)};
}

// Q4_K: element i of a super-block is in sub-block i / 32 (scale and minimum from
// the 12 scale bytes), its nibble in byte 32 (i / 64) + i % 32 of qs, low for the
// first 32 of each 64, high for the second; w = d sc q - dmin m.
inline QuantElem Q4_KWeight(const uint8_t* row, size_t k) {
  const auto& blk = reinterpret_cast<const ggml::BlockQ4_K*>(row)[k / 256];
  const size_t i = k % 256;
  const uint8_t byte = blk.qs[32 * (i / 64) + i % 32];
  const int q = (i % 64) < 32 ? (byte & 0x0F) : (byte >> 4);
  uint8_t sc, m;
  ggml::UnpackScaleMinK4(blk.scales, static_cast<int>(i / 32), &sc, &m);
  const double d = ggml::F16FieldToF32(blk.d), dmin = ggml::F16FieldToF32(blk.dmin);
  return {d * sc * q - dmin * m, std::fabs(d * sc * q) + std::fabs(dmin * m)};
}

// Q6_K (ggml's dequantize_row_q6_K): in half h = i / 128, quarter t = (i % 128) / 32
// and position l = i % 32, the low 4 bits are ql[64 h + l + 32 (t % 2)], low nibble for
// t < 2, high for t >= 2; the top 2 bits are bits 2t, 2t + 1 of qh[32 h + l];
// w = d scales[i / 16] (q6 - 32).
inline QuantElem Q6_KWeight(const uint8_t* row, size_t k) {
  const auto& blk = reinterpret_cast<const ggml::BlockQ6_K*>(row)[k / 256];
  const size_t i = k % 256, h = i / 128, t = (i % 128) / 32, l = i % 32;
  const uint8_t low_byte = blk.ql[64 * h + l + 32 * (t % 2)];
  const int low = t < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
  const int high = (blk.qh[32 * h + l] >> (2 * t)) & 3;
  const int q = low | (high << 4);
  const double s = static_cast<double>(ggml::F16FieldToF32(blk.d)) * blk.scales[i / 16];
  return {s * (q - 32), std::fabs(s) * (q + 32)};
}

inline QuantElem QuantWeight(WeightFormat format, const uint8_t* row, size_t k) {
  const size_t b = k / ggml::kBlockElems, i = k % ggml::kBlockElems;
  switch (format) {
    case WeightFormat::kQ5_0: return Q5_0Weight(row, k);
    case WeightFormat::kQ4_K: return Q4_KWeight(row, k);
    case WeightFormat::kQ6_K: return Q6_KWeight(row, k);
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

// Byte offsets of a block's f16 fields (scales, minima); the rest is any bytes.
inline std::vector<size_t> F16Fields(WeightFormat format) {
  switch (format) {
    case WeightFormat::kQ4_1: return {0, 2};
    case WeightFormat::kQ4_K: return {offsetof(ggml::BlockQ4_K, d), offsetof(ggml::BlockQ4_K, dmin)};
    case WeightFormat::kQ6_K: return {offsetof(ggml::BlockQ6_K, d)};
    default: return {0};
  }
}

// A random f16 of either sign with magnitude in [2^-9, 2^-2): scales and minima of
// the size real checkpoints have.
inline uint16_t RandomF16(std::mt19937* rng) {
  const uint32_t r = (*rng)();
  const uint32_t exp = 15 - 9 + (r % 7);  // biased exponent
  return static_cast<uint16_t>(((r >> 3) & 0x8000u) | (exp << 10) | ((r >> 8) & 0x3FFu));
}

// rows * cols / BlockElems blocks of random bytes with valid random f16 scales
// (and minima); the other fields take any value their bits can hold. Q8_0's q
// covers the whole int8 range (-128 included, which the VNNI sign trick must
// handle).
inline std::vector<uint8_t> RandomBlocks(WeightFormat format, size_t rows, size_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(rows * formats::RowBytes(format, cols));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t block = formats::BlockBytes(format);
  for (size_t off = 0; off < w.size(); off += block) {
    for (size_t field : F16Fields(format)) {
      const uint16_t d = RandomF16(&rng);
      std::memcpy(&w[off + field], &d, 2);
    }
  }
  return w;
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_GEMV_GEMV_QUANT_REF_H_
