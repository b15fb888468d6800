#include "kernels/norm/rmsnorm.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/norm/rmsnorm_ref.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::Bf16UlpDistance;
using testing::ForEachTarget;
using testing::Misaligned;
using testing::RandomBf16;

TEST(RmsNorm, MatchesReferenceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t n : {1, 2, 7, 16, 17, 33, 63, 100, 576, 2048, 2051}) {
      for (float eps : {1e-5f, 1e-6f, 0.5f}) {
        const auto x = RandomBf16(n, 17 + n, 4.0f);
        const auto w = RandomBf16(n, 19 + n, 2.0f);
        std::vector<uint8_t> sx, sw, so;
        const bf16* xp = Misaligned(x, 2, &sx);
        const bf16* wp = Misaligned(w, 6, &sw);
        std::vector<bf16> out_storage(n + 1, bf16{0x4321});
        bf16* out = Misaligned(out_storage, 14, &so);
        RmsNorm(xp, wp, n, eps, out);
        const auto ref = ref::RmsNorm(x.data(), w.data(), n, eps);
        for (size_t i = 0; i < n; ++i) {
          // inv differs from the f64 one by f32 rounding: at most one bf16 step per
          // rounding point.
          ASSERT_LE(Bf16UlpDistance(Bf16ToF32(out[i]), ref[i]), 2)
              << "n=" << n << " i=" << i << " got " << Bf16ToF32(out[i]) << " want "
              << ref[i];
        }
        EXPECT_EQ(out[n].bits, 0x4321) << "wrote past the end";
      }
    }
  });
}

TEST(RmsNorm, HeadsNormalizeEachHeadOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t heads : {1, 2, 8, 16}) {
      for (size_t hd : {2, 64, 128, 256}) {
        const size_t n = heads * hd;
        // Heads of very different scales: one norm over all of them would be wrong.
        auto x = RandomBf16(n, 23 + n, 4.0f);
        for (size_t h = 0; h < heads; ++h) {
          for (size_t i = 0; i < hd; ++i) {
            x[h * hd + i] = F32ToBf16(Bf16ToF32(x[h * hd + i]) * static_cast<float>(1 << (h % 5)));
          }
        }
        const auto w = RandomBf16(hd, 29 + hd, 2.0f);
        std::vector<uint8_t> sx, so;
        const bf16* xp = Misaligned(x, 2, &sx);
        std::vector<bf16> out_storage(n + 1, bf16{0x4321});
        bf16* out = Misaligned(out_storage, 6, &so);
        RmsNormHeads(xp, w.data(), heads, hd, 1e-6f, out);
        for (size_t h = 0; h < heads; ++h) {
          const auto ref = ref::RmsNorm(x.data() + h * hd, w.data(), hd, 1e-6f);
          for (size_t i = 0; i < hd; ++i) {
            ASSERT_LE(Bf16UlpDistance(Bf16ToF32(out[h * hd + i]), ref[i]), 2)
                << "heads=" << heads << " head_dim=" << hd << " h=" << h << " i=" << i;
          }
        }
        EXPECT_EQ(out[n].bits, 0x4321) << "wrote past the end";
      }
    }
  });
}

TEST(RmsNorm, PlusOneMatchesReferenceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t n : {1, 2, 7, 16, 17, 33, 256, 640, 641}) {
      const auto x = RandomBf16(n, 31 + n, 4.0f);
      const auto w = RandomBf16(n, 37 + n, 1.0f);
      std::vector<uint8_t> sx, so;
      const bf16* xp = Misaligned(x, 2, &sx);
      std::vector<bf16> out_storage(n + 1, bf16{0x4321});
      bf16* out = Misaligned(out_storage, 6, &so);
      RmsNormPlusOne(xp, w.data(), n, 1e-6f, out);
      const auto ref = ref::RmsNormPlusOne(x.data(), w.data(), n, 1e-6);
      size_t inexact = 0;
      for (size_t i = 0; i < n; ++i) {
        // One rounding: f32 inv and products are within an f32 ulp or two of f64, so the
        // result is the reference's except next to a bf16 tie.
        ASSERT_LE(Bf16UlpDistance(Bf16ToF32(out[i]), ref[i]), 1) << "n=" << n << " i=" << i;
        inexact += Bf16ToF32(out[i]) != ref[i];
      }
      // Rounding x * inv to bf16 first (Llama's rounding point) misses on ~1 in 4.
      EXPECT_LE(inexact * 50, n + 49) << "n=" << n << ": " << inexact << " not exactly the reference";
      EXPECT_EQ(out[n].bits, 0x4321) << "wrote past the end";
      // Heads: each head normed on its own with the same (1 + w).
      if (n % 2 == 0) {
        std::vector<bf16> heads(n);
        RmsNormHeads(x.data(), w.data(), 2, n / 2, 1e-6f, heads.data(), /*plus_one=*/true);
        for (size_t h = 0; h < 2; ++h) {
          const auto r = ref::RmsNormPlusOne(x.data() + h * n / 2, w.data(), n / 2, 1e-6);
          for (size_t i = 0; i < n / 2; ++i) {
            ASSERT_LE(Bf16UlpDistance(Bf16ToF32(heads[h * n / 2 + i]), r[i]), 1) << "n=" << n << " h=" << h;
          }
        }
      }
    }
  });
}

TEST(RmsNorm, PlusOneScalesByOnePlusWeight) {
  // x all 1 (inv = 1 / sqrt(1 + eps), just below 1), w = 2^-8: (1 + 2^-8) * inv is just
  // below the tie 1 + 2^-8 and rounds to 1; Llama's norm (w * bf16(x * inv)) gives 2^-8.
  std::vector<bf16> x(64, F32ToBf16(1.0f)), w(64, F32ToBf16(1.0f / 256)), out(64);
  RmsNormPlusOne(x.data(), w.data(), 64, 1e-6f, out.data());
  for (const bf16& v : out) EXPECT_EQ(Bf16ToF32(v), 1.0f);
}

TEST(RmsNorm, InPlaceAndScaleInvariant) {
  // rmsnorm(c * x) == rmsnorm(x) for c a power of two (exact in bf16) and eps ~ 0.
  const size_t n = 2048;
  auto x = RandomBf16(n, 1);
  const auto w = RandomBf16(n, 2);
  std::vector<bf16> a(n), b(n);
  RmsNorm(x.data(), w.data(), n, 1e-30f, a.data());
  for (auto& v : x) v = F32ToBf16(Bf16ToF32(v) * 8.0f);
  RmsNorm(x.data(), w.data(), n, 1e-30f, x.data());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i].bits, a[i].bits) << i;
}

}  // namespace
}  // namespace dk::kernels
