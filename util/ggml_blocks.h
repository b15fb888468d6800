// GGUF / ggml block formats, byte for byte as the file stores them, and the IEEE
// binary16 conversion their scales need. Shared by the dequantizers
// (weights/dequant.cc) and the quantized GEMV kernels (kernels/gemv/gemv_quant.h),
// so the layout is written down once.
//
//   Q8_0 (34 bytes): f16 d, int8 q[32];                 w[i] = d * q[i]
//   Q4_0 (18 bytes): f16 d, uint8 qs[16];               w[i] = d * (nibble(i) - 8)
//   Q4_1 (20 bytes): f16 d, f16 m, uint8 qs[16];        w[i] = d * nibble(i) + m
// with nibble(i) = qs[i] & 0x0F for i < 16 and qs[i - 16] >> 4 for i >= 16 (the low
// nibbles hold the first half of the block). The Q5 blocks add a fifth bit per
// element in qh (bit i of the little-endian u32 for element i). The K-quants are
// 256-element super-blocks of 16 or 8 sub-blocks with their own 4- or 6-bit scales
// (and minimums), under one or two f16 super-scales; their element formulas live
// with their dequantizer (weights/dequant.cc). f16 fields are little-endian. The
// structs hold bytes only (alignment 1), so a block may start at any address, as it
// does in a file (a row of blocks is a multiple of 2 bytes only).
//
// Thread-safety: pure functions and plain data.
#ifndef DK_UTIL_GGML_BLOCKS_H_
#define DK_UTIL_GGML_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "formats/weight_format.h"

namespace dk::ggml {

inline constexpr size_t kBlockElems = formats::kBlockElems;  // elements per Q8_0 / Q4_0 / Q4_1 / Q5_0 block

struct BlockQ8_0 {
  uint8_t d[2];  // f16 scale
  int8_t qs[kBlockElems];
};
struct BlockQ4_0 {
  uint8_t d[2];  // f16 scale
  uint8_t qs[kBlockElems / 2];
};
struct BlockQ4_1 {
  uint8_t d[2];  // f16 scale
  uint8_t m[2];  // f16 minimum
  uint8_t qs[kBlockElems / 2];
};
// The structs are the formats' blocks (formats/weight_format.h sizes them).
static_assert(sizeof(BlockQ8_0) == formats::BlockBytes(formats::WeightFormat::kQ8_0) && alignof(BlockQ8_0) == 1);
static_assert(sizeof(BlockQ4_0) == formats::BlockBytes(formats::WeightFormat::kQ4_0) && alignof(BlockQ4_0) == 1);
static_assert(sizeof(BlockQ4_1) == formats::BlockBytes(formats::WeightFormat::kQ4_1) && alignof(BlockQ4_1) == 1);

// Elements of one K-quant super-block (Q2_K ... Q6_K).
inline constexpr size_t kSuperBlockElems = formats::kSuperBlockElems;

struct BlockQ5_0 {
  uint8_t d[2];   // f16 scale
  uint8_t qh[4];  // fifth bits, element i at bit i
  uint8_t qs[kBlockElems / 2];
};
struct BlockQ5_1 {
  uint8_t d[2];  // f16 scale
  uint8_t m[2];  // f16 minimum
  uint8_t qh[4];
  uint8_t qs[kBlockElems / 2];
};
struct BlockQ2_K {
  uint8_t scales[kSuperBlockElems / 16];  // 16 sub-blocks: scale (low nibble), min (high)
  uint8_t qs[kSuperBlockElems / 4];       // 2-bit values
  uint8_t d[2];                           // f16 super-scale of the scales
  uint8_t dmin[2];                        // f16 super-scale of the minimums
};
struct BlockQ3_K {
  uint8_t hmask[kSuperBlockElems / 8];  // third bits
  uint8_t qs[kSuperBlockElems / 4];     // low 2 bits
  uint8_t scales[12];                   // 16 6-bit signed scales (biased by 32)
  uint8_t d[2];                         // f16 super-scale
};
struct BlockQ4_K {
  uint8_t d[2];     // f16 super-scale of the scales
  uint8_t dmin[2];  // f16 super-scale of the minimums
  uint8_t scales[12];  // 8 sub-blocks: 6-bit scales and minimums (UnpackScaleMinK4)
  uint8_t qs[kSuperBlockElems / 2];
};
struct BlockQ5_K {
  uint8_t d[2];
  uint8_t dmin[2];
  uint8_t scales[12];
  uint8_t qh[kSuperBlockElems / 8];  // fifth bits
  uint8_t qs[kSuperBlockElems / 2];
};
struct BlockQ6_K {
  uint8_t ql[kSuperBlockElems / 2];  // low 4 bits
  uint8_t qh[kSuperBlockElems / 4];  // high 2 bits
  int8_t scales[kSuperBlockElems / 16];  // 16 sub-blocks, signed 8-bit scales
  uint8_t d[2];                          // f16 super-scale
};
// Sizes as ggml's type table gives them (the GGUF reader's GetGgmlTypeTraits); the
// ones that are weight formats as formats/weight_format.h sizes them.
static_assert(sizeof(BlockQ5_0) == formats::BlockBytes(formats::WeightFormat::kQ5_0) && alignof(BlockQ5_0) == 1);
static_assert(sizeof(BlockQ4_K) == formats::BlockBytes(formats::WeightFormat::kQ4_K));
static_assert(sizeof(BlockQ6_K) == formats::BlockBytes(formats::WeightFormat::kQ6_K));
static_assert(sizeof(BlockQ5_1) == 24 && alignof(BlockQ5_1) == 1);
static_assert(sizeof(BlockQ2_K) == 84 && alignof(BlockQ2_K) == 1);
static_assert(sizeof(BlockQ3_K) == 110 && alignof(BlockQ3_K) == 1);
static_assert(sizeof(BlockQ4_K) == 144 && alignof(BlockQ4_K) == 1);
static_assert(sizeof(BlockQ5_K) == 176 && alignof(BlockQ5_K) == 1);
static_assert(sizeof(BlockQ6_K) == 210 && alignof(BlockQ6_K) == 1);

// The 6-bit scale and minimum of sub-block j (0 <= j < 8) of a Q4_K / Q5_K block's
// 12 scale bytes: j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split between
// the nibbles of byte j + 4 and the top 2 bits of bytes j - 4 and j.
inline void UnpackScaleMinK4(const uint8_t* scales, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The 4-bit value of element i (0 <= i < 32) of a Q4_0 / Q4_1 block's qs.
inline int Nibble(const uint8_t* qs, size_t i) {
  return i < kBlockElems / 2 ? (qs[i] & 0x0F) : (qs[i - kBlockElems / 2] >> 4);
}

// Little-endian f16 bits of a block field.
inline uint16_t F16Bits(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// IEEE binary16 bits -> f32, exactly (subnormals, inf and NaN payloads included).
inline float F16ToF32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {  // inf / NaN (payload kept)
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {  // normal
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // +-0
    bits = sign;
  } else {  // subnormal: normalize
    int e = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float F16FieldToF32(const uint8_t* p) { return F16ToF32(F16Bits(p)); }

// f32 -> IEEE binary16 bits, rounded to nearest even; overflow goes to inf,
// tiny values to subnormals or zero, NaN stays a (quiet) NaN.
inline uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf / NaN
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (abs < 0x38800000u) {  // below the smallest normal f16 (2^-14): a subnormal or 0
    if (abs < 0x33000000u) return sign;  // at most half the smallest subnormal (2^-25): 0
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    const uint32_t half = 1u << (shift - 1);
    uint32_t q = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even
  // (a carry into the exponent is the correct result).
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline void StoreF16Field(float f, uint8_t* p) {
  const uint16_t h = F32ToF16(f);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

}  // namespace dk::ggml

#endif  // DK_UTIL_GGML_BLOCKS_H_
