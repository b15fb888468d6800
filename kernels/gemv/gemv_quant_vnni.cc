#include "kernels/gemv/gemv_quant_vnni.h"

#include <immintrin.h>

#include <cstring>

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

DK_VNNI_TARGET inline float ReduceAdd(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 bytes of nibbles -> the block's 32 unsigned values in element order (low
// nibbles are elements 0..15, high nibbles 16..31).
DK_VNNI_TARGET inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i lo = _mm_and_si128(v, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

template <QuantFormat F, typename YT>
DK_VNNI_TARGET void Rows(const uint8_t* w, size_t cols, size_t r0, size_t r1,
                         const Q8Activations& x, YT* y) {
  constexpr size_t kBlock = F == QuantFormat::kQ8_0   ? sizeof(ggml::BlockQ8_0)
                            : F == QuantFormat::kQ4_0 ? sizeof(ggml::BlockQ4_0)
                                                      : sizeof(ggml::BlockQ4_1);
  const size_t blocks = cols / ggml::kBlockElems;
  const __m256i zero = _mm256_setzero_si256();
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * kBlock;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float min_acc = 0.0f;  // Q4_1: sum_b m_b * dx_b * sum(q_x)
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * kBlock;
      const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
      __m256i dot;
      float dw;
      if constexpr (F == QuantFormat::kQ8_0) {
        const auto* q8 = reinterpret_cast<const ggml::BlockQ8_0*>(blk);
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8->qs));
        const __m256i xs = _mm256_mask_sub_epi8(xq, _mm256_movepi8_mask(wq), zero, xq);
        dot = _mm256_dpbusd_epi32(zero, _mm256_abs_epi8(wq), xs);
        dw = F16(q8->d);
      } else if constexpr (F == QuantFormat::kQ4_0) {
        const auto* q4 = reinterpret_cast<const ggml::BlockQ4_0*>(blk);
        const __m256i init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * x.sum[b]));
        dot = _mm256_dpbusd_epi32(init, Nibbles(q4->qs), xq);
        dw = F16(q4->d);
      } else {
        const auto* q4 = reinterpret_cast<const ggml::BlockQ4_1*>(blk);
        dot = _mm256_dpbusd_epi32(zero, Nibbles(q4->qs), xq);
        dw = F16(q4->d);
        min_acc += F16(q4->m) * (x.d[b] * static_cast<float>(x.sum[b]));
      }
      const __m256 scale = _mm256_set1_ps(dw * x.d[b]);
      if (b % 2 == 0) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc0);
      } else {
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc1);
      }
    }
    Store(ReduceAdd(_mm256_add_ps(acc0, acc1)) + min_acc, y + r);
  }
}

template <typename YT>
void Dispatch(QuantFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
              const Q8Activations& x, YT* y) {
  switch (format) {
    case QuantFormat::kQ8_0:
      return Rows<QuantFormat::kQ8_0>(w, cols, r0, r1, x, y);
    case QuantFormat::kQ4_0:
      return Rows<QuantFormat::kQ4_0>(w, cols, r0, r1, x, y);
    case QuantFormat::kQ4_1:
      return Rows<QuantFormat::kQ4_1>(w, cols, r0, r1, x, y);
  }
}

}  // namespace

bool CpuHasAvx512Vnni() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("fma");
  }();
  return has;
}

void QuantRowsVnni(QuantFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                   const Q8Activations& x, float* y) {
  Dispatch(format, w, cols, r0, r1, x, y);
}
void QuantRowsVnni(QuantFormat format, const uint8_t* w, size_t cols, size_t r0, size_t r1,
                   const Q8Activations& x, bf16* y) {
  Dispatch(format, w, cols, r0, r1, x, y);
}

}  // namespace dk::kernels::internal
