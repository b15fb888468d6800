#include "kernels/gemv/gemv_x12.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_check.h"
#include "kernels/gemv/gemv_ref.h"
#include "kernels/gemv/gemv_rows.h"
#include "kernels/testing/targets.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::RandomBf16;

// How a test matrix's values are drawn, and the x12 mode it must end up in.
enum class Values {
  kNarrow,  // uniform in +-0.06 (like //tools/synthetic_weights): every block compact
  kSpiky,   // mostly narrow; some blocks hold zeros, -0, denormals or tiny values
            // outside 16 binades, a few of them more than 8 values of v: raw blocks
  kWild,    // random bit patterns (any exponent, inf, NaN): too many raw blocks, plain
};
const char* Name(Values v) {
  return v == Values::kNarrow ? "narrow" : v == Values::kSpiky ? "spiky" : "wild";
}

std::vector<bf16> Make(Values kind, size_t rows, size_t cols, uint32_t seed) {
  std::vector<bf16> w = RandomBf16(rows * cols, seed, 0.06f);
  std::mt19937 rng(seed * 7 + 1);
  if (kind == Values::kWild) {
    for (auto& e : w) e = bf16{static_cast<uint16_t>(rng())};
  } else if (kind == Values::kSpiky) {
    const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x2000, 0x0a00, 0x3f80, 0xc2c8};
    for (size_t i = 0; i < w.size(); ++i) {
      if (rng() % 500 == 0) w[i] = bf16{specials[rng() % 8]};  // one more value of v: still compact
      if (rng() % 5000 == 0) {  // four more: the block goes raw
        for (size_t j = 0; j < 4 && i + j < w.size(); ++j) w[i + j] = bf16{specials[4 + j]};
      }
    }
  }
  return w;
}

struct Packed {
  std::vector<uint8_t> x12;
  X12PackStats stats;
  PackedGemvWeights plain;
};
Packed Pack(const std::vector<bf16>& w, size_t rows, size_t cols) {
  Packed p;
  p.x12.assign(X12GemvBytes(rows, cols), 0xa5);  // garbage the packer must overwrite
  p.stats = PackX12GemvWeights(w.data(), rows, cols, p.x12.data());
  p.plain = PackGemvWeights(w.data(), rows, cols);
  return p;
}

template <typename T>
void ExpectBitEqual(const std::vector<T>& want, const std::vector<T>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0) {
      ADD_FAILURE() << what << ": row " << i << " of " << want.size() << " differs";
      return;
    }
  }
}

// Shapes around the 8-row panel and the 64-column block: a lone chunk, odd chunk
// counts (the last block's second chunk absent), partial chunks, decode sizes.
const size_t kRows[] = {1, 7, 8, 9, 17, 64};
const size_t kCols[] = {1, 31, 32, 33, 64, 65, 96, 100, 160, 576};

TEST(X12Gemv, IsPackedGemvBitForBit) {
  ThreadPool pool2(2), pool3(3);
  size_t with_raw = 0, compact = 0, plain = 0;  // matrices packed each way
  ForEachTarget([&](const char*) {
    for (int mode = 0; mode < 3; ++mode) {
      // vdpbf16ps with and without software prefetch (gemv_variants.h), then the widening loops.
      const bool dot = mode < 2;
      GemvVariants v;
      v.bf16_dot = dot;
      v.prefetch = mode == 0;
      SCOPED_TRACE(mode == 0 ? "vdpbf16ps where present, prefetch" : dot ? "vdpbf16ps where present, no prefetch" : "widening loops");
      for (Values kind : {Values::kNarrow, Values::kSpiky, Values::kWild}) {
        for (size_t rows : kRows) {
          for (size_t cols : kCols) {
            const std::string what = std::string(Name(kind)) + " [" + std::to_string(rows) + ", " +
                                     std::to_string(cols) + "]";
            const std::vector<bf16> w = Make(kind, rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
            const Packed p = Pack(w, rows, cols);
            (p.stats.plain ? plain : p.stats.raw_blocks ? with_raw : compact) += 1;
            std::vector<bf16> x = RandomBf16(cols, static_cast<uint32_t>(cols + 5), 2.0f);
            for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
              std::vector<float> want_f(rows), got_f(rows, -1.0f);
              std::vector<bf16> want_b(rows), got_b(rows, bf16{0xffff});
              PackedGemv(p.plain.data.data(), rows, cols, x.data(), want_f.data(), pool, v);
              PackedGemv(p.plain.data.data(), rows, cols, x.data(), want_b.data(), pool, v);
              X12Gemv(p.x12.data(), rows, cols, x.data(), got_f.data(), pool, v);
              X12Gemv(p.x12.data(), rows, cols, x.data(), got_b.data(), pool, v);
              ExpectBitEqual(want_f, got_f, what + " f32 y");
              ExpectBitEqual(want_b, got_b, what + " bf16 y");
            }
          }
        }
      }
    }
  });
  EXPECT_GT(compact, 0u);
  EXPECT_GT(with_raw, 0u);
  EXPECT_GT(plain, 0u);
  std::printf("matrices: %zu compact, %zu with raw blocks, %zu plain\n", compact, with_raw, plain);
}

// The value kinds reach the three ways a block can be stored, so the test above
// covers each: compact blocks, raw blocks in the spill area, the plain matrix.
TEST(X12Gemv, ValueKindsReachEveryStorageMode) {
  const size_t rows = 64, cols = 576;
  const Packed narrow = Pack(Make(Values::kNarrow, rows, cols, 1), rows, cols);
  EXPECT_FALSE(narrow.stats.plain);
  EXPECT_EQ(narrow.stats.raw_blocks, 0u);
  const Packed spiky = Pack(Make(Values::kSpiky, rows, cols, 2), rows, cols);
  EXPECT_FALSE(spiky.stats.plain);
  EXPECT_GT(spiky.stats.raw_blocks, 0u);
  EXPECT_LT(spiky.stats.raw_blocks, spiky.stats.blocks / 2);
  const Packed wild = Pack(Make(Values::kWild, rows, cols, 3), rows, cols);
  EXPECT_TRUE(wild.stats.plain);
  // The stats read back from the packed bytes are the packer's.
  for (const Packed* p : {&narrow, &spiky, &wild}) {
    const X12PackStats s = X12GemvStats(p->x12.data(), rows, cols);
    EXPECT_EQ(s.blocks, p->stats.blocks);
    EXPECT_EQ(s.raw_blocks, p->stats.raw_blocks);
    EXPECT_EQ(s.plain, p->stats.plain);
    EXPECT_EQ(s.streamed_bytes, p->stats.streamed_bytes);
  }
}

TEST(X12Gemv, StreamsThreeQuartersOfThePackedBytes) {
  const size_t rows = 512, cols = 2048;
  const Packed p = Pack(Make(Values::kNarrow, rows, cols, 4), rows, cols);
  const double packed_bytes = PackedGemvElements(rows, cols) * sizeof(bf16);
  EXPECT_NEAR(p.stats.streamed_bytes / packed_bytes, (768.0 + 16.0) / 1024.0, 1e-9);
  // The plain fallback fits: the layout is never smaller than the packed one.
  for (size_t r : kRows) {
    for (size_t c : kCols) EXPECT_GE(X12GemvBytes(r, c), PackedGemvElements(r, c) * sizeof(bf16));
  }
}

// Every byte is written (garbage in the buffer does not survive), the same with the
// panels packed on a pool, and into zeros with out_zeroed (the unused spill slots left
// alone).
TEST(X12Gemv, PackingWritesEveryByteTheSameOnAPool) {
  ThreadPool pool3(3);
  for (Values kind : {Values::kNarrow, Values::kSpiky, Values::kWild}) {
    for (size_t rows : {size_t{9}, size_t{64}, size_t{200}}) {
      for (size_t cols : {size_t{65}, size_t{576}}) {
        const std::vector<bf16> w = Make(kind, rows, cols, static_cast<uint32_t>(rows * 3 + cols));
        std::vector<uint8_t> a(X12GemvBytes(rows, cols), 0x00), b(X12GemvBytes(rows, cols), 0xff);
        const X12PackStats sa = PackX12GemvWeights(w.data(), rows, cols, a.data());
        const X12PackStats sb = PackX12GemvWeights(w.data(), rows, cols, b.data(), &pool3);
        EXPECT_EQ(a, b) << Name(kind) << " [" << rows << ", " << cols << "]";
        std::vector<uint8_t> c(X12GemvBytes(rows, cols), 0x00);
        PackX12GemvWeights(w.data(), rows, cols, c.data(), &pool3, /*out_zeroed=*/true);
        EXPECT_EQ(b, c) << Name(kind) << " [" << rows << ", " << cols << "] into zeros";
        EXPECT_EQ(sa.raw_blocks, sb.raw_blocks);
        EXPECT_EQ(sa.plain, sb.plain);
      }
    }
  }
}

TEST(X12Gemv, RowsUnpackToTheOriginal) {
  for (Values kind : {Values::kNarrow, Values::kSpiky, Values::kWild}) {
    for (size_t rows : kRows) {
      for (size_t cols : kCols) {
        const std::vector<bf16> w = Make(kind, rows, cols, static_cast<uint32_t>(rows + cols * 3));
        const Packed p = Pack(w, rows, cols);
        std::vector<bf16> row(cols);
        for (size_t r = 0; r < rows; ++r) {
          UnpackX12GemvRow(p.x12.data(), rows, cols, r, row.data());
          ASSERT_EQ(std::memcmp(row.data(), w.data() + r * cols, cols * sizeof(bf16)), 0)
              << Name(kind) << " [" << rows << ", " << cols << "] row " << r;
        }
      }
    }
  }
}

// Against the f64 reference, independent of the packed kernel.
// Panels [p0, p1) rebuilt in the packed layout (Gemm's path at many token rows,
// gemm.cc) are the packed layout's bytes of the same panels: the vdpbf16ps CPUs'
// decoder and the portable one, every storage mode (a plain matrix's own panels),
// an odd chunk count, a partial last panel, a range from a later panel.
TEST(X12Gemv, PanelsRebuildToThePackedLayout) {
  for (bool dot : {true, false}) {
    GemvVariants v;
    v.bf16_dot = dot;
    internal::Bf16X x;  // only its loop matters here
    x.dot = GemvUsesBf16Dot(v);
    x.prefetch = v.prefetch;
    for (Values kind : {Values::kNarrow, Values::kSpiky, Values::kWild}) {
      for (size_t cols : {33, 100, 576}) {
        const size_t rows = 61, panels = 8, panel = PackedGemvElements(kPanelRows, cols);
        const Packed p = Pack(Make(kind, rows, cols, 11 + cols), rows, cols);
        for (size_t p0 : {0, 3}) {
          SCOPED_TRACE(::testing::Message() << Name(kind) << " cols=" << cols << " p0=" << p0 << " dot=" << dot);
          std::vector<bf16> scratch((panels - p0) * panel + 1);  // misaligned by one element
          const bf16* got = internal::X12PanelsAsPacked(p.x12.data(), rows, cols, p0, panels, scratch.data() + 1, x);
          EXPECT_EQ(std::memcmp(got, p.plain.data.data() + p0 * panel, (panels - p0) * panel * sizeof(bf16)), 0);
        }
      }
    }
  }
}

TEST(X12Gemv, MatchesTheF64Reference) {
  ThreadPool pool2(2);
  ForEachTarget([&](const char*) {
    for (bool dot : {true, false}) {
      GemvVariants v;
      v.bf16_dot = dot;
      for (Values kind : {Values::kNarrow, Values::kSpiky}) {
        for (size_t cols : {size_t{33}, size_t{160}, size_t{2048}}) {
          const size_t rows = 40;
          const std::vector<bf16> w = Make(kind, rows, cols, static_cast<uint32_t>(cols));
          const Packed p = Pack(w, rows, cols);
          const std::vector<bf16> x = RandomBf16(cols, 9, 2.0f);
          std::vector<float> xf(cols);
          for (size_t k = 0; k < cols; ++k) xf[k] = Bf16ToF32(x[k]);
          std::vector<double> abs_sum;
          const std::vector<double> ref = ref::Gemv(w.data(), rows, cols, xf.data(), &abs_sum);
          std::vector<float> y(rows);
          std::vector<bf16> yb(rows);
          X12Gemv(p.x12.data(), rows, cols, x.data(), y.data(), &pool2, v);
          X12Gemv(p.x12.data(), rows, cols, x.data(), yb.data(), &pool2, v);
          testing::ExpectClose(ref, abs_sum, y.data(), rows, Name(kind));
          testing::ExpectClose(ref, abs_sum, yb.data(), rows, Name(kind));
        }
      }
    }
  });
}

}  // namespace
}  // namespace dk::kernels
