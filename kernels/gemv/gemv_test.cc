#include "kernels/gemv/gemv.h"

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv_check.h"
#include "kernels/gemv/gemv_ref.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::CheckAgainstReference;
using testing::ForEachTarget;
using testing::RandomBf16;
using testing::RandomF32;

struct Shape {
  size_t rows, cols;
};
// Odd sizes around every vector width, the 4-row blocks, the 8-row panels and the
// 32-column chunks, plus one decode-sized shape.
const Shape kShapes[] = {{1, 1},   {1, 2},    {3, 5},   {4, 31},  {5, 33},
                         {7, 63},  {8, 64},   {9, 65},  {13, 100}, {17, 127},
                         {31, 129}, {64, 256}, {33, 1000}, {130, 2048}};

// Runs check(variants) with the vdpbf16ps path on (where the CPU has it), with and
// without software prefetch, and off.
template <typename Fn>
void ForEachBf16DotSetting(const Fn& check) {
  for (int mode = 0; mode < 3; ++mode) {
    GemvVariants v;
    v.bf16_dot = mode < 2;
    v.prefetch = mode == 0;
    SCOPED_TRACE(mode == 0 ? "vdpbf16ps allowed, prefetch" : mode == 1 ? "vdpbf16ps allowed, no prefetch" : "vdpbf16ps off");
    check(v);
  }
}

TEST(Gemv, RowMajorMatchesReferenceOnEveryTarget) {
  ForEachBf16DotSetting([](const GemvVariants& v) { ForEachTarget([&v](const char*) {
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
      CheckAgainstReference(
          s.rows, s.cols,
          [&v](const bf16* w, size_t rows, size_t cols, const auto* x, auto* y,
             ThreadPool* pool) { Gemv(w, rows, cols, x, y, pool, v); },
          /*pack=*/false);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }); });
}

TEST(Gemv, PackedMatchesReferenceOnEveryTarget) {
  ForEachBf16DotSetting([](const GemvVariants& v) { ForEachTarget([&v](const char*) {
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
      CheckAgainstReference(
          s.rows, s.cols,
          [&v](const bf16* w, size_t rows, size_t cols, const auto* x, auto* y,
             ThreadPool* pool) { PackedGemv(w, rows, cols, x, y, pool, v); },
          /*pack=*/true);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }); });
}

TEST(Gemv, PackedLayoutIsTheDocumentedOne) {
  const size_t rows = 11, cols = 70;  // 2 panels, 3 chunks, with padding
  std::vector<bf16> w(rows * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = bf16{static_cast<uint16_t>(i + 1)};
  ASSERT_EQ(PackedGemvElements(rows, cols), 16u * 96u);
  const PackedGemvWeights packed = PackGemvWeights(w.data(), rows, cols);
  const size_t chunks = 3;
  for (size_t r = 0; r < 16; ++r) {
    for (size_t c = 0; c < 96; ++c) {
      const size_t p = r / kPanelRows, ch = c / kChunkCols;
      const size_t at = ((p * chunks + ch) * kPanelRows + r % kPanelRows) * kChunkCols +
                        c % kChunkCols;
      const uint16_t expect = (r < rows && c < cols) ? w[r * cols + c].bits : 0;
      ASSERT_EQ(packed.data[at].bits, expect) << r << "," << c;
    }
  }
}

TEST(Gemv, UnpackGemvRowGivesBackEveryRow) {
  // Odd sizes: the last panel and the last chunk are partial.
  for (const auto& [rows, cols] : std::vector<std::pair<size_t, size_t>>{{11, 70}, {8, 32}, {1, 5}, {17, 2048}}) {
    const std::vector<bf16> w = RandomBf16(rows * cols, 7);
    const PackedGemvWeights packed = PackGemvWeights(w.data(), rows, cols);
    std::vector<bf16> row(cols + 1, bf16{0x7fc1});  // one past the end must stay untouched
    for (size_t r = 0; r < rows; ++r) {
      UnpackGemvRow(packed.data.data(), rows, cols, r, row.data());
      for (size_t c = 0; c < cols; ++c) ASSERT_EQ(row[c].bits, w[r * cols + c].bits) << rows << "x" << cols << " " << r << "," << c;
      ASSERT_EQ(row[cols].bits, 0x7fc1);
    }
  }
}

TEST(Gemv, PackedAndRowMajorAreBitIdentical) {
  // The layout-alignment optimization must not change a single logit.
  ForEachTarget([](const char*) {
    for (const Shape& s : kShapes) {
      const auto w = RandomBf16(s.rows * s.cols, 3 + s.rows + s.cols);
      const auto x = RandomF32(s.cols, 5 + s.cols);
      std::vector<bf16> packed(PackedGemvElements(s.rows, s.cols));
      PackGemvWeights(w.data(), s.rows, s.cols, packed.data());
      std::vector<float> a(s.rows), b(s.rows);
      ThreadPool pool(2);
      Gemv(w.data(), s.rows, s.cols, x.data(), a.data(), &pool);
      PackedGemv(packed.data(), s.rows, s.cols, x.data(), b.data(), nullptr);
      for (size_t r = 0; r < s.rows; ++r) {
        ASSERT_EQ(a[r], b[r]) << s.rows << "x" << s.cols << " row " << r;
      }
    }
  });
}

TEST(Gemv, PackedAndRowMajorAreBitIdenticalWithBf16X) {
  // Decode's case: bf16 activations (the vdpbf16ps path where the CPU has it).
  ForEachBf16DotSetting([](const GemvVariants& v) { ForEachTarget([&v](const char*) {
    for (const Shape& s : kShapes) {
      const auto w = RandomBf16(s.rows * s.cols, 3 + s.rows + s.cols);
      const auto x = RandomBf16(s.cols, 5 + s.cols, 2.0f);
      std::vector<bf16> packed(PackedGemvElements(s.rows, s.cols));
      PackGemvWeights(w.data(), s.rows, s.cols, packed.data());
      std::vector<bf16> a(s.rows), b(s.rows);
      ThreadPool pool(2);
      Gemv(w.data(), s.rows, s.cols, x.data(), a.data(), &pool, v);
      PackedGemv(packed.data(), s.rows, s.cols, x.data(), b.data(), nullptr, v);
      for (size_t r = 0; r < s.rows; ++r) {
        ASSERT_EQ(a[r].bits, b[r].bits) << s.rows << "x" << s.cols << " row " << r;
      }
    }
  }); });
}

TEST(Gemv, ReportsTheBf16DotPath) {
  GemvVariants off;
  off.bf16_dot = false;
  EXPECT_FALSE(GemvUsesBf16Dot(off));
  std::printf("GEMV target: %s\n", GemvTargetName());
}

TEST(Gemv, ZeroRowsIsANoOp) {
  std::vector<float> x(4, 1.0f), y(1, 5.0f);
  Gemv(static_cast<const bf16*>(nullptr), 0, 4, x.data(), y.data(), nullptr);
  EXPECT_EQ(y[0], 5.0f);
}

}  // namespace
}  // namespace dk::kernels
