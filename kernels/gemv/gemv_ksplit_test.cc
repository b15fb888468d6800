#include "kernels/gemv/gemv_ksplit.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_check.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::CheckAgainstReference;
using testing::ForEachTarget;

struct Shape {
  size_t rows, cols, k_chunk;
};
// Odd row counts (partial 8-row panels, uneven thread splits), one and several
// chunks, and the npu2 case: K=8192 in chunks of 512.
const Shape kShapes[] = {{1, 32, 32},   {3, 64, 32},    {5, 96, 32},    {9, 512, 512},
                         {13, 1024, 512}, {17, 1536, 256}, {130, 8192, 512}};

TEST(KSplitGemv, MatchesReferenceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (const Shape& s : kShapes) {
      for (bool packed : {false, true}) {
        SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " chunk " << s.k_chunk
                                          << (packed ? " packed" : " row-major"));
        CheckAgainstReference(
            s.rows, s.cols,
            [&](const bf16* w, size_t rows, size_t cols, const auto* x, auto* y, ThreadPool* pool) {
              KSplitGemv(w, packed, rows, cols, s.k_chunk, x, y, pool);
            },
            packed);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

// What makes it a K-split GEMV: each chunk's sum is an f32 partial, and the
// partials are added in chunk order. Row 0 puts 2^25 in chunk 0, 1 in chunk 1 and
// -2^25 in chunk 2 (one element each, so each partial is exact): in f32, 2^25 + 1
// rounds back to 2^25, so the K-split sum is exactly 0, where the exact sum is 1.
// Row 1 has the same three elements, the two large ones cancelling inside chunk 0:
// exactly 1.
TEST(KSplitGemv, AddsTheChunkPartialsInChunkOrderInF32) {
  ForEachTarget([](const char*) {
    const size_t cols = 96;
    std::vector<bf16> w(2 * cols, F32ToBf16(0.0f));
    w[0] = F32ToBf16(33554432.0f);  // 2^25
    w[32 + 1] = F32ToBf16(1.0f);
    w[64] = F32ToBf16(-33554432.0f);
    w[cols + 0] = F32ToBf16(33554432.0f);
    w[cols + 16] = F32ToBf16(-33554432.0f);
    w[cols + 32 + 1] = F32ToBf16(1.0f);
    const std::vector<float> x(cols, 1.0f);
    std::vector<bf16> packed(PackedGemvElements(2, cols));
    PackGemvWeights(w.data(), 2, cols, packed.data());
    for (bool is_packed : {false, true}) {
      SCOPED_TRACE(is_packed ? "packed" : "row-major");
      float y[2] = {-1, -1};
      KSplitGemv(is_packed ? packed.data() : w.data(), is_packed, 2, cols, 32, x.data(), y, nullptr);
      EXPECT_EQ(y[0], 0.0f);
      EXPECT_EQ(y[1], 1.0f);
    }
  });
}

TEST(KSplitGemv, ShapeCheck) {
  EXPECT_TRUE(KSplitGemvShapeOk(8192, 512));
  EXPECT_TRUE(KSplitGemvShapeOk(64, 32));
  EXPECT_FALSE(KSplitGemvShapeOk(4864, 512));  // Qwen2.5's down: no multiple of 512
  EXPECT_FALSE(KSplitGemvShapeOk(96, 48));     // chunk no multiple of 32
  EXPECT_FALSE(KSplitGemvShapeOk(96, 0));
}

}  // namespace
}  // namespace dk::kernels
