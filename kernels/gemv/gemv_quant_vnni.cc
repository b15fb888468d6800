#include "kernels/gemv/gemv_quant_vnni.h"

#include <immintrin.h>

// GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized (and, inlined into a
// loop over an array of accumulators, -Wuninitialized) on its own locals.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels/gemv/gemm_tiles.h"
#include "kernels/gemv/gemv_chunk_scales.h"
#include "util/aligned_buffer.h"
#include "util/ggml_blocks.h"

namespace dk::kernels::internal {
namespace {

#define DK_VNNI_TARGET \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define DK_AVXVNNI_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
// Helpers both paths inline (a subset of either's target).
#define DK_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

inline void Store(float v, float* y) { *y = v; }
inline void Store(float v, bf16* y) { *y = F32ToBf16(v); }

DK_AVX2_TARGET inline float F16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

DK_AVX2_TARGET inline float ReduceAdd(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 bytes of nibbles -> the block's 32 unsigned values in element order (low
// nibbles are elements 0..15, high nibbles 16..31).
DK_AVX2_TARGET inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i lo = _mm_and_si128(v, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

inline uint16_t U16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Offset of qs in a block.
template <WeightFormat F>
constexpr size_t QsOffset() {
  return F == WeightFormat::kQ4_1 ? offsetof(ggml::BlockQ4_1, qs)
         : F == WeightFormat::kQ4_0 ? offsetof(ggml::BlockQ4_0, qs)
                                   : offsetof(ggml::BlockQ8_0, qs);
}

constexpr size_t kMinOffset = offsetof(ggml::BlockQ4_1, m);  // Q4_1's f16 m

// One block on 256-bit vectors (the odd last block of a row): its int32 lanes.
template <WeightFormat F>
DK_VNNI_TARGET inline __m256i BlockDot(const uint8_t* blk, const Q8Activations& x, size_t b) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
  if constexpr (F == WeightFormat::kQ8_0) {
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + QsOffset<F>()));
    const __m256i xs = _mm256_mask_sub_epi8(xq, _mm256_movepi8_mask(wq), zero, xq);
    return _mm256_dpbusd_epi32(zero, _mm256_abs_epi8(wq), xs);
  } else {
    return _mm256_dpbusd_epi32(zero, Nibbles(blk + QsOffset<F>()), xq);
  }
}

// Blocks go in pairs on 512-bit vectors: lanes 0..7 hold block b's partial dot
// products, lanes 8..15 block b + 1's; the pair's scales dw * dx are computed side
// by side and spread over the two halves. kRows rows advance together and share
// the activation loads. sums[i] = row r + i's dot product over blocks [begin, blocks).
template <WeightFormat F, size_t kRows>
DK_VNNI_TARGET inline void RowGroupSums(const uint8_t* w, size_t blocks, size_t r, size_t begin,
                                        const Q8Activations& x, float* sums) {
  constexpr size_t kBlock = formats::BlockBytes(F);
  const __m512i zero = _mm512_setzero_si512();
  const __m256i mask = _mm256_set1_epi8(0x0F);
  // [lo0 lo1 hi0 hi1] (128-bit quarters) -> [lo0 hi0 lo1 hi1]
  const __m512i halves = _mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const uint8_t* rows[kRows];
  __m512 acc[kRows];
  // Q4_1: sum_b m_b * dx_b * sum(q_x); Q4_0: sum_b dw_b * dx_b * sum(q_x), which
  // times -8 (exact) is the offset's share. Lanes 0 and 1.
  __m128 min_acc[kRows];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = w + (r + i) * blocks * kBlock;
    acc[i] = _mm512_setzero_ps();
    min_acc[i] = _mm_setzero_ps();
  }
  size_t b = begin;
  for (; b + 2 <= blocks; b += 2) {
    const __m512i xq = _mm512_load_si512(x.q + b * 32);
    const __m128 dx = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.d + b)));
    const __m128 sx = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.sx + b)));
#pragma GCC unroll 2
    for (size_t i = 0; i < kRows; ++i) {
      const uint8_t* b0 = rows[i] + b * kBlock;
      const uint8_t* b1 = b0 + kBlock;
      __m512i dot;
      if constexpr (F == WeightFormat::kQ8_0) {
        const __m512i wq = _mm512_inserti64x4(
            _mm512_castsi256_si512(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + QsOffset<F>()))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + QsOffset<F>())), 1);
        const __m512i xs = _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(wq), zero, xq);
        dot = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wq), xs);
      } else {
        const __m256i v = _mm256_inserti128_si256(
            _mm256_castsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + QsOffset<F>()))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + QsOffset<F>())), 1);
        const __m256i lo = _mm256_and_si256(v, mask);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
        const __m512i q = _mm512_permutexvar_epi64(
            halves, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        dot = _mm512_dpbusd_epi32(zero, q, xq);
      }
      const __m128 dw = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(U16(b0)), U16(b1), 1));
      const __m512 scale =
          _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(dw, dx)));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[i]);
      if constexpr (F == WeightFormat::kQ4_0) {
        min_acc[i] = _mm_fmadd_ps(dw, sx, min_acc[i]);
      } else if constexpr (F == WeightFormat::kQ4_1) {
        const __m128 m = _mm_cvtph_ps(
            _mm_insert_epi16(_mm_cvtsi32_si128(U16(b0 + kMinOffset)), U16(b1 + kMinOffset), 1));
        min_acc[i] = _mm_fmadd_ps(m, sx, min_acc[i]);
      }
    }
  }
  for (size_t i = 0; i < kRows; ++i) {
    float tail = 0.0f;
    if (b < blocks) {
      const uint8_t* blk = rows[i] + b * kBlock;
      tail = ReduceAdd(_mm256_mul_ps(_mm256_cvtepi32_ps(BlockDot<F>(blk, x, b)),
                                     _mm256_set1_ps(F16(blk) * x.d[b])));
      if constexpr (F == WeightFormat::kQ4_0) tail -= 8.0f * (F16(blk) * x.sx[b]);
      if constexpr (F == WeightFormat::kQ4_1) tail += F16(blk + kMinOffset) * x.sx[b];
    }
    float mins = _mm_cvtss_f32(_mm_add_ss(min_acc[i], _mm_movehdup_ps(min_acc[i])));
    if constexpr (F == WeightFormat::kQ4_0) mins *= -8.0f;
    sums[i] = _mm512_reduce_add_ps(acc[i]) + tail + mins;
  }
}

template <WeightFormat F, size_t kRows, typename YT>
DK_VNNI_TARGET inline void RowGroup(const uint8_t* w, size_t blocks, size_t r,
                                    const Q8Activations& x, YT* y) {
  float sums[kRows];
  RowGroupSums<F, kRows>(w, blocks, r, 0, x, sums);
  for (size_t i = 0; i < kRows; ++i) Store(sums[i], y + r + i);
}

// The qs of the Q8_0 blocks at blk and blk + 34, one per 256-bit half.
DK_VNNI_TARGET inline __m512i Q8PairQs(const uint8_t* blk) {
  constexpr size_t kBlock = sizeof(ggml::BlockQ8_0);
  constexpr size_t kQs = offsetof(ggml::BlockQ8_0, qs);
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQs))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kBlock + kQs)), 1);
}

// Q8_0 pairs [b, b + 2 pairs) of kRows rows into acc: scale[i] holds row i's d dx of
// blocks b, b + 1, ... in lanes 0, 1, ..., and each pair takes its two from it with
// one permute. The signed weights go into vpdpbusd's unsigned operand biased:
// u = w ^ 0x80 = w + 128, so dot(u, x) = dot(w, x) + 128 sum(x) per int32 lane (its
// four bytes); the lane starts from -128 sum(x) (one vpdpbusd of x with 0x80 bytes
// per pair, shared by the rows), which leaves the exact dot(w, x) of RowGroup's sign
// trick for one XOR per pair and row instead of its mask, masked subtract and abs.
template <size_t kRows>
DK_VNNI_TARGET inline void Q8Pairs(const uint8_t* const* rows, size_t b, size_t pairs,
                                   const Q8Activations& x, const __m512* scale, __m512* acc) {
  constexpr size_t kBlock = sizeof(ggml::BlockQ8_0);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
#pragma GCC unroll 8
  for (size_t pair = 0; pair < pairs; ++pair) {
    const size_t b0 = b + 2 * pair;
    const __m512i xq = _mm512_load_si512(x.q + b0 * 32);
    const __m512i start = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, xq));
#pragma GCC unroll 4
    for (size_t i = 0; i < kRows; ++i) {
      const __m512i wq = Q8PairQs(rows[i] + b0 * kBlock);
      const __m512i dot = _mm512_dpbusd_epi32(start, _mm512_xor_si512(wq, bias), xq);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, scale[i]), acc[i]);
    }
    pick = _mm512_add_epi32(pick, _mm512_set1_epi32(2));
  }
}

// The d dx of n <= 16 blocks from b of kRows rows, in lanes 0..n-1 (ChunkScales).
template <size_t kRows>
DK_VNNI_TARGET inline void Q8Scales(const uint8_t* const* rows, size_t b, size_t n, const Q8Activations& x,
                                    __m512* scale) {
  constexpr size_t kBlock = sizeof(ggml::BlockQ8_0);
  const __m512 dx = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), x.d + b);
  for (size_t i = 0; i < kRows; ++i) {
    scale[i] = _mm512_mul_ps(_mm512_cvtph_ps(ChunkScales<kBlock>(rows[i] + b * kBlock, n)), dx);
  }
}

// Q8_0 rows, 16 blocks at a time (Q8Pairs): the 16 f16 scales of a row's chunk come
// in with a few word permutes (ChunkScales), one conversion and one multiply by the
// chunk's dx, where RowGroup spends about six instructions per pair on them. The
// blocks after the last whole chunk go through RowGroup's loop (RowGroupSums), whose
// sum is added at the end: the dot products, scales and FMAs are RowGroup's, in the
// same order into the same lanes. (Those tail blocks through a partial ChunkScales
// instead were faster in cache but slower from memory: Gemma 3's K = 640 rows,
// docs/gemv-kernels.md.)
template <size_t kRows, typename YT>
DK_VNNI_TARGET inline void RowGroupQ8Chunked(const uint8_t* w, size_t blocks, size_t r,
                                             const Q8Activations& x, StreamPrefetch& stream, YT* y) {
  constexpr size_t kBlock = sizeof(ggml::BlockQ8_0);
  constexpr size_t kChunk = 16;
  const size_t chunked = blocks / kChunk * kChunk;
  const uint8_t* last = w + (r + kRows - 1) * blocks * kBlock;  // the group's last row
  if (chunked == 0) {
    stream.Through(last + blocks * kBlock);
    return RowGroup<WeightFormat::kQ8_0, kRows>(w, blocks, r, x, y);
  }
  StreamPrefetch prefetch = stream;  // a local copy the compiler can keep in a register
  const uint8_t* rows[kRows];
  __m512 acc[kRows], scale[kRows];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = w + (r + i) * blocks * kBlock;
    acc[i] = _mm512_setzero_ps();
  }
  for (size_t b = 0; b < chunked; b += kChunk) {
    prefetch.Through(last + (b + kChunk) * kBlock);
    Q8Scales<kRows>(rows, b, kChunk, x, scale);
    Q8Pairs<kRows>(rows, b, kChunk / 2, x, scale, acc);
  }
  float rest[kRows] = {};
  if (chunked < blocks) {
    prefetch.Through(last + blocks * kBlock);
    RowGroupSums<WeightFormat::kQ8_0, kRows>(w, blocks, r, chunked, x, rest);
  }
  stream = prefetch;
  for (size_t i = 0; i < kRows; ++i) Store(_mm512_reduce_add_ps(acc[i]) + rest[i], y + r + i);
}

// Q4_0 / Q4_1 rows, 16 blocks at a time. Scales as in RowGroupQ8Chunked: the 16
// blocks' d (and Q4_1's m) by ChunkScales, one conversion each, one multiply by the
// chunk's dx; the offset's share is one
// FMA per chunk (m * sx for Q4_1; d * sx for Q4_0, times -8 at the end). Four blocks
// share one 512-bit vector: their 4 x 16 nibble bytes (a load and three inserts);
// the low nibbles are dotted with the four blocks' first-half activations and the
// high nibbles with their second halves, both vpdpbusd into one int32 vector whose
// lanes 4g..4g+3 hold block g's dot product (exact), then one convert and one FMA
// by the scales spread as [s0 x4, s1 x4, s2 x4, s3 x4]. The activations must be
// pre-arranged for that (Q8Activations.quad, QuadActivations). Blocks after the last whole chunk
// go through RowGroupSums, whose sum is added at the end.
template <WeightFormat F, size_t kRows, typename YT>
DK_VNNI_TARGET inline void RowGroupQ4Chunked(const uint8_t* w, size_t blocks, size_t r, const Q8Activations& x,
                                             YT* y) {
  static_assert(F != WeightFormat::kQ8_0);
  constexpr size_t kBlock = formats::BlockBytes(F);
  constexpr size_t kQs = QsOffset<F>();
  constexpr size_t kChunk = 16;
  const size_t chunked = blocks / kChunk * kChunk;
  if (chunked == 0) return RowGroup<F, kRows>(w, blocks, r, x, y);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i quad0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i four = _mm512_set1_epi32(4);
  const uint8_t* rows[kRows];
  __m512 acc[kRows], min_acc[kRows];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = w + (r + i) * blocks * kBlock;
    acc[i] = _mm512_setzero_ps();
    min_acc[i] = _mm512_setzero_ps();
  }
  for (size_t b = 0; b < chunked; b += kChunk) {
    const __m512 dx = _mm512_loadu_ps(x.d + b);
    const __m512 sx = _mm512_loadu_ps(x.sx + b);
    __m512 scale[kRows];
    for (size_t i = 0; i < kRows; ++i) {
      PrefetchChunk<kBlock>(rows[i] + b * kBlock);
      const __m512 d = _mm512_cvtph_ps(ChunkScales<kBlock>(rows[i] + b * kBlock));
      scale[i] = _mm512_mul_ps(d, dx);
      if constexpr (F == WeightFormat::kQ4_1) {
        const __m512 m = _mm512_cvtph_ps(ChunkScales<kBlock, kMinOffset>(rows[i] + b * kBlock));
        min_acc[i] = _mm512_fmadd_ps(m, sx, min_acc[i]);
      } else {
        min_acc[i] = _mm512_fmadd_ps(d, sx, min_acc[i]);
      }
    }
    __m512i pick = quad0;
#pragma GCC unroll 4
    for (size_t quad = 0; quad < kChunk / 4; ++quad) {
      const size_t b0 = b + 4 * quad;
      const __m512i xlo = _mm512_load_si512(x.quad + b0 * 32);
      const __m512i xhi = _mm512_load_si512(x.quad + b0 * 32 + 64);
#pragma GCC unroll 2
      for (size_t i = 0; i < kRows; ++i) {
        const uint8_t* q = rows[i] + b0 * kBlock + kQs;
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + kBlock)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * kBlock)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 3 * kBlock)), 3);
        const __m512i lo = _mm512_and_si512(v, mask);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, xlo), hi, xhi);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, scale[i]), acc[i]);
      }
      pick = _mm512_add_epi32(pick, four);
    }
  }
  float rest[kRows] = {};
  if (chunked < blocks) RowGroupSums<F, kRows>(w, blocks, r, chunked, x, rest);
  for (size_t i = 0; i < kRows; ++i) {
    float mins = _mm512_reduce_add_ps(min_acc[i]);
    if constexpr (F == WeightFormat::kQ4_0) mins *= -8.0f;
    Store(_mm512_reduce_add_ps(acc[i]) + mins + rest[i], y + r + i);
  }
}

// RowGroupSums<kQ8_0, kRows> (blocks [begin, blocks)) for kTokens token rows x[t]:
// each weight pair's load serves every token row, whose block dots come from x.biased
// as in Q8ChunkedTokens (the same exact int32 values); scales, FMAs, the odd last
// block and the final sum in RowGroupSums' order. sums[t][i] for row r + i.
template <size_t kRows, size_t kTokens>
DK_VNNI_TARGET inline void Q8SumsTokens(const uint8_t* w, size_t blocks, size_t r, size_t begin,
                                        const Q8Activations* x, float (*sums)[kRows]) {
  constexpr size_t kBlock = sizeof(ggml::BlockQ8_0);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[kRows][kTokens];
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  size_t b = begin;
  for (; b + 2 <= blocks; b += 2) {
    for (size_t i = 0; i < kRows; ++i) {
      const uint8_t* b0 = w + (r + i) * blocks * kBlock + b * kBlock;
      const __m512i wq = Q8PairQs(b0);
      const __m512i offset = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, wq));
      const __m128 dw = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(U16(b0)), U16(b0 + kBlock), 1));
      for (size_t t = 0; t < kTokens; ++t) {
        const __m128 dx = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x[t].d + b)));
        const __m512i dot = _mm512_dpbusd_epi32(offset, _mm512_load_si512(x[t].biased + b * 32), wq);
        const __m512 scale = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(dw, dx)));
        acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[i][t]);
      }
    }
  }
  float acc_sums[kRows][kTokens];
  ReduceAddEach(&acc[0][0], kRows * kTokens, &acc_sums[0][0]);
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) {
      float tail = 0.0f;
      if (b < blocks) {
        const uint8_t* blk = w + (r + i) * blocks * kBlock + b * kBlock;
        tail = ReduceAdd(_mm256_mul_ps(_mm256_cvtepi32_ps(BlockDot<WeightFormat::kQ8_0>(blk, x[t], b)),
                                       _mm256_set1_ps(F16(blk) * x[t].d[b])));
      }
      const float mins = 0.0f;  // RowGroupSums' min_acc, which Q8_0 leaves at zero
      sums[t][i] = acc_sums[i][t] + tail + mins;
    }
  }
}

// RowGroupQ8Chunked for kTokens token rows x[t] at once: each weight pair's load and
// each chunk's scale gather serve every token row; each (row, token) pair keeps its
// own accumulator, scales and FMA order, so its sum is RowGroupQ8Chunked's bit for
// bit. The block dot products are the same exact int32 values, reached another way:
// vpdpbusd of the unsigned x + 128 (x.biased) with the signed weights, started from
// -128 sum(w) per lane (itself one vpdpbusd per weight pair, shared by the token
// rows), which saves the per-token sign flip of x. out[t * out_stride + r + i].
template <size_t kRows, size_t kTokens>
DK_VNNI_TARGET void Q8ChunkedTokens(const uint8_t* w, size_t blocks, size_t r, const Q8Activations* x,
                                    float* out, size_t out_stride) {
  constexpr size_t kBlock = sizeof(ggml::BlockQ8_0);
  constexpr size_t kChunk = 16;
  const size_t chunked = blocks / kChunk * kChunk;
  float rest[kTokens][kRows] = {};
  if (chunked < blocks) {  // RowGroup's loop over the blocks after the last whole chunk (or all)
    Q8SumsTokens<kRows, kTokens>(w, blocks, r, chunked, x, rest);
  }
  if (chunked == 0) {  // RowGroup: the sums alone
    for (size_t t = 0; t < kTokens; ++t) {
      for (size_t i = 0; i < kRows; ++i) out[t * out_stride + r + i] = rest[t][i];
    }
    return;
  }
  const __m512i zero = _mm512_setzero_si512();
  const __m512i pair0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i two = _mm512_set1_epi32(2);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const uint8_t* rows[kRows];
  __m512 acc[kRows][kTokens];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = w + (r + i) * blocks * kBlock;
    for (size_t t = 0; t < kTokens; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  for (size_t b = 0; b < chunked; b += kChunk) {
    __m512 scale[kRows][kTokens];
    for (size_t i = 0; i < kRows; ++i) {
      PrefetchChunk<kBlock>(rows[i] + b * kBlock);
      const __m512 dw = _mm512_cvtph_ps(ChunkScales<kBlock>(rows[i] + b * kBlock));
      for (size_t t = 0; t < kTokens; ++t) scale[i][t] = _mm512_mul_ps(dw, _mm512_loadu_ps(x[t].d + b));
    }
    __m512i pick = pair0;
#pragma GCC unroll 2
    for (size_t pair = 0; pair < kChunk / 2; ++pair) {
      const size_t b0 = b + 2 * pair;
#pragma GCC unroll 2
      for (size_t i = 0; i < kRows; ++i) {
        const __m512i wq = Q8PairQs(rows[i] + b0 * kBlock);
        const __m512i offset = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, wq));
#pragma GCC unroll 8
        for (size_t t = 0; t < kTokens; ++t) {
          const __m512i dot = _mm512_dpbusd_epi32(offset, _mm512_load_si512(x[t].biased + b0 * 32), wq);
          acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, scale[i][t]), acc[i][t]);
        }
      }
      pick = _mm512_add_epi32(pick, two);
    }
  }
  float sums[kRows][kTokens];
  ReduceAddEach(&acc[0][0], kRows * kTokens, &sums[0][0]);
  for (size_t t = 0; t < kTokens; ++t) {
    for (size_t i = 0; i < kRows; ++i) out[t * out_stride + r + i] = sums[i][t] + rest[t][i];
  }
}

template <WeightFormat F, typename YT>
DK_VNNI_TARGET void Rows(const uint8_t* w, size_t cols, size_t r0, size_t r1,
                         const Q8Activations& x, YT* y) {
  const size_t blocks = cols / ggml::kBlockElems;
  size_t r = r0;
  if constexpr (F == WeightFormat::kQ8_0) {
    StreamPrefetch prefetch(w + r0 * blocks * sizeof(ggml::BlockQ8_0));
    for (; r + 2 <= r1; r += 2) RowGroupQ8Chunked<2>(w, blocks, r, x, prefetch, y);
    if (r < r1) RowGroupQ8Chunked<1>(w, blocks, r, x, prefetch, y);
  } else {
    for (; r + 2 <= r1; r += 2) RowGroupQ4Chunked<F, 2>(w, blocks, r, x, y);
    if (r < r1) RowGroupQ4Chunked<F, 1>(w, blocks, r, x, y);
  }
}

// AVX-VNNI (VEX vpdpbusd, 256-bit; AVX2 CPUs such as Alder Lake, and AVX-512 CPUs
// whose target was capped at AVX2): one block per instruction, blocks b into
// accumulator b % 2. Q8_0's sign moves onto x with vpsignb (a zero weight zeroes x,
// harmless: |w| is 0 there too).
template <WeightFormat F, typename YT>
DK_AVXVNNI_TARGET void RowsAvxVnni(const uint8_t* w, size_t cols, size_t r0, size_t r1,
                                   const Q8Activations& x, YT* y) {
  constexpr size_t kBlock = formats::BlockBytes(F);
  const size_t blocks = cols / ggml::kBlockElems;
  const __m256i zero = _mm256_setzero_si256();
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * kBlock;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float mins = 0.0f;  // as min_acc in RowGroup
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * kBlock;
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
      __m256i dot;
      if constexpr (F == WeightFormat::kQ8_0) {
        const __m256i wq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + QsOffset<F>()));
        dot = _mm256_dpbusd_avx_epi32(zero, _mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
      } else {
        dot = _mm256_dpbusd_avx_epi32(zero, Nibbles(blk + QsOffset<F>()), xq);
      }
      const float dw = F16(blk);
      const __m256 scale = _mm256_set1_ps(dw * x.d[b]);
      if (b % 2 == 0) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc0);
      } else {
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc1);
      }
      if constexpr (F == WeightFormat::kQ4_0) mins = std::fma(dw, x.sx[b], mins);
      if constexpr (F == WeightFormat::kQ4_1) mins = std::fma(F16(blk + kMinOffset), x.sx[b], mins);
    }
    if constexpr (F == WeightFormat::kQ4_0) mins *= -8.0f;
    Store(ReduceAdd(_mm256_add_ps(acc0, acc1)) + mins, y + r);
  }
}

template <typename YT>
void DispatchAvxVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                     const Q8Activations& x, YT* y) {
  switch (format) {
    case WeightFormat::kQ8_0:
      return RowsAvxVnni<WeightFormat::kQ8_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_0:
      return RowsAvxVnni<WeightFormat::kQ4_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_1:
      return RowsAvxVnni<WeightFormat::kQ4_1>(w, cols, r0, r1, x, y);
    default: break;  // not a block format
  }
}

template <typename YT>
void Dispatch(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
              const Q8Activations& x, YT* y) {
  switch (format) {
    case WeightFormat::kQ8_0:
      return Rows<WeightFormat::kQ8_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_0:
      return Rows<WeightFormat::kQ4_0>(w, cols, r0, r1, x, y);
    case WeightFormat::kQ4_1:
      return Rows<WeightFormat::kQ4_1>(w, cols, r0, r1, x, y);
    default: break;  // not a block format
  }
}

}  // namespace

const int8_t* QuadActivations(const int8_t* q, size_t cols, KernelScratch& scratch, int thread) {
  const size_t blocks = cols / ggml::kBlockElems / 16 * 16;
  int8_t* out = scratch.Get<int8_t>(thread, kQuantQuad, blocks * 32);
  for (size_t g = 0; g < blocks; g += 4) {
    for (size_t half = 0; half < 2; ++half) {
      for (size_t j = 0; j < 4; ++j) {
        std::memcpy(out + g * 32 + half * 64 + j * 16, q + (g + j) * 32 + half * 16, 16);
      }
    }
  }
  return out;
}

bool CpuHasAvx512Vnni() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("fma");
  }();
  return has;
}

bool CpuHasAvxVnni() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
  }();
  return has;
}

void QuantRowsAvxVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                      const Q8Activations& x, float* y) {
  DispatchAvxVnni(format, w, cols, r0, r1, x, y);
}
void QuantRowsAvxVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                      const Q8Activations& x, bf16* y) {
  DispatchAvxVnni(format, w, cols, r0, r1, x, y);
}

void QuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                   const Q8Activations& x, float* y) {
  Dispatch(format, w, cols, r0, r1, x, y);
}
void QuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                   const Q8Activations& x, bf16* y) {
  Dispatch(format, w, cols, r0, r1, x, y);
}

void Q8RowsVnniTokens(const uint8_t* w, size_t cols, size_t n, const Q8Activations* x, size_t m, float* out,
                      size_t out_stride) {
  // Two weight rows per tile while its accumulators and scales (2 x 2 x tokens
  // registers) leave room; tokens past kMaxOnePassTokens (prefill) 4 at a time.
  ForTokenTiles<4>(m, OnePassTokens(cols), [&](auto tokens, size_t t) {
    ForRowGroups<tokens <= 1 ? 2 : 1>(n, [&](auto rows, size_t r) {
      Q8ChunkedTokens<rows, tokens>(w, cols / ggml::kBlockElems, r, x + t, out + t * out_stride, out_stride);
    });
  });
}

}  // namespace dk::kernels::internal
