#include "kernels/elementwise/elementwise.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/elementwise/elementwise_ref.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::Bf16UlpDistance;
using testing::ForEachTarget;
using testing::Misaligned;
using testing::RandomBf16;

const size_t kSizes[] = {0, 1, 3, 15, 16, 17, 31, 33, 100, 576, 1536, 2049, 8192};

TEST(Elementwise, SiluMulMatchesReferenceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t n : kSizes) {
      const auto gate = RandomBf16(n, 3 + n, 12.0f);
      const auto up = RandomBf16(n, 5 + n, 3.0f);
      std::vector<uint8_t> sg, su, so;
      const bf16* g = Misaligned(gate, 2, &sg);
      const bf16* u = Misaligned(up, 6, &su);
      std::vector<bf16> out_storage(n + 1, bf16{0x1234});
      bf16* out = Misaligned(out_storage, 10, &so);
      SiluMul(g, u, n, out);
      for (size_t i = 0; i < n; ++i) {
        // exp differs from libm's by an f32 ulp or two, which can move one rounding
        // boundary: allow one bf16 ulp per rounding step.
        ASSERT_LE(Bf16UlpDistance(Bf16ToF32(out[i]), ref::SiluMul(gate[i], up[i])), 2)
            << "n=" << n << " i=" << i << " gate=" << Bf16ToF32(gate[i]);
      }
      EXPECT_EQ(out[n].bits, 0x1234) << "wrote past the end";
    }
  });
}

TEST(Elementwise, GeluTanhMulMatchesReferenceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t n : kSizes) {
      const auto gate = RandomBf16(n, 41 + n, 8.0f);
      const auto up = RandomBf16(n, 43 + n, 3.0f);
      std::vector<uint8_t> sg, so;
      const bf16* g = Misaligned(gate, 2, &sg);
      std::vector<bf16> out_storage(n + 1, bf16{0x1234});
      bf16* out = Misaligned(out_storage, 10, &so);
      GeluTanhMul(g, up.data(), n, out);
      for (size_t i = 0; i < n; ++i) {
        // tanh within an f32 ulp or two of libm's: one bf16 step per rounding point. For
        // gate << 0, 1 + tanh(...) cancels in f32 (as in torch's f32 kernel): there the
        // error is at most a few f32 ulps of |gate * up|, far below any bf16 step of it.
        const float want = ref::GeluTanhMul(gate[i], up[i]);
        const float got = Bf16ToF32(out[i]);
        const float floor = std::fabs(Bf16ToF32(gate[i]) * Bf16ToF32(up[i])) * 0x1p-21f;
        if (std::fabs(got - want) > floor) {
          ASSERT_LE(Bf16UlpDistance(got, want), 2) << "n=" << n << " i=" << i << " gate=" << Bf16ToF32(gate[i]);
        }
      }
      EXPECT_EQ(out[n].bits, 0x1234) << "wrote past the end";
    }
  });
}

TEST(Elementwise, GeluTanhIsNotSilu) {
  // gelu_tanh(1) = 0.8412, silu(1) = 0.7311: the two activations differ by far more
  // than the tolerance above.
  std::vector<bf16> g(16, F32ToBf16(1.0f)), u(16, F32ToBf16(1.0f)), out(16);
  GeluTanhMul(g.data(), u.data(), 16, out.data());
  for (const bf16& v : out) EXPECT_EQ(Bf16ToF32(v), RoundToBf16(0.84119199f));
}

TEST(Elementwise, AddIsExactlyRoundedOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t n : kSizes) {
      const auto a = RandomBf16(n, 11 + n, 100.0f);
      auto b = RandomBf16(n, 13 + n, 1.0f);
      std::vector<uint8_t> sa, sb;
      const bf16* ap = Misaligned(a, 2, &sa);
      bf16* bp = Misaligned(b, 4, &sb);
      Add(ap, bp, n, bp);  // in place
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(Bf16ToF32(bp[i]), ref::Add(a[i], b[i])) << "n=" << n << " i=" << i;
      }
    }
  });
}

TEST(Elementwise, AddRoundsTiesToEven) {
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7; a truncating conversion would pass
  // the other ties, so check both directions.
  std::vector<bf16> a(32, F32ToBf16(1.0f)), b(32, F32ToBf16(1.0f / 256)), out(32);
  Add(a.data(), b.data(), 32, out.data());
  for (const bf16& v : out) EXPECT_EQ(Bf16ToF32(v), 1.0f);
  std::vector<bf16> c(32, F32ToBf16(1.0f + 1.0f / 128));
  Add(c.data(), b.data(), 32, out.data());
  for (const bf16& v : out) EXPECT_EQ(Bf16ToF32(v), 1.0f + 1.0f / 64);
}

TEST(Elementwise, AddBiasRoundsTheF32SumOnceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t n : kSizes) {
      const auto x = testing::RandomF32(n, 17 + n, 4.0f);
      const auto bias = RandomBf16(n, 19 + n, 2.0f);
      std::vector<uint8_t> sx, sb, so;
      const float* xp = Misaligned(x, 4, &sx);
      const bf16* bp = Misaligned(bias, 2, &sb);
      std::vector<bf16> out_storage(n + 1, bf16{0x1234});
      bf16* out = Misaligned(out_storage, 6, &so);
      AddBias(xp, bp, n, out);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(Bf16ToF32(out[i]), ref::AddBias(x[i], bias[i])) << "n=" << n << " i=" << i;
      }
      EXPECT_EQ(out[n].bits, 0x1234) << "wrote past the end";
    }
  });
}

TEST(Elementwise, AddBiasDoesNotRoundXFirst) {
  // x = 1 + 3 * 2^-10, bias 2^-9: once, 1 + 5 * 2^-10 rounds up to 1 + 2^-7; rounding x
  // to bf16 first (1) and then 1 + 2^-9 would give 1.
  std::vector<float> x(32, 1.0f + 3.0f / 1024);
  std::vector<bf16> bias(32, F32ToBf16(1.0f / 512)), out(32);
  AddBias(x.data(), bias.data(), 32, out.data());
  for (const bf16& v : out) EXPECT_EQ(Bf16ToF32(v), 1.0f + 1.0f / 128);
}

TEST(Elementwise, EmbeddingLookupCopiesTheRowAndRejectsBadIds) {
  const size_t vocab = 7, dim = 5;
  const auto table = RandomBf16(vocab * dim, 1);
  std::vector<bf16> out(dim);
  ASSERT_TRUE(EmbeddingLookup(table.data(), vocab, dim, 6, out.data()).ok());
  for (size_t i = 0; i < dim; ++i) EXPECT_EQ(out[i].bits, table[6 * dim + i].bits);
  const absl::Status bad = EmbeddingLookup(table.data(), vocab, dim, 7, out.data());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("token id 7"), std::string::npos) << bad;
}

}  // namespace
}  // namespace dk::kernels
