// Internal (AVX512BW): one f16 field (d, or Q4_1's m) of 16 consecutive blocks of
// Q8_0, Q5_0, Q4_0 or Q4_1, for the chunked AVX512-VNNI rows of gemv_quant_vnni.cc and
// gemv_kquant_vnni.cc. Without a gather: vpgatherdd of 16 lanes is microcoded and
// slow on AMD Zen cores (on Zen 5 it cost the Q8_0 rows more than a third of their
// in-cache rate), while these loads hit the lines the dot products read anyway.
#ifndef DK_KERNELS_GEMV_GEMV_CHUNK_SCALES_H_
#define DK_KERNELS_GEMV_GEMV_CHUNK_SCALES_H_

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace dk::kernels::internal {

// Block k's field (kField bytes into the block) is at byte k kBlock + kField of the
// chunk, an even offset, so a word. The chunk is read in windows of 128 bytes (two
// vectors of 32 words); window m holds the fields that lie in [128 m, 128 m + 128).
template <size_t kBlock, size_t kField>
struct ChunkScaleLayout {
  static_assert(kBlock % 2 == 0 && kField % 2 == 0 && kField + 2 <= kBlock && kBlock <= 128);
  static constexpr size_t kChunk = 16;
  static constexpr size_t kWindows = ((kChunk - 1) * kBlock + kField + 2 + 127) / 128;

  static constexpr size_t Window(size_t k) { return (k * kBlock + kField) / 128; }
  // Lane k of the two-table word permute: the field's word within its window.
  static constexpr std::array<int16_t, 32> Index() {
    std::array<int16_t, 32> idx{};
    for (size_t k = 0; k < kChunk; ++k) idx[k] = static_cast<int16_t>((k * kBlock + kField) / 2 % 64);
    return idx;
  }
  // The lanes whose field lies in window m.
  static constexpr uint32_t Lanes(size_t m) {
    uint32_t lanes = 0;
    for (size_t k = 0; k < kChunk; ++k) lanes |= (Window(k) == m ? 1u : 0u) << k;
    return lanes;
  }
  // Bytes of n blocks in [start, start + 64), so that no load reads past them.
  static constexpr size_t Valid(size_t n, size_t start) {
    return start >= n * kBlock ? 0 : n * kBlock - start < 64 ? n * kBlock - start : 64;
  }
};

template <size_t kBlock, size_t kField>
__attribute__((target("avx512f,avx512bw"))) inline __m512i ChunkScaleLoad(const uint8_t* p, size_t n,
                                                                          size_t start) {
  const size_t valid = ChunkScaleLayout<kBlock, kField>::Valid(n, start);
  if (valid == 64) return _mm512_loadu_si512(p + start);
  return _mm512_maskz_loadu_epi8(valid == 0 ? 0 : ~uint64_t{0} >> (64 - valid), p + start);
}

// The field of the first n <= 16 blocks at p as f16 words, block k in word k (words
// n..15 undefined; no byte past the n blocks is read). One word permute of two vectors per
// 128-byte window that holds one of them and one word blend per window after the
// first. With n = 16 known at compile time every load is a plain one.
template <size_t kBlock, size_t kField = 0>
__attribute__((target("avx512f,avx512bw"))) inline __m256i ChunkScales(const uint8_t* p, size_t n = 16) {
  using L = ChunkScaleLayout<kBlock, kField>;
  alignas(64) static constexpr std::array<int16_t, 32> kIndex = L::Index();
  const __m512i idx = _mm512_load_si512(kIndex.data());
  __m512i r = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (size_t m = 0; m < L::kWindows; ++m) {
    if (m > L::Window(n - 1)) break;  // no field of the n blocks in this window
    const __m512i part = _mm512_permutex2var_epi16(ChunkScaleLoad<kBlock, kField>(p, n, 128 * m), idx,
                                                   ChunkScaleLoad<kBlock, kField>(p, n, 128 * m + 64));
    r = m == 0 ? part : _mm512_mask_blend_epi16(L::Lanes(m), r, part);
  }
  return _mm512_castsi512_si256(r);
}

// Software prefetch distance of the chunked kernels: each row prefetches the cache
// lines of its 16-block chunk this many bytes ahead (into the next rows once past its
// end; prefetches past the weights are harmless) before it loads the chunk's scales.
// The hardware prefetcher alone left the scale loads waiting on DRAM; of the
// distances tried, 4-5 KB was near the best for Q8_0 and Q4_1 alike (the runs, dated:
// docs/gemv-kernels.md).
constexpr size_t kChunkPrefetchAhead = 4096;

template <size_t kBlock>
__attribute__((target("avx512f"))) inline void PrefetchChunk(const uint8_t* chunk) {
  const char* p = reinterpret_cast<const char*>(chunk) + kChunkPrefetchAhead;
  for (size_t line = 0; line < 16 * kBlock; line += 64) _mm_prefetch(p + line, _MM_HINT_T0);
}

// Software prefetch of a thread's weight stream (its rows are consecutive), each
// cache line once, kChunkPrefetchAhead bytes ahead of the block being read: as
// PrefetchChunk, without leaving out the blocks after a row's last whole chunk (at
// K = 576, 68 of a Q8_0 row's 612 bytes) or prefetching a line twice. Prefetches
// past the weights are harmless.
class StreamPrefetch {
 public:
  explicit StreamPrefetch(const uint8_t* start)
      : next_((reinterpret_cast<uintptr_t>(start) + kChunkPrefetchAhead) & ~uintptr_t{63}) {}
  // Prefetches the lines up to `end` + kChunkPrefetchAhead.
  void Through(const uint8_t* end) {
    for (const uintptr_t stop = reinterpret_cast<uintptr_t>(end) + kChunkPrefetchAhead; next_ < stop; next_ += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next_), _MM_HINT_T0);
    }
  }

 private:
  uintptr_t next_;
};

}  // namespace dk::kernels::internal

#endif  // DK_KERNELS_GEMV_GEMV_CHUNK_SCALES_H_
