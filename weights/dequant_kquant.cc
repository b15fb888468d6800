#include "weights/dequant_kquant.h"

#include "util/ggml_blocks.h"

// Each formula keeps gguf-py's (gguf/quants.py) f32 steps: the f16 super-scale is
// widened to f32, a sub-block's scale is d * float(scale), each element that scale
// times float(q), minus the sub-block's dmin * float(min) where there is one. Every
// product here is exact in f32 (an f16 has 11 significant bits, a scale at most 8 and
// q at most 6: at most 24 bits, and no product comes near overflow), so only the final
// subtraction (or Q5_1's addition) rounds; a different grouping of the products, or
// a fused multiply-add, gives the same bits. What must match gguf-py exactly is which
// bits form each scale, minimum and q, and their signs and biases; the crafted blocks
// (weights/dequant_test.cc) and every tensor of a real file
// (weights/dequant_gguf_file_test.cc) are compared with gguf-py bit for bit.

namespace dk::weights::internal {
namespace {

constexpr int kQk = static_cast<int>(ggml::kBlockElems);         // 32
constexpr int kQkK = static_cast<int>(ggml::kSuperBlockElems);   // 256

inline uint32_t LoadU32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// The 5-bit value of element i of a Q5_0 / Q5_1 block: the nibble, and bit i of qh.
inline int Q5Value(const uint8_t* qs, uint32_t qh, int i) {
  return ggml::Nibble(qs, static_cast<size_t>(i)) | static_cast<int>(((qh >> i) & 1u) << 4);
}

// The 6-bit scale of sub-block k (0..15) of a Q3_K block, still biased by 32: the low
// 4 bits are the nibbles of bytes 0..7 (low nibbles first), the high 2 bits the
// 2-bit fields of bytes 8..11 (field k / 4 of byte 8 + k % 4).
inline int Q3KScale(const uint8_t* scales, int k) {
  const int lo = k < 8 ? (scales[k] & 0x0F) : (scales[k - 8] >> 4);
  const int hi = (scales[8 + k % 4] >> (2 * (k / 4))) & 3;
  return lo | (hi << 4);
}

}  // namespace

// w = d * (q - 16), q the 5-bit value.
void DequantQ5_0Block(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ5_0*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  const uint32_t qh = LoadU32(blk->qh);
  for (int i = 0; i < kQk; ++i) out[i] = d * static_cast<float>(Q5Value(blk->qs, qh, i) - 16);
}

// w = d * q + m.
void DequantQ5_1Block(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ5_1*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  const float m = ggml::F16FieldToF32(blk->m);
  const uint32_t qh = LoadU32(blk->qh);
  for (int i = 0; i < kQk; ++i) {
    const float p = d * static_cast<float>(Q5Value(blk->qs, qh, i));
    out[i] = p + m;
  }
}

// 16 sub-blocks of 16: w = (d * sc) * q - (dmin * mn), sc / mn the nibbles of
// scales[j]. Element e's 2 bits are field (e % 128) / 32 of qs[32 * (e / 128) + e % 32].
void DequantQ2_KBlock(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ2_K*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  const float dmin = ggml::F16FieldToF32(blk->dmin);
  for (int j = 0; j < kQkK / 16; ++j) {
    const float dl = d * static_cast<float>(blk->scales[j] & 0x0F);
    const float ml = dmin * static_cast<float>(blk->scales[j] >> 4);
    for (int e = 16 * j; e < 16 * (j + 1); ++e) {
      const int shift = 2 * ((e % 128) / 32);
      const int q = (blk->qs[32 * (e / 128) + e % 32] >> shift) & 3;
      const float p = dl * static_cast<float>(q);
      out[e] = p - ml;
    }
  }
}

// 16 sub-blocks of 16: w = (d * (sc - 32)) * q, q = low 2 bits (as Q2_K) minus 4
// where element e's bit e / 32 of hmask[e % 32] is clear.
void DequantQ3_KBlock(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ3_K*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  for (int j = 0; j < kQkK / 16; ++j) {
    const float dl = d * static_cast<float>(Q3KScale(blk->scales, j) - 32);
    for (int e = 16 * j; e < 16 * (j + 1); ++e) {
      const int low = (blk->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int high = (blk->hmask[e % 32] >> (e / 32)) & 1;
      out[e] = dl * static_cast<float>(low - ((high ^ 1) << 2));
    }
  }
}

namespace {

// Q4_K and Q5_K: 8 sub-blocks of 32, w = (d * sc) * q - (dmin * mn). Element e's
// nibble is the low (e % 64 < 32) or high one of qs[32 * (e / 64) + e % 32]; Q5_K
// adds bit e / 32 of qh[e % 32] as the fifth bit.
void DequantK4Or5(const uint8_t* dfield, const uint8_t* dminfield, const uint8_t* scales,
                  const uint8_t* qs, const uint8_t* qh, float* out) {
  const float d = ggml::F16FieldToF32(dfield);
  const float dmin = ggml::F16FieldToF32(dminfield);
  for (int j = 0; j < kQkK / 32; ++j) {
    uint8_t sc = 0, mn = 0;
    ggml::UnpackScaleMinK4(scales, j, &sc, &mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    for (int e = 32 * j; e < 32 * (j + 1); ++e) {
      int q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0F;
      if (qh != nullptr) q |= ((qh[e % 32] >> (e / 32)) & 1) << 4;
      const float p = dl * static_cast<float>(q);
      out[e] = p - ml;
    }
  }
}

}  // namespace

void DequantQ4_KBlock(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ4_K*>(b);
  DequantK4Or5(blk->d, blk->dmin, blk->scales, blk->qs, nullptr, out);
}

void DequantQ5_KBlock(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ5_K*>(b);
  DequantK4Or5(blk->d, blk->dmin, blk->scales, blk->qs, blk->qh, out);
}

// 16 sub-blocks of 16: w = (d * sc) * (q - 32), sc a signed byte. Element e of half
// h = e / 128 (r = e % 128): the nibble (low for r < 64) of ql[64 * h + r % 64] and,
// as bits 4..5, field r / 32 of qh[32 * h + r % 32].
void DequantQ6_KBlock(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ6_K*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  for (int j = 0; j < kQkK / 16; ++j) {
    const float dl = d * static_cast<float>(blk->scales[j]);
    for (int e = 16 * j; e < 16 * (j + 1); ++e) {
      const int h = e / 128, r = e % 128;
      const int low = (blk->ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
      const int high = (blk->qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      out[e] = dl * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

}  // namespace dk::weights::internal
