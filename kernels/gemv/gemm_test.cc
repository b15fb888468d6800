// The multi-row kernels (gemm.h) against the single-row ones: row i of every result
// must be BIT-identical to the single-row call on X[i] (Gemv / PackedGemv / X12Gemv /
// QuantGemv(kInt8); the fused gemv_fused.h kernels), on every SIMD target, both bf16
// GEMV paths (vdpbf16ps and widening), both int8 paths (VNNI and Highway), each
// weight format, 1 to 3 threads, m in {1, ..., 9, 33} (every one-pass tile of the
// block formats, gemm_tiles.h ForTokenTiles, and tiles past it), odd row counts (not a
// multiple of the panel), odd cols where the format allows, strided and misaligned
// rows. Plus the f64 reference within the single-row tests' tolerances.
#include "kernels/gemv/gemm.h"

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_check.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_quant_ref.h"
#include "kernels/gemv/gemv_ref.h"
#include "kernels/gemv/gemv_test_matrix.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::ExpectBitEqual;
using testing::ForEachConfiguration;
using testing::ForEachTarget;
using testing::Matrix;
using testing::Misaligned;
using testing::RandomBf16;
using testing::UnfusedGemv;

const size_t kMs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 33};

struct Shape {
  size_t rows, cols;
};
// Odd row counts around the 8-row panel and unit, odd cols (bf16 formats) and K of
// one to several blocks; one shape crosses the 64-row SiLU unit and a tile, one
// (bf16) the column slices of long panels; the last block shape has two 16-block
// scale chunks and an odd block after them (the chunked Q8_0 / Q4 kernels).
const Shape kBf16Shapes[] = {{1, 31}, {13, 75}, {67, 130}, {200, 576}, {11, 2070}};
const Shape kBlockShapes[] = {{1, 32}, {13, 96}, {67, 160}, {200, 576}, {21, 1056}};
const Shape kSuperBlockShapes[] = {{1, 256}, {13, 512}, {67, 768}, {130, 1280}};

std::vector<Shape> ShapesOf(WeightFormat f) {
  if (formats::IsKQuant(f)) return {std::begin(kSuperBlockShapes), std::end(kSuperBlockShapes)};
  if (formats::IsBlockFormat(f)) return {std::begin(kBlockShapes), std::end(kBlockShapes)};
  return {std::begin(kBf16Shapes), std::end(kBf16Shapes)};
}

// m token rows of `cols` at a stride of cols + 3 elements, misaligned by 2 bytes.
struct Tokens {
  std::vector<bf16> data;
  std::vector<uint8_t> storage;
  const bf16* p = nullptr;
  size_t stride = 0;
  Tokens(size_t m, size_t cols, uint32_t seed, float scale) : data(RandomBf16(m * (cols + 3), seed, scale)) {
    stride = cols + 3;
    p = Misaligned(data, 2, &storage);
  }
  const bf16* Row(size_t i) const { return p + i * stride; }
};

// Bytes of a [rows, cols] matrix in `f`.
size_t WeightBytes(WeightFormat f, size_t rows, size_t cols) {
  if (f == WeightFormat::kBf16RowMajor) return rows * cols * sizeof(bf16);
  if (f == WeightFormat::kBf16Packed) return PackedGemvElements(rows, cols) * sizeof(bf16);
  if (f == WeightFormat::kBf16X12) return X12GemvBytes(rows, cols);
  return rows * formats::RowBytes(f, cols);
}

// y rows at a stride of rows + 5, one element past the start of their buffer (so
// misaligned); the stride gaps and the elements around must stay untouched.
template <typename YT>
void ExpectRowsAreSingleRowCalls(WeightFormat f, const FusedWeight& w, size_t cols, const Tokens& x, size_t m,
                                 ThreadPool* pool, const GemvVariants& v = GemvVariants()) {
  const size_t stride = w.rows + 5;
  std::vector<YT> got(m * stride + 2);
  std::memset(static_cast<void*>(got.data()), 0x7f, got.size() * sizeof(YT));
  YT* y = got.data() + 1;
  Gemm(f, w.data, w.rows, cols, x.p, x.stride, m, y, stride, pool, v);
  std::vector<YT> want(w.rows);
  for (size_t i = 0; i < m; ++i) {
    UnfusedGemv(f, w, cols, x.Row(i), want.data(), pool, v);
    ExpectBitEqual(want, y + i * stride, sizeof(YT) == 4 ? "f32 y" : "bf16 y");
    for (size_t r = w.rows; r < stride && i + 1 < m; ++r) {
      uint8_t bytes[sizeof(YT)];
      std::memcpy(bytes, &y[i * stride + r], sizeof(YT));
      ASSERT_EQ(bytes[0], 0x7f) << "wrote into the stride gap after row " << i;
    }
  }
  for (const YT* outside : {got.data(), y + (m - 1) * stride + w.rows}) {
    uint8_t bytes[sizeof(YT)];
    std::memcpy(bytes, outside, sizeof(YT));
    EXPECT_EQ(bytes[0], 0x7f) << "wrote outside y";
  }
}

TEST(Gemm, EachRowIsTheSingleRowGemvBitForBit) {
  ForEachConfiguration([](WeightFormat f, ThreadPool* pool, const GemvVariants& v) {
    for (const Shape& s : ShapesOf(f)) {
      Matrix mat(s.rows, s.cols, 3 + s.rows);
      const FusedWeight aligned = mat.As(f);
      const auto* bytes = static_cast<const uint8_t*>(aligned.data);
      std::vector<uint8_t> storage;  // the weights 6 bytes past a 64-byte boundary
      const FusedWeight w{Misaligned(std::vector<uint8_t>(bytes, bytes + WeightBytes(f, s.rows, s.cols)), 6, &storage),
                          s.rows};
      const Tokens x(33, s.cols, 1 + s.cols, 3.0f);
      for (size_t m : kMs) {
        SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " m=" << m);
        ExpectRowsAreSingleRowCalls<float>(f, w, s.cols, x, m, pool, v);
        ExpectRowsAreSingleRowCalls<bf16>(f, w, s.cols, x, m, pool, v);
        if (::testing::Test::HasFailure()) return;
      }
    }
  });
}

// More token rows than one token block (64) of the tiled loop.
TEST(Gemm, ManyTokenRowsAreEachTheSingleRowGemv) {
  ThreadPool pool(2);
  for (WeightFormat f : formats::kAllWeightFormats) {
    SCOPED_TRACE(formats::Name(f));
    const Shape s = ShapesOf(f)[2];
    Matrix mat(s.rows, s.cols, 61);
    const FusedWeight w = mat.As(f);
    const Tokens x(70, s.cols, 62, 3.0f);
    ExpectRowsAreSingleRowCalls<float>(f, w, s.cols, x, 70, &pool);
  }
}

// x12 at many token rows (gemm.cc rebuilds each tile in the packed layout there):
// several tiles per thread's rows, two token blocks over each rebuilt tile, an odd
// last chunk, a partial last panel; a matrix with compact and raw blocks and a plain
// one (every weight's exponent random, so every block raw and too many to spill).
TEST(Gemm, X12AtManyTokenRowsIsTheSingleRowGemvInEveryMode) {
  const size_t rows = 300, cols = 2070, m = 70;
  Matrix blocks(rows, cols, 71), plain(rows, cols, 72);
  std::mt19937 rng(73);
  for (bf16& v : plain.rowmajor) v = bf16{static_cast<uint16_t>((rng() & 0x807f) | (64 + rng() % 127) << 7)};
  const Tokens x(m, cols, 74, 3.0f);
  ThreadPool pool(2);
  for (Matrix* mat : {&blocks, &plain}) {
    const FusedWeight w = mat->As(WeightFormat::kBf16X12);
    const X12PackStats stats = X12GemvStats(static_cast<const uint8_t*>(w.data), rows, cols);
    EXPECT_EQ(stats.plain, mat == &plain);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      SCOPED_TRACE(::testing::Message() << (stats.plain ? "plain" : "blocks") << (p ? " 2 threads" : " 1 thread"));
      ExpectRowsAreSingleRowCalls<float>(WeightFormat::kBf16X12, w, cols, x, m, p);
      ExpectRowsAreSingleRowCalls<bf16>(WeightFormat::kBf16X12, w, cols, x, m, p);
    }
  }
}

// The fused entries at many x12 token rows (tiles rebuilt, as above): each row their
// single-row calls' bits; SiLU*mul runs Rows per 64-row unit, GemmAdd per 256-row block.
TEST(Gemm, X12FusedAtManyTokenRowsAreTheFusedSingleRowCalls) {
  const WeightFormat f = WeightFormat::kBf16X12;
  const size_t rows = 300, cols = 2070, m = 40;
  Matrix gate(rows, cols, 81), up(rows, cols, 82), down(rows, cols, 83);
  const FusedWeight wg = gate.As(f), wu = up.As(f), wd = down.As(f);
  const Tokens x(m, cols, 84, 3.0f), residual(m, rows, 85, 4.0f);
  const auto norm = RandomBf16(cols, 86, 1.5f);
  ThreadPool pool(2);
  const size_t stride = rows + 3;
  std::vector<bf16> silu(m * stride), add(m * stride), normed(m * stride), want(rows);
  RmsNormGemmSiluMul(f, x.p, x.stride, m, norm.data(), 1e-5f, cols, wg, wu, silu.data(), stride, &pool);
  GemmAdd(f, x.p, x.stride, m, cols, wd, residual.p, residual.stride, add.data(), stride, &pool);
  void* out[1] = {normed.data()};
  RmsNormGemm(f, x.p, x.stride, m, norm.data(), 1e-5f, cols, &wd, 1, out, &stride, /*y_f32=*/false, &pool);
  for (size_t i = 0; i < m; ++i) {
    SCOPED_TRACE(::testing::Message() << "token row " << i);
    RmsNormGemvSiluMul(f, x.Row(i), norm.data(), 1e-5f, cols, wg, wu, want.data(), &pool);
    ExpectBitEqual(want, silu.data() + i * stride, "silu(gate) * up");
    GemvAdd(f, x.Row(i), cols, wd, residual.Row(i), want.data(), &pool);
    ExpectBitEqual(want, add.data() + i * stride, "residual + W x");
    void* wout[1] = {want.data()};
    RmsNormGemv(f, x.Row(i), norm.data(), 1e-5f, cols, &wd, 1, wout, /*y_f32=*/false, &pool);
    ExpectBitEqual(want, normed.data() + i * stride, "W RmsNorm(x)");
    if (::testing::Test::HasFailure()) return;
  }
}

// Row n of y within the single-row tests' tolerances of the f64 reference: the
// bf16 formats' (gemv_check.h) and, for block formats, the tight kInt8 bound of
// gemv_quant_test.cc against the same quantized activations: 2 (B + 16) u A.
void ExpectNearReference(WeightFormat f, const Matrix& mat, const FusedWeight& w, const bf16* x, const float* y) {
  std::vector<float> xf(mat.cols);
  for (size_t k = 0; k < mat.cols; ++k) xf[k] = Bf16ToF32(x[k]);
  if (!formats::IsBlockFormat(f)) {
    std::vector<double> abs;
    const auto want = ref::Gemv(mat.rowmajor.data(), mat.rows, mat.cols, xf.data(), &abs);
    return testing::ExpectClose(want, abs, y, mat.rows, "vs f64 reference");
  }
  std::vector<double> scales, abs;
  const std::vector<double> xq = ref::QuantizeActivations(xf.data(), mat.cols, &scales);
  const auto want = ref::QuantGemv(f, static_cast<const uint8_t*>(w.data), mat.rows, mat.cols, xq.data(), &abs);
  for (size_t n = 0; n < mat.rows; ++n) {
    const double tol = 2.0 * (mat.cols / 32.0 + 16) * 0x1p-24 * abs[n] + 1e-30;
    ASSERT_NEAR(y[n], want[n], tol) << "vs f64 reference, row " << n;
  }
}

TEST(Gemm, MatchesTheReference) {
  ForEachTarget([](const char*) {
    ThreadPool pool(2);
    for (WeightFormat f : formats::kAllWeightFormats) {
      SCOPED_TRACE(formats::Name(f));
      const Shape s = ShapesOf(f).back();
      Matrix mat(s.rows, s.cols, 9);
      const FusedWeight w = mat.As(f);
      for (size_t m : {9, 33}) {  // a one-pass tile of the block formats; x12 tiles rebuilt (gemm.cc)
        const Tokens x(m, s.cols, 10, 2.0f);
        std::vector<float> y(m * s.rows);
        Gemm(f, w.data, w.rows, s.cols, x.p, x.stride, m, y.data(), s.rows, &pool);
        for (size_t i = 0; i < m; ++i) ExpectNearReference(f, mat, w, x.Row(i), y.data() + i * s.rows);
      }
    }
  });
}

TEST(Gemm, RmsNormGemmIsTheFusedSingleRowCallBitForBit) {
  ForEachConfiguration([](WeightFormat f, ThreadPool* pool, const GemvVariants& v) {
    for (const Shape& s : ShapesOf(f)) {
      const size_t m = s.rows < 100 ? 9 : 3;
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " m=" << m);
      const Tokens x(m, s.cols, 31, 3.0f);
      const auto norm = RandomBf16(s.cols, 32, 1.5f);
      Matrix mats[3] = {{s.rows, s.cols, 33}, {s.rows / 2 + 1, s.cols, 34}, {s.rows + 9, s.cols, 35}};
      const FusedWeight w[3] = {mats[0].As(f), mats[1].As(f), mats[2].As(f)};
      for (bool y_f32 : {false, true}) {
        std::vector<uint8_t> got[3];
        void* out[3];
        size_t stride[3];
        for (int j = 0; j < 3; ++j) {
          stride[j] = w[j].rows + 1;
          got[j].assign(m * stride[j] * 4, 0x55);
          out[j] = got[j].data();
        }
        RmsNormGemm(f, x.p, x.stride, m, norm.data(), 1e-5f, s.cols, w, 3, out, stride, y_f32, pool, v);
        for (size_t i = 0; i < m; ++i) {
          std::vector<uint8_t> want[3];
          void* wout[3];
          for (int j = 0; j < 3; ++j) {
            want[j].resize(w[j].rows * 4);
            wout[j] = want[j].data();
          }
          RmsNormGemv(f, x.Row(i), norm.data(), 1e-5f, s.cols, w, 3, wout, y_f32, pool, v);
          const size_t elem = y_f32 ? 4 : 2;
          for (int j = 0; j < 3; ++j) {
            ASSERT_EQ(std::memcmp(want[j].data(), got[j].data() + i * stride[j] * elem, w[j].rows * elem), 0)
                << "weight " << j << " token row " << i << (y_f32 ? " f32" : " bf16");
          }
        }
      }
    }
  });
}

TEST(Gemm, RmsNormGemmSiluMulIsTheFusedSingleRowCallBitForBit) {
  ForEachConfiguration([](WeightFormat f, ThreadPool* pool, const GemvVariants& v) {
    for (const Shape& s : ShapesOf(f)) {
      const size_t m = s.rows < 100 ? 9 : 3;
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " m=" << m);
      const Tokens x(m, s.cols, 41, 3.0f);
      const auto norm = RandomBf16(s.cols, 42, 1.5f);
      Matrix gate(s.rows, s.cols, 43), up(s.rows, s.cols, 44);
      const FusedWeight wg = gate.As(f), wu = up.As(f);
      const size_t stride = s.rows + 3;
      std::vector<bf16> got(m * stride), want(s.rows);
      RmsNormGemmSiluMul(f, x.p, x.stride, m, norm.data(), 1e-5f, s.cols, wg, wu, got.data(), stride, pool, v);
      for (size_t i = 0; i < m; ++i) {
        RmsNormGemvSiluMul(f, x.Row(i), norm.data(), 1e-5f, s.cols, wg, wu, want.data(), pool, v);
        ExpectBitEqual(want, got.data() + i * stride, "silu(gate) * up");
      }
    }
  });
}

TEST(Gemm, GemmAddIsTheFusedSingleRowCallBitForBit) {
  ForEachConfiguration([](WeightFormat f, ThreadPool* pool, const GemvVariants& v) {
    for (const Shape& s : ShapesOf(f)) {
      const size_t m = s.rows < 100 ? 9 : 3;
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " m=" << m);
      const Tokens x(m, s.cols, 51, 2.0f), residual(m, s.rows, 52, 4.0f);
      Matrix mat(s.rows, s.cols, 53);
      const FusedWeight w = mat.As(f);
      const size_t stride = s.rows + 1;
      std::vector<bf16> got(m * stride), want(s.rows);
      GemmAdd(f, x.p, x.stride, m, s.cols, w, residual.p, residual.stride, got.data(), stride, pool, v);
      for (size_t i = 0; i < m; ++i) {
        GemvAdd(f, x.Row(i), s.cols, w, residual.Row(i), want.data(), pool, v);
        ExpectBitEqual(want, got.data() + i * stride, "residual + W x");
      }
    }
  });
}

// The x12 matrices of these tests hold both compact and raw (spilled) blocks, so the
// bit-for-bit tests cover both decodes.
TEST(Gemm, X12TestMatricesHaveCompactAndRawBlocks) {
  for (const Shape& s : kBf16Shapes) {
    if (s.rows < 64) continue;
    Matrix mat(s.rows, s.cols, 3 + s.rows);
    const FusedWeight w = mat.As(WeightFormat::kBf16X12);
    const X12PackStats stats = X12GemvStats(static_cast<const uint8_t*>(w.data), s.rows, s.cols);
    EXPECT_FALSE(stats.plain);
    EXPECT_GT(stats.raw_blocks, 0u) << s.rows << "x" << s.cols;
    EXPECT_LT(stats.raw_blocks, stats.blocks) << s.rows << "x" << s.cols;
  }
}

// With AVX512-VNNI, every block format runs a register-blocked kernel (the tests
// above compare those with the single-row kernels); Q4_0 / Q4_1 once ran the
// single-row kernel per token row, which the tests cannot tell apart.
TEST(Gemm, BlockFormatsAreRegisterBlockedWithAvx512Vnni) {
  if (std::string(QuantGemvTargetName(QuantActivations::kInt8)).find("+VNNI") == std::string::npos) {
    GTEST_SKIP() << "no AVX512-VNNI int8 path here";
  }
  for (WeightFormat f : formats::kAllWeightFormats) {
    if (formats::IsBlockFormat(f)) {
      EXPECT_TRUE(internal::GemmRegisterBlocked(f)) << formats::Name(f);
    }
  }
  GemvVariants highway;
  highway.vnni = false;
  EXPECT_FALSE(internal::GemmRegisterBlocked(WeightFormat::kQ4_1, highway)) << "Highway int8 loops";
}

TEST(Gemm, NoRowsOrNoTokensIsANoOp) {
  std::vector<bf16> w(64), x(64);
  float y = 7.0f;
  Gemm(WeightFormat::kBf16RowMajor, w.data(), 0, 64, x.data(), 64, 1, &y, 1, nullptr);
  Gemm(WeightFormat::kBf16RowMajor, w.data(), 1, 64, x.data(), 64, 0, &y, 1, nullptr);
  EXPECT_EQ(y, 7.0f);
}

}  // namespace
}  // namespace dk::kernels

namespace dk::kernels {
namespace {

// The single-row GEMV of a format in `scratch` (null: the call's own).
template <typename YT>
void SingleRow(WeightFormat f, const FusedWeight& w, size_t cols, const bf16* x, YT* y, ThreadPool* pool,
               const GemvVariants& v, KernelScratch* scratch) {
  if (formats::IsBlockFormat(f)) {
    QuantGemv(f, QuantActivations::kInt8, static_cast<const uint8_t*>(w.data), w.rows, cols, x, y, pool, v,
              scratch);
  } else if (f == WeightFormat::kBf16Packed) {
    PackedGemv(static_cast<const bf16*>(w.data), w.rows, cols, x, y, pool, v, scratch);
  } else if (f == WeightFormat::kBf16X12) {
    X12Gemv(static_cast<const uint8_t*>(w.data), w.rows, cols, x, y, pool, v, scratch);
  } else {
    Gemv(static_cast<const bf16*>(w.data), w.rows, cols, x, y, pool, v, scratch);
  }
}

// Every GEMV, fused and GEMM entry point works in the caller's KernelScratch when
// given one (each alone in a fresh one leaves buffers in it), and, run one after
// another in one scratch (as a CPU device runs a program's launches), gives the bits
// it gives in a scratch of its own.
TEST(GemvScratch, EveryEntryPointWorksInTheCallersScratch) {
  ThreadPool pool(2);
  GemvVariants plain;
  plain.bf16_dot = false;
  plain.vnni = false;
  for (WeightFormat f : formats::kAllWeightFormats) {
    for (const GemvVariants& v : {GemvVariants(), plain}) {
      SCOPED_TRACE(::testing::Message() << formats::Name(f) << " " << v.Describe());
      KernelScratch shared(pool.num_threads());
      bool first_shape = true;
      for (const Shape& s : ShapesOf(f)) {
        SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
        Matrix a(s.rows, s.cols, 71), b(s.rows, s.cols, 72);
        const FusedWeight wa = a.As(f), wb = b.As(f);
        const FusedWeight both[2] = {wa, wb};
        const size_t m = 40;  // past kX12RebuildTokens: x12 rebuilds its tiles
        const Tokens x(m, s.cols, 73, 3.0f), residual(m, s.rows, 74, 4.0f);
        const auto norm = RandomBf16(s.cols, 75, 1.5f);
        const size_t n = s.rows;
        // Each entry point once, its output as bf16 values.
        using Call = std::function<std::vector<bf16>(KernelScratch*)>;
        const std::vector<Call> calls = {
            [&](KernelScratch* sc) {
              std::vector<float> y(n);
              SingleRow(f, wa, s.cols, x.Row(0), y.data(), &pool, v, sc);
              std::vector<bf16> out;
              for (float e : y) out.push_back(F32ToBf16(e));
              return out;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(n);
              SingleRow(f, wb, s.cols, x.Row(1), y.data(), &pool, v, sc);
              return y;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(m * n);
              Gemm(f, wa.data, n, s.cols, x.p, x.stride, m, y.data(), n, &pool, v, sc);
              return y;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(2 * n);
              void* ys[2] = {y.data(), y.data() + n};
              RmsNormGemv(f, x.Row(2), norm.data(), 1e-5f, s.cols, both, 2, ys, false, &pool, v, sc);
              return y;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(n);
              RmsNormGemvSiluMul(f, x.Row(3), norm.data(), 1e-5f, s.cols, wa, wb, y.data(), &pool, v, sc);
              return y;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(n);
              GemvAdd(f, x.Row(4), s.cols, wb, residual.Row(0), y.data(), &pool, v, sc);
              return y;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(m * n);
              void* ys[1] = {y.data()};
              const size_t stride[1] = {n};
              RmsNormGemm(f, x.p, x.stride, m, norm.data(), 1e-5f, s.cols, &wa, 1, ys, stride, false, &pool, v, sc);
              return y;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(m * n);
              RmsNormGemmSiluMul(f, x.p, x.stride, m, norm.data(), 1e-5f, s.cols, wa, wb, y.data(), n, &pool, v, sc);
              return y;
            },
            [&](KernelScratch* sc) {
              std::vector<bf16> y(m * n);
              GemmAdd(f, x.p, x.stride, m, s.cols, wb, residual.p, residual.stride, y.data(), n, &pool, v, sc);
              return y;
            },
        };
        for (size_t k = 0; k < calls.size(); ++k) {
          SCOPED_TRACE(::testing::Message() << "entry point " << k);
          if (first_shape) {
            KernelScratch fresh(pool.num_threads());
            calls[k](&fresh);
            EXPECT_GT(fresh.bytes(), 0u) << "left nothing in the caller's scratch";
          }
          ExpectBitEqual(calls[k](nullptr), calls[k](&shared).data(), "in the caller's scratch");
        }
        first_shape = false;
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace dk::kernels
