// The AVX512-VNNI rows of Q5_0 / Q4_K / Q6_K (gemv_kquant.h). vpdpbusd takes the
// formats' unsigned values as they unpack (4, 5 or 6 bits, no offset) against the
// int8 activations; the offsets (-16, -32) and Q4_K's minimums come in through
// activation sums, once per block. 64 elements per 512-bit vpdpbusd, in element
// order, so the activations are read as quantized; each int32 lane's partial dot
// product is scaled by its sub-block's scale times dx and FMA'd into one f32
// accumulator per row, reduced at the end.
#include <immintrin.h>

// GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized (and, inlined into a
// loop over an array of accumulators, -Wuninitialized) on its own locals.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemv/gemm_tiles.h"
#include "kernels/gemv/gemv_chunk_scales.h"
#include "kernels/gemv/gemv_kquant.h"
#include "util/aligned_buffer.h"
#include "util/ggml_blocks.h"

namespace dk::kernels::internal {
namespace {

#define DK_VNNI_TARGET \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

inline void Store(float v, float* y) { *y = v; }
inline void Store(float v, bf16* y) { *y = F32ToBf16(v); }

DK_VNNI_TARGET inline float F16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 32 bytes of nibbles -> [low nibbles | high nibbles] (64 values in element order
// for Q4_K's 32 bytes per two sub-blocks).
DK_VNNI_TARGET inline __m512i SplitNibbles(const uint8_t* p) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, mask)),
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), mask), 1);
}

// Lane indices [first x kRun, first + 1 x kRun, ...] spreading a scale vector over
// the int32 lanes of a dot product (kRun lanes = 4 kRun elements per scale).
template <int kRun>
DK_VNNI_TARGET inline __m512i Spread(int first) {
  return _mm512_add_epi32(_mm512_set1_epi32(first),
                          _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            kRun == 8 ? 3 : 2));
}

// The rows below run kTokens token rows x[t] at once: a block's weights are unpacked
// once and each token row keeps its own accumulators and sequence of operations, so
// its sums are the single-row call's (kTokens = 1) bit for bit. out(t, r, value).

// Q4_K: per block the 8 6-bit scales and minimums (12 bytes as words a, b, c: scales
// 0..3 = a & 63, 4..7 = c's low nibbles | a's top 2 bits << 4; minimums 0..3 = b & 63,
// 4..7 = c's high nibbles | b's top 2 bits << 4), scale_j = d sc_j dx_j for the
// lanes, dmin m_j dx_j sum_j(x) into the row's minimum sum.
template <size_t kTokens, typename Out>
DK_VNNI_TARGET void RowsQ4K(const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations* x,
                            const Out& out) {
  constexpr size_t kBytes = sizeof(ggml::BlockQ4_K);
  const size_t blocks = cols / ggml::kSuperBlockElems;
  const __m512i zero = _mm512_setzero_si512();
  const __m512i spread[4] = {Spread<8>(0), Spread<8>(2), Spread<8>(4), Spread<8>(6)};
  StreamPrefetch prefetch(w + r0 * blocks * kBytes);
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * kBytes;
    __m512 acc[kTokens];
    __m256 mins[kTokens];
    for (size_t t = 0; t < kTokens; ++t) {
      acc[t] = _mm512_setzero_ps();
      mins[t] = _mm256_setzero_ps();
    }
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * kBytes;
      prefetch.Through(blk + kBytes);
      const uint32_t a = U32(blk + 4), bw = U32(blk + 8), c = U32(blk + 12);
      const uint32_t sc_lo = a & 0x3F3F3F3Fu, sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
      const uint32_t m_lo = bw & 0x3F3F3F3Fu, m_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((bw >> 2) & 0x30303030u);
      const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(sc_lo, sc_hi, 0, 0)));
      const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(m_lo, m_hi, 0, 0)));
      const __m256 m_dmin = _mm256_mul_ps(m, _mm256_set1_ps(F16(blk + 2)));
      const __m256 d = _mm256_set1_ps(F16(blk));
      __m512i q[4];
      for (size_t j = 0; j < 4; ++j) q[j] = SplitNibbles(blk + 16 + 32 * j);
#pragma GCC unroll 4
      for (size_t t = 0; t < kTokens; ++t) {
        const __m256 dx = _mm256_loadu_ps(x[t].d + b * 8);
        mins[t] = _mm256_fmadd_ps(m_dmin, _mm256_loadu_ps(x[t].sx + b * 8), mins[t]);
        const __m512 scale = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_mul_ps(sc, dx), d));
        const int8_t* xq = x[t].q + b * ggml::kSuperBlockElems;
        for (size_t j = 0; j < 4; ++j) {
          const __m512i dot = _mm512_dpbusd_epi32(zero, q[j], _mm512_load_si512(xq + 64 * j));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(spread[j], scale), acc[t]);
        }
      }
    }
    for (size_t t = 0; t < kTokens; ++t) {
      const __m128 m4 = _mm_add_ps(_mm256_castps256_ps128(mins[t]), _mm256_extractf128_ps(mins[t], 1));
      const __m128 m2 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
      out(t, r, _mm512_reduce_add_ps(acc[t]) - _mm_cvtss_f32(_mm_add_ss(m2, _mm_movehdup_ps(m2))));
    }
  }
}

// Q6_K: per 128-element half, ql's 64 bytes and qh's 32 make four 32-element runs
// (low nibbles of ql[0:32) and ql[32:64), then their high nibbles, each with its
// bit pair of qh); two runs per vpdpbusd. scale_g = d sc_g dx for the 16 sub-blocks;
// the -32 is -32 sum_g scale_g sum16_g(x), one FMA per block.
template <size_t kTokens, typename Out>
DK_VNNI_TARGET void RowsQ6K(const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations* x,
                            const Out& out) {
  constexpr size_t kBytes = sizeof(ggml::BlockQ6_K);
  constexpr size_t kQh = offsetof(ggml::BlockQ6_K, qh), kScales = offsetof(ggml::BlockQ6_K, scales),
                   kD = offsetof(ggml::BlockQ6_K, d);
  const size_t blocks = cols / ggml::kSuperBlockElems;
  const __m512i zero = _mm512_setzero_si512();
  const __m256i low4 = _mm256_set1_epi8(0x0F), high2 = _mm256_set1_epi8(0x30);
  const __m512i pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i spread[4] = {Spread<4>(0), Spread<4>(4), Spread<4>(8), Spread<4>(12)};
  StreamPrefetch prefetch(w + r0 * blocks * kBytes);
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * kBytes;
    __m512 acc[kTokens], offs[kTokens];
    for (size_t t = 0; t < kTokens; ++t) acc[t] = offs[t] = _mm512_setzero_ps();
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * kBytes;
      prefetch.Through(blk + kBytes);
      const __m512 sc =
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScales))));
      const __m512 d = _mm512_set1_ps(F16(blk + kD));
      __m512i q[4];  // lo, hi of each half
      for (size_t n = 0; n < 2; ++n) {
        const uint8_t* ql = blk + 64 * n;
        const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQh + 32 * n));
        const __m256i q0 =
            _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), high2));
        const __m256i q1 =
            _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), high2));
        const __m256i q2 =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(h, high2));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                           _mm256_and_si256(_mm256_srli_epi16(h, 2), high2));
        q[2 * n] = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        q[2 * n + 1] = _mm512_inserti64x4(_mm512_castsi256_si512(q2), q3, 1);
      }
#pragma GCC unroll 4
      for (size_t t = 0; t < kTokens; ++t) {
        const __m512 dx = _mm512_permutexvar_ps(pairs, _mm512_castps256_ps512(_mm256_loadu_ps(x[t].d + b * 8)));
        const __m512 scale = _mm512_mul_ps(_mm512_mul_ps(sc, dx), d);
        offs[t] = _mm512_fmadd_ps(scale, _mm512_loadu_ps(x[t].sum16 + b * 16), offs[t]);
        const int8_t* xq = x[t].q + b * ggml::kSuperBlockElems;
        for (size_t j = 0; j < 4; ++j) {
          const __m512i dot = _mm512_dpbusd_epi32(zero, q[j], _mm512_load_si512(xq + 64 * j));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(spread[j], scale), acc[t]);
        }
      }
    }
    for (size_t t = 0; t < kTokens; ++t) out(t, r, _mm512_reduce_add_ps(acc[t]) - 32.0f * _mm512_reduce_add_ps(offs[t]));
  }
}

// Q5_0 blocks b0, b1 as Q4's RowGroupSums takes a pair ([lo0 hi0 lo1 hi1] nibbles),
// the fifth bits (qh, bit i for element i) added as 0x10 under a byte mask: the
// pair's 64 unsigned values, which vpdpbusd dots with its 64 activations (block b0
// in lanes 0..7, b1 in lanes 8..15). The nibbles: each block's 16 bytes broadcast
// into two 128-bit lanes ([qs0 qs0 qs1 qs1], two broadcast loads), the second of
// each shifted right by 4 under a word mask, then one AND.
DK_VNNI_TARGET inline __m512i Q5PairValues(const uint8_t* b0, const uint8_t* b1) {
  constexpr size_t kQh = offsetof(ggml::BlockQ5_0, qh), kQs = offsetof(ggml::BlockQ5_0, qs);
  const __m512i v = _mm512_mask_broadcast_i32x4(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + kQs))), 0xFF00,
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + kQs)));
  const __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFF00FF00, v, 4), _mm512_set1_epi8(0x0F));
  const __mmask64 fifth = U32(b0 + kQh) | (static_cast<uint64_t>(U32(b1 + kQh)) << 32);
  return _mm512_mask_add_epi8(q, fifth, q, _mm512_set1_epi8(0x10));
}

DK_VNNI_TARGET inline __m512i Q5PairDot(__m512i q, const int8_t* xq) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_load_si512(xq));
}

// One Q5_0 block on 256 bits (an odd last block): its scaled dot product.
DK_VNNI_TARGET inline float Q5BlockSum(const uint8_t* blk, const int8_t* xq, float scale) {
  constexpr size_t kQh = offsetof(ggml::BlockQ5_0, qh), kQs = offsetof(ggml::BlockQ5_0, qs);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQs));
  const __m128i m = _mm_set1_epi8(0x0F);
  __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m)),
                                      _mm_and_si128(_mm_srli_epi16(v, 4), m), 1);
  q = _mm256_or_si256(q, _mm256_maskz_mov_epi8(U32(blk + kQh), _mm256_set1_epi8(0x10)));
  const __m256i dot =
      _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, _mm256_load_si256(reinterpret_cast<const __m256i*>(xq)));
  const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(scale));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// kRows Q5_0 rows from r for kTokens token rows: blocks in pairs (Q5PairValues),
// their scales d dx up to 16 blocks at a time (ChunkScales, one conversion, one
// multiply by dx, a permute per pair; a row's last chunk may be shorter, its lanes
// past the row masked off), the -16 as -16 sum_b d_b dx_b sum_b(x) (one FMA per
// chunk into a vector of its own, folded into the dot products' before the one
// reduction). An odd last block goes on 256 bits. Rows (or token rows) go side by
// side so that their accumulators' FMA chains overlap (one alone waits on the FMA
// latency every pair); each (row, token row) keeps its own accumulators and order,
// its sum as if alone. At K = 640 (Gemma 3: 20 blocks) the pairs after the first
// chunk one by one with scalar scales, and two reductions per row, took most of
// the time in cache.
template <size_t kRows, size_t kTokens, typename Out>
DK_VNNI_TARGET inline void Q5RowGroup(const uint8_t* w, size_t blocks, size_t r, const Q8Activations* x,
                                      StreamPrefetch& stream, const Out& out) {
  constexpr size_t kBytes = sizeof(ggml::BlockQ5_0);
  constexpr size_t kChunk = 16;
  const __m512i pair0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i two = _mm512_set1_epi32(2);
  StreamPrefetch prefetch = stream;  // a local copy the compiler can keep in a register
  const uint8_t* rows[kRows];
  __m512 acc[kRows][kTokens], offs16[kRows][kTokens];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = w + (r + i) * blocks * kBytes;
    for (size_t t = 0; t < kTokens; ++t) acc[i][t] = offs16[i][t] = _mm512_setzero_ps();
  }
  const size_t paired = blocks / 2 * 2;
  for (size_t b = 0; b < paired; b += kChunk) {
    const size_t n = std::min(kChunk, paired - b);
    const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
    __m512 scale[kRows][kTokens];
    for (size_t i = 0; i < kRows; ++i) {
      const uint8_t* chunk = rows[i] + b * kBytes;
      const __m512 d =
          _mm512_maskz_cvtph_ps(lanes, n == kChunk ? ChunkScales<kBytes>(chunk) : ChunkScales<kBytes>(chunk, n));
      for (size_t t = 0; t < kTokens; ++t) {
        scale[i][t] = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(lanes, x[t].d + b));
        offs16[i][t] = _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(lanes, x[t].sx + b), offs16[i][t]);
      }
    }
    __m512i pick = pair0;
    for (size_t p = b; p < b + n; p += 2) {
      prefetch.Through(rows[kRows - 1] + (p + 2) * kBytes);
#pragma GCC unroll 4
      for (size_t i = 0; i < kRows; ++i) {
        const __m512i q = Q5PairValues(rows[i] + p * kBytes, rows[i] + (p + 1) * kBytes);
#pragma GCC unroll 4
        for (size_t t = 0; t < kTokens; ++t) {
          acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Q5PairDot(q, x[t].q + p * 32)),
                                      _mm512_permutexvar_ps(pick, scale[i][t]), acc[i][t]);
        }
      }
      pick = _mm512_add_epi32(pick, two);
    }
  }
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) acc[i][t] = _mm512_fnmadd_ps(_mm512_set1_ps(16.0f), offs16[i][t], acc[i][t]);
  }
  float sums[kRows][kTokens];
  ReduceAddEach(&acc[0][0], kRows * kTokens, &sums[0][0]);
  if (paired < blocks) prefetch.Through(rows[kRows - 1] + blocks * kBytes);
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) {
      if (paired < blocks) {
        const uint8_t* blk = rows[i] + paired * kBytes;
        const float d = F16(blk);
        sums[i][t] += Q5BlockSum(blk, x[t].q + paired * 32, d * x[t].d[paired]) - 16.0f * (d * x[t].sx[paired]);
      }
      out(t, r + i, sums[i][t]);
    }
  }
  stream = prefetch;
}

// Q5_0 rows [r0, r1): two rows side by side for one token row (faster in cache and
// from memory than one; four were faster in cache but slower from memory at short
// rows, docs/gemv-kernels.md), one at a time for several token rows.
template <size_t kTokens, typename Out>
DK_VNNI_TARGET void RowsQ5_0(const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations* x,
                             const Out& out) {
  constexpr size_t kRows = kTokens == 1 ? 2 : 1;
  const size_t blocks = cols / ggml::kBlockElems;
  StreamPrefetch prefetch(w + r0 * blocks * sizeof(ggml::BlockQ5_0));
  size_t r = r0;
  for (; r + kRows <= r1; r += kRows) Q5RowGroup<kRows, kTokens>(w, blocks, r, x, prefetch, out);
  for (; r < r1; ++r) Q5RowGroup<1, kTokens>(w, blocks, r, x, prefetch, out);
}

// Rows [r0, r1) of `format` for kTokens token rows.
template <size_t kTokens, typename Out>
void Dispatch(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations* x,
              const Out& out) {
  switch (format) {
    case WeightFormat::kQ5_0: return RowsQ5_0<kTokens>(w, cols, r0, r1, x, out);
    case WeightFormat::kQ4_K: return RowsQ4K<kTokens>(w, cols, r0, r1, x, out);
    case WeightFormat::kQ6_K: return RowsQ6K<kTokens>(w, cols, r0, r1, x, out);
    default: break;  // not one of these formats (gemv_quant.cc dispatches)
  }
}

template <typename YT>
void SingleRow(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1, const Q8Activations& x,
               YT* y) {
  Dispatch<1>(format, w, cols, r0, r1, &x, [y](size_t, size_t r, float v) { Store(v, y + r); });
}

}  // namespace

void KQuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                    const Q8Activations& x, float* y) {
  SingleRow(format, w, cols, r0, r1, x, y);
}
void KQuantRowsVnni(WeightFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                    const Q8Activations& x, bf16* y) {
  SingleRow(format, w, cols, r0, r1, x, y);
}

void KQuantRowsVnniTokens(WeightFormat format, const uint8_t* w, size_t cols, size_t n, const Q8Activations* x,
                          size_t m, float* out, size_t out_stride) {
  // At most 5 in one tile: past that these kernels run out of registers, and m = 8
  // in one tile was slower than two tiles of 4.
  ForTokenTiles<4>(m, OnePassTokens(cols, 5), [&](auto tokens, size_t t0) {
    Dispatch<tokens>(format, w, cols, 0, n, x + t0, [&](size_t i, size_t r, float v) { out[(t0 + i) * out_stride + r] = v; });
  });
}

const float* Sums16(const int8_t* q, size_t cols, KernelScratch& scratch, int thread) {
  float* sums = scratch.Get<float>(thread, kQuantSums16, cols / 16);
  for (size_t g = 0; g < cols / 16; ++g) {
    int s = 0;
    for (size_t i = 0; i < 16; ++i) s += q[16 * g + i];
    sums[g] = static_cast<float>(s);
  }
  return sums;
}

}  // namespace dk::kernels::internal
