#include "kernels/gemv/gemm_q4_vnni.h"

#include <immintrin.h>

// GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized (and, inlined into a
// loop over an array of accumulators, -Wuninitialized) on its own locals.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstring>

#include "kernels/gemv/gemm_tiles.h"
#include "kernels/gemv/gemv_chunk_scales.h"
#include "util/check.h"
#include "util/ggml_blocks.h"

namespace dk::kernels::internal {
namespace {

#define DK_VNNI_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

// The helpers below are copies of gemv_quant_vnni.cc's (its anonymous namespace):
// the sums must be those of its single-row Q4 kernels, operation for operation.

DK_VNNI_TARGET inline float F16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline uint16_t U16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

DK_VNNI_TARGET inline float ReduceAdd(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <WeightFormat F>
constexpr size_t QsOffset() {
  return F == WeightFormat::kQ4_1 ? offsetof(ggml::BlockQ4_1, qs) : offsetof(ggml::BlockQ4_0, qs);
}
constexpr size_t kMinOffset = offsetof(ggml::BlockQ4_1, m);  // Q4_1's f16 m
constexpr size_t kChunk = 16;                                // blocks per scale load

// One block's 32 nibbles dotted with x's block b on 256-bit vectors (an odd last block).
template <WeightFormat F>
DK_VNNI_TARGET inline __m256i BlockDot(const uint8_t* blk, const Q8Activations& x, size_t b) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + QsOffset<F>()));
  const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, mask)),
                                            _mm_and_si128(_mm_srli_epi16(v, 4), mask), 1);
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), q,
                             _mm256_load_si256(reinterpret_cast<const __m256i*>(x.q + b * 32)));
}

// Blocks b and b + 1 (b's at b0) as RowGroupSums lays them out: [b's 32 values, b + 1's].
DK_VNNI_TARGET inline __m512i PairNibbles(const uint8_t* q0, const uint8_t* q1) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m512i halves = _mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7);  // [lo0 lo1 hi0 hi1] -> [lo0 hi0 lo1 hi1]
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q0))),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(q1)), 1);
  const __m256i lo = _mm256_and_si256(v, mask);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
  return _mm512_permutexvar_epi64(halves, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
}

// The activation scales of the pairs of blocks after the last whole chunk, for up to
// eight token rows side by side: pair p's lanes 2t and 2t + 1 hold token row t's
// blocks b and b + 1 (dx in d, d * sum in sx), so that one multiply and one FMA per
// weight row and pair serve every token row. The same for every weight row of a call.
struct TailScales {
  __m512 d[kChunk / 2], sx[kChunk / 2];
};

template <size_t kTokens>
DK_VNNI_TARGET inline void PrepareTailScales(size_t begin, size_t blocks, const Q8Activations* x, TailScales* s) {
  static_assert(kTokens <= 8);
  for (size_t b = begin, p = 0; b + 2 <= blocks; b += 2, ++p) {
    alignas(64) float d[16] = {}, sx[16] = {};
    for (size_t t = 0; t < kTokens; ++t) {
      d[2 * t] = x[t].d[b], d[2 * t + 1] = x[t].d[b + 1];
      sx[2 * t] = x[t].sx[b], sx[2 * t + 1] = x[t].sx[b + 1];
    }
    s->d[p] = _mm512_load_ps(d);
    s->sx[p] = _mm512_load_ps(sx);
  }
}

// Two f16 fields (block b's at p, b + 1's kBlock on) as floats in every lane pair.
template <size_t kBlock>
DK_VNNI_TARGET inline __m512 PairF16(const uint8_t* p) {
  const __m128 v = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(U16(p)), U16(p + kBlock), 1));
  return _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_castps_pd(v)));
}

// RowGroupSums<F> (blocks [begin, blocks)) of rows r + i for kTokens token rows:
// lane t of sums[i]. Each pair's nibbles are unpacked once per weight row and its
// scales multiplied once for all token rows (`tail`, from PrepareTailScales); each
// token row's FMAs, odd last block and sum are RowGroupSums', lane for lane.
template <WeightFormat F, size_t kRows, size_t kTokens>
DK_VNNI_TARGET inline void Q4SumsTokens(const uint8_t* w, size_t blocks, size_t r, size_t begin,
                                        const Q8Activations* x, const TailScales& tail, __m256* sums) {
  constexpr size_t kBlock = formats::BlockBytes(F);
  constexpr size_t kQs = QsOffset<F>();
  const __m512i zero = _mm512_setzero_si512();
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[kRows][kTokens];
  __m512 min_acc[kRows];  // lanes 2t, 2t + 1: token row t's m dx sum(q_x) (Q4_1) or d dx sum(q_x) (Q4_0)
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) acc[i][t] = _mm512_setzero_ps();
    min_acc[i] = _mm512_setzero_ps();
  }
  size_t b = begin;
  for (size_t p = 0; b + 2 <= blocks; b += 2, ++p) {
    for (size_t i = 0; i < kRows; ++i) {
      const uint8_t* b0 = w + (r + i) * blocks * kBlock + b * kBlock;
      const __m512i q = PairNibbles(b0 + kQs, b0 + kBlock + kQs);
      const __m512 dw = PairF16<kBlock>(b0);
      const __m512 scales = _mm512_mul_ps(dw, tail.d[p]);
      min_acc[i] = _mm512_fmadd_ps(F == WeightFormat::kQ4_1 ? PairF16<kBlock>(b0 + kMinOffset) : dw, tail.sx[p],
                                   min_acc[i]);
      for (size_t t = 0; t < kTokens; ++t) {
        const __m512i pick = _mm512_add_epi32(spread, _mm512_set1_epi32(static_cast<int>(2 * t)));
        const __m512i dot = _mm512_dpbusd_epi32(zero, q, _mm512_load_si512(x[t].q + b * 32));
        acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, scales), acc[i][t]);
      }
    }
  }
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  for (size_t i = 0; i < kRows; ++i) {
    alignas(32) float odd[8] = {};
    if (b < blocks) {
      for (size_t t = 0; t < kTokens; ++t) {
        const uint8_t* blk = w + (r + i) * blocks * kBlock + b * kBlock;
        odd[t] = ReduceAdd(_mm256_mul_ps(_mm256_cvtepi32_ps(BlockDot<F>(blk, x[t], b)),
                                         _mm256_set1_ps(F16(blk) * x[t].d[b])));
        if constexpr (F == WeightFormat::kQ4_0) odd[t] -= 8.0f * (F16(blk) * x[t].sx[b]);
        if constexpr (F == WeightFormat::kQ4_1) odd[t] += F16(blk + kMinOffset) * x[t].sx[b];
      }
    }
    const __m512 pairs = _mm512_add_ps(min_acc[i], _mm512_movehdup_ps(min_acc[i]));
    __m256 mins = _mm512_castps512_ps256(_mm512_permutexvar_ps(evens, pairs));
    if constexpr (F == WeightFormat::kQ4_0) mins = _mm256_mul_ps(mins, _mm256_set1_ps(-8.0f));
    sums[i] = _mm256_add_ps(_mm256_add_ps(ReduceAddLanes(acc[i], kTokens), _mm256_load_ps(odd)), mins);
  }
}

// The offsets' share of rows[i] over the chunked blocks for every token row (lane t
// of min_sums[i]): m * sx (Q4_1) or d * sx (Q4_0) per chunk, RowGroupQ4Chunked's
// min_acc FMAs in its order, reduced as it reduces them (times -8 for Q4_0). Apart
// from the dot products, so that its accumulators need no registers in their loop.
template <WeightFormat F, size_t kRows, size_t kTokens>
DK_VNNI_TARGET inline void Q4MinSums(const uint8_t* const* rows, size_t chunked, const Q8Activations* x,
                                     __m256* min_sums) {
  constexpr size_t kBlock = formats::BlockBytes(F);
  constexpr size_t kMinField = F == WeightFormat::kQ4_1 ? kMinOffset : 0;
  __m512 min_acc[kRows][kTokens];
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) min_acc[i][t] = _mm512_setzero_ps();
  }
  for (size_t b = 0; b < chunked; b += kChunk) {
    for (size_t i = 0; i < kRows; ++i) {
      const __m512 mins = _mm512_cvtph_ps(ChunkScales<kBlock, kMinField>(rows[i] + b * kBlock));
      for (size_t t = 0; t < kTokens; ++t) {
        min_acc[i][t] = _mm512_fmadd_ps(mins, _mm512_loadu_ps(x[t].sx + b), min_acc[i][t]);
      }
    }
  }
  for (size_t i = 0; i < kRows; ++i) {
    min_sums[i] = ReduceAddLanes(min_acc[i], kTokens);
    if constexpr (F == WeightFormat::kQ4_0) min_sums[i] = _mm256_mul_ps(min_sums[i], _mm256_set1_ps(-8.0f));
  }
}

// Lanes t < kTokens of row i's sums into out[t * out_stride + r + i].
template <size_t kRows, size_t kTokens>
DK_VNNI_TARGET inline void StoreTokens(const __m256* sums, size_t r, float* out, size_t out_stride) {
  for (size_t i = 0; i < kRows; ++i) {
    alignas(32) float v[8];
    _mm256_store_ps(v, sums[i]);
    for (size_t t = 0; t < kTokens; ++t) out[t * out_stride + r + i] = v[t];
  }
}

// RowGroupQ4Chunked<F> of rows r + i for kTokens token rows x[t]: each quad of
// blocks' nibble vector is loaded and split into low and high nibbles once per
// weight row, then dotted with every token row's quad activations. The scales come
// in as that kernel takes them (ChunkScales, one conversion, one multiply by the
// chunk's dx per token row; no gather, which is microcoded on AMD Zen), the offsets'
// share apart (Q4MinSums), which lets one weight row serve up to kMaxOnePassTokens
// token rows with acc and scale in registers. out[t * out_stride + r + i].
template <WeightFormat F, size_t kRows, size_t kTokens>
DK_VNNI_TARGET void Q4ChunkedTokens(const uint8_t* w, size_t blocks, size_t r, const Q8Activations* x,
                                    const TailScales& tail, float* out, size_t out_stride) {
  constexpr size_t kBlock = formats::BlockBytes(F);
  constexpr size_t kQs = QsOffset<F>();
  const size_t chunked = blocks / kChunk * kChunk;
  __m256 rest[kRows];
  for (size_t i = 0; i < kRows; ++i) rest[i] = _mm256_setzero_ps();
  if (chunked < blocks) Q4SumsTokens<F, kRows, kTokens>(w, blocks, r, chunked, x, tail, rest);
  if (chunked == 0) return StoreTokens<kRows, kTokens>(rest, r, out, out_stride);  // RowGroup: the sums alone
  const __m512i zero = _mm512_setzero_si512();
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i quad0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i four = _mm512_set1_epi32(4);
  const uint8_t* rows[kRows];
  __m512 acc[kRows][kTokens];
  for (size_t i = 0; i < kRows; ++i) {
    rows[i] = w + (r + i) * blocks * kBlock;
    for (size_t t = 0; t < kTokens; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  __m256 min_sums[kRows];
  Q4MinSums<F, kRows, kTokens>(rows, chunked, x, min_sums);
  for (size_t b = 0; b < chunked; b += kChunk) {
    __m512 scale[kRows][kTokens];
    for (size_t i = 0; i < kRows; ++i) {
      PrefetchChunk<kBlock>(rows[i] + b * kBlock);
      const __m512 d = _mm512_cvtph_ps(ChunkScales<kBlock>(rows[i] + b * kBlock));
      for (size_t t = 0; t < kTokens; ++t) scale[i][t] = _mm512_mul_ps(d, _mm512_loadu_ps(x[t].d + b));
    }
    __m512i pick = quad0;
#pragma GCC unroll 4
    for (size_t quad = 0; quad < kChunk / 4; ++quad) {
      const size_t b0 = b + 4 * quad;
#pragma GCC unroll 2
      for (size_t i = 0; i < kRows; ++i) {
        const uint8_t* q = rows[i] + b0 * kBlock + kQs;
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + kBlock)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * kBlock)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 3 * kBlock)), 3);
        const __m512i lo = _mm512_and_si512(v, mask);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
#pragma GCC unroll 8
        for (size_t t = 0; t < kTokens; ++t) {
          const __m512i xlo = _mm512_load_si512(x[t].quad + b0 * 32);
          const __m512i xhi = _mm512_load_si512(x[t].quad + b0 * 32 + 64);
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, xlo), hi, xhi);
          acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, scale[i][t]), acc[i][t]);
        }
      }
      pick = _mm512_add_epi32(pick, four);
    }
  }
  __m256 sums[kRows];
  for (size_t i = 0; i < kRows; ++i) {
    sums[i] = _mm256_add_ps(_mm256_add_ps(ReduceAddLanes(acc[i], kTokens), min_sums[i]), rest[i]);
  }
  StoreTokens<kRows, kTokens>(sums, r, out, out_stride);
}

// Token rows per tile past kMaxOnePassTokens (prefill), and weight rows per tile:
// two while a tile's accumulators and scales (2 x kTokens x 2 registers) leave room.
constexpr size_t kTileTokens = 4;
constexpr size_t RowsPerTile(size_t tokens) { return tokens <= 1 ? 2 : 1; }

template <WeightFormat F>
void RowsTokens(const uint8_t* w, size_t cols, size_t n, const Q8Activations* x, size_t m, float* out,
                size_t out_stride) {
  const size_t blocks = cols / ggml::kBlockElems;
  ForTokenTiles<kTileTokens>(m, OnePassTokens(cols), [&](auto tokens, size_t t) {
    TailScales tail;
    PrepareTailScales<tokens>(blocks / kChunk * kChunk, blocks, x + t, &tail);
    ForRowGroups<RowsPerTile(tokens)>(n, [&](auto rows, size_t r) {
      Q4ChunkedTokens<F, rows, tokens>(w, blocks, r, x + t, tail, out + t * out_stride, out_stride);
    });
  });
}

#undef DK_VNNI_TARGET

}  // namespace

void Q4RowsVnniTokens(WeightFormat format, const uint8_t* w, size_t cols, size_t n, const Q8Activations* x,
                      size_t m, float* out, size_t out_stride) {
  DK_CHECK(format == WeightFormat::kQ4_0 || format == WeightFormat::kQ4_1);
  if (format == WeightFormat::kQ4_0) return RowsTokens<WeightFormat::kQ4_0>(w, cols, n, x, m, out, out_stride);
  RowsTokens<WeightFormat::kQ4_1>(w, cols, n, x, m, out, out_stride);
}

}  // namespace dk::kernels::internal
