// Internal: the loop orders the register-blocked multi-row kernels share
// (gemv_avx512bf16.cc, gemv_x12.cc, gemv_quant_vnni.cc): which tiles of weight rows x
// token rows they run, in what order (no row's sum depends on the order), and how the
// bf16 tiles park their accumulators between column slices.
#ifndef DK_KERNELS_GEMV_GEMM_TILES_H_
#define DK_KERNELS_GEMV_GEMM_TILES_H_

#include <immintrin.h>

// GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized on its own locals.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace dk::kernels::internal {

template <size_t N>
using Count = std::integral_constant<size_t, N>;

// Token rows left over after the kTokens-row tiles: two at a time (a weight load then
// still feeds two accumulators), then one. fn(Count<tokens>, t).
template <size_t kTokens, typename Fn>
inline void ForLeftoverTokens(size_t t, size_t m, const Fn& fn) {
  if constexpr (kTokens > 2) {
    for (; t + 2 <= m; t += 2) fn(Count<2>(), t);
  }
  for (; t < m; ++t) fn(Count<1>(), t);
}

// Token rows [0, m) as kTokens-row tiles, the rest as ForLeftoverTokens:
// fn(Count<tokens>, t).
template <size_t kTokens, typename Fn>
inline void ForTokenBlocks(size_t m, const Fn& fn) {
  size_t t = 0;
  for (; t + kTokens <= m; t += kTokens) fn(Count<kTokens>(), t);
  ForLeftoverTokens<kTokens>(t, m, fn);
}

// Rows [0, n) kRows at a time, the rest one at a time: fn(Count<rows>, r).
template <size_t kRows, typename Fn>
inline void ForRowGroups(size_t n, const Fn& fn) {
  size_t r = 0;
  for (; r + kRows <= n; r += kRows) fn(Count<kRows>(), r);
  for (; r < n; ++r) fn(Count<1>(), r);
}

// Rows [0, n) x token rows [0, m) in kRows x kTokens tiles, the rows as ForRowGroups,
// the token rows as ForTokenBlocks: tile(Count<rows>, Count<tokens>, r, t).
template <size_t kRows, size_t kTokens, typename Tile>
inline void ForRowTokenTiles(size_t n, size_t m, const Tile& tile) {
  ForTokenBlocks<kTokens>(m, [&](auto tokens, size_t t) {
    ForRowGroups<kRows>(n, [&](auto rows, size_t r) { tile(rows, tokens, r, t); });
  });
}

// Token rows of a draft check (k drafts + 1) that the block formats' kernels take in
// one tile at most.
constexpr size_t kMaxOnePassTokens = 8;

// The most token rows of `cols` int8 activations one tile takes: all of them are read
// once per weight row, so past about 40 KiB (L1 is 48 KiB) they stream from L2 (at
// K = 8192, 8 rows in one tile were slower than two tiles of 4).
constexpr size_t OnePassTokens(size_t cols, size_t most = kMaxOnePassTokens) {
  return std::max<size_t>(1, std::min(most, size_t{40960} / cols));
}

// Token rows [0, m) in tiles for the block formats' register-blocked kernels:
// m <= one_pass (at most kMaxOnePassTokens) as one tile of all m, so that each
// weight row is loaded, unpacked and its scales converted once per call (a second
// tile re-runs all of that per weight byte, and split 4 + 1 a draft check of 5 rows
// cost over twice the GEMV); more as ForTokenBlocks.
// fn(Count<tokens>, t).
template <size_t kTokens, typename Fn>
inline void ForTokenTiles(size_t m, size_t one_pass, const Fn& fn) {
  static_assert(kTokens <= kMaxOnePassTokens);
  if (m <= one_pass) {
    switch (m) {
      case 1: return fn(Count<1>(), 0);
      case 2: return fn(Count<2>(), 0);
      case 3: return fn(Count<3>(), 0);
      case 4: return fn(Count<4>(), 0);
      case 5: return fn(Count<5>(), 0);
      case 6: return fn(Count<6>(), 0);
      case 7: return fn(Count<7>(), 0);
      case 8: return fn(Count<8>(), 0);
      default: break;
    }
  }
  ForTokenBlocks<kTokens>(m, fn);
}

// The accumulator slots ForPanelSlices numbers for m token rows.
constexpr size_t PanelSlots(size_t m, size_t rows_per_tile, size_t tokens_per_tile) {
  return (m / tokens_per_tile + tokens_per_tile) * (8 / rows_per_tile);
}

// One 8-row panel (n <= 8 rows real; a tile past them computes zero padding) x m
// token rows, over `units` column units in slices of `slice` units (one slice when
// units <= 2 * slice, so that only long rows pay for parking accumulators): per slice
// every kRows x kTokens tile (token rows as ForTokenBlocks),
// tile(Count<tokens>, u0, u1, first, last, r, t, slot); a tile's accumulators wait
// between slices in slot `slot` (< PanelSlots(m, kRows, kTokens)).
template <size_t kRows, size_t kTokens, typename Tile>
inline void ForPanelSlices(size_t units, size_t slice, size_t n, size_t m, const Tile& tile) {
  if (units <= 2 * slice) slice = units;
  for (size_t u0 = 0; u0 < units; u0 += slice) {
    const size_t u1 = std::min(units, u0 + slice);
    size_t slot = 0;
    ForTokenBlocks<kTokens>(m, [&](auto tokens, size_t t) {
      for (size_t r = 0; r < n; r += kRows) tile(tokens, u0, u1, u0 == 0, u1 == units, r, t, slot++);
    });
  }
}

#define DK_GEMM_TILE_TARGET __attribute__((target("avx512f")))

// A bf16 tile's accumulator pairs (chunk c into acc0 when c is even, acc1 when odd) at
// the start of a column slice: zero for the first, else as parked in `mem`.
template <size_t kRows, size_t kTokens>
DK_GEMM_TILE_TARGET inline void StartTile(bool first, const __m512* mem, __m512 (*acc0)[kTokens],
                                          __m512 (*acc1)[kTokens]) {
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) {
      acc0[i][t] = first ? _mm512_setzero_ps() : mem[2 * (i * kTokens + t)];
      acc1[i][t] = first ? _mm512_setzero_ps() : mem[2 * (i * kTokens + t) + 1];
    }
  }
}

// At the end of a slice: parked in `mem` (a store and a reload change no bit), or
// after the last slice the single-row kernels' sum, reduce(acc0 + acc1), into out[t *
// out_stride + r + i] for the rows r + i < n.
template <size_t kRows, size_t kTokens>
DK_GEMM_TILE_TARGET inline void FinishTile(bool last, size_t r, size_t n, __m512 (*acc0)[kTokens],
                                           __m512 (*acc1)[kTokens], __m512* mem, float* out, size_t out_stride) {
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t t = 0; t < kTokens; ++t) {
      if (!last) {
        mem[2 * (i * kTokens + t)] = acc0[i][t];
        mem[2 * (i * kTokens + t) + 1] = acc1[i][t];
      } else if (r + i < n) {
        out[t * out_stride + r + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i][t], acc1[i][t]));
      }
    }
  }
}

// _mm512_reduce_add_ps of four vectors at once, bit for bit: the same lane pairings
// (256-bit halves, then 128-bit halves, then lanes (0, 2) and (1, 3), then (0, 1)),
// each step one add for all four; lane j of the result is v[j]'s sum (v[j] for j >= n
// (n <= 4) is not read; its lane is 0). Each vector alone costs about seven shuffles
// and adds, which at small m and short rows (K = 576: one 16-block chunk a row) was
// a large share of a tile's work.
DK_GEMM_TILE_TARGET inline __m128 ReduceAdd4(const __m512* v, size_t n) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 a = v[0], b = n > 1 ? v[1] : zero, c = n > 2 ? v[2] : zero, d = n > 3 ? v[3] : zero;
  // [a's 8 sums of halves, b's], [c's, d's]
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
  // 128-bit quarter j: vector j's four sums of quarters
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  const __m512 p = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4E));  // lanes (0 + 2, 1 + 3) of each quarter
  const __m512 r = _mm512_add_ps(p, _mm512_permute_ps(p, 0xB1));  // lane 0 of quarter j: vector j's sum
  const __m512i lane0s = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(lane0s, r));
}

// Lane j < n (n <= 8) of the result: _mm512_reduce_add_ps(v[j]) (ReduceAdd4).
DK_GEMM_TILE_TARGET inline __m256 ReduceAddLanes(const __m512* v, size_t n) {
  const __m128 lo = ReduceAdd4(v, std::min<size_t>(n, 4));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), n > 4 ? ReduceAdd4(v + 4, n - 4) : _mm_setzero_ps(), 1);
}

// out[j] = _mm512_reduce_add_ps(v[j]) for j < n (ReduceAdd4).
DK_GEMM_TILE_TARGET inline void ReduceAddEach(const __m512* v, size_t n, float* out) {
  for (size_t j = 0; j < n; j += 4) {
    alignas(16) float sums[4];
    _mm_store_ps(sums, ReduceAdd4(v + j, std::min<size_t>(4, n - j)));
    for (size_t k = 0; k < 4 && j + k < n; ++k) out[j + k] = sums[k];
  }
}

#undef DK_GEMM_TILE_TARGET

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMM_TILES_H_
