// Test helper: one random weight matrix in every weight format, the single-row
// GEMV each format's fused and multi-row kernels must match bit for bit, the
// bit-for-bit comparison, and the configurations they are checked in (tests only).
#ifndef DK_KERNELS_GEMV_GEMV_TEST_MATRIX_H_
#define DK_KERNELS_GEMV_GEMV_TEST_MATRIX_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fused.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_quant_ref.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/gemv/quantize.h"
#include "kernels/testing/targets.h"

namespace dk::kernels::testing {

// One weight matrix in a format, from random bf16 values.
struct Matrix {
  size_t rows = 0, cols = 0;
  std::vector<bf16> rowmajor;
  PackedGemvWeights packed;
  std::vector<uint8_t> x12;
  std::vector<uint8_t> blocks;

  // Random values with, now and then, four in a row far outside their range (tiny,
  // large), so that some x12 blocks need more than 8 exponents and go raw.
  Matrix(size_t r, size_t c, uint32_t seed) : rows(r), cols(c), rowmajor(RandomBf16(r * c, seed, 0.2f)) {
    const uint16_t spikes[] = {0x2000, 0x0a00, 0x3f80, 0xc2c8};
    std::mt19937 rng(seed);
    for (size_t i = 0; i + 4 <= rowmajor.size(); ++i) {
      if (rng() % 3000 == 0) {
        for (size_t j = 0; j < 4; ++j) rowmajor[i + j] = bf16{spikes[j]};
      }
    }
  }
  FusedWeight As(WeightFormat f) {
    if (f == WeightFormat::kBf16RowMajor) return {rowmajor.data(), rows};
    if (f == WeightFormat::kBf16Packed) {
      if (packed.rows == 0) packed = PackGemvWeights(rowmajor.data(), rows, cols);
      return {packed.data.data(), rows};
    }
    if (f == WeightFormat::kBf16X12) {
      x12.resize(X12GemvBytes(rows, cols));
      PackX12GemvWeights(rowmajor.data(), rows, cols, x12.data());
      return {x12.data(), rows};
    }
    if (CanQuantizeWeights(f)) {
      blocks.resize(rows * formats::RowBytes(f, cols));
      QuantizeWeights(f, rowmajor.data(), rows, cols, blocks.data());
    } else {  // a format only read as a file stores it: random blocks
      blocks = ref::RandomBlocks(f, rows, cols, static_cast<uint32_t>(rowmajor[0].bits));
    }
    return {blocks.data(), rows};
  }
};

// The single-row GEMV of a format (the unfused launch the fused kernels replace).
template <typename YT>
inline void UnfusedGemv(WeightFormat f, const FusedWeight& w, size_t cols, const bf16* x, YT* y, ThreadPool* pool,
                        const GemvVariants& v = GemvVariants()) {
  if (formats::IsBlockFormat(f)) {
    QuantGemv(f, QuantActivations::kInt8, static_cast<const uint8_t*>(w.data), w.rows, cols, x, y, pool, v);
  } else if (f == WeightFormat::kBf16Packed) {
    PackedGemv(static_cast<const bf16*>(w.data), w.rows, cols, x, y, pool, v);
  } else if (f == WeightFormat::kBf16X12) {
    X12Gemv(static_cast<const uint8_t*>(w.data), w.rows, cols, x, y, pool, v);
  } else {
    Gemv(static_cast<const bf16*>(w.data), w.rows, cols, x, y, pool, v);
  }
}

template <typename T>
inline void ExpectBitEqual(const std::vector<T>& want, const T* got, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0) {
      ADD_FAILURE() << what << ": element " << i << " of " << want.size() << " differs";
      return;
    }
  }
}

// fn(format, pool, variants) for every target, both bf16 GEMV paths (vdpbf16ps and
// widening) and both prefetch settings, both int8 paths (VNNI and Highway), every
// format, 1-3 threads.
template <typename Fn>
void ForEachConfiguration(const Fn& fn) {
  ThreadPool pool2(2), pool3(3);
  ForEachTarget([&](const char*) {
    for (bool fast : {true, false}) {
      GemvVariants v;
      v.bf16_dot = v.vnni = fast;
      v.prefetch = !fast;  // both settings, each with one bf16 loop
      SCOPED_TRACE(fast ? "vdpbf16ps / VNNI where present" : "widening / Highway int8 loops");
      for (WeightFormat f : formats::kAllWeightFormats) {
        SCOPED_TRACE(formats::Name(f));
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) fn(f, pool, v);
      }
    }
  });
}

}  // namespace dk::kernels::testing

#endif  // DK_KERNELS_GEMV_GEMV_TEST_MATRIX_H_
