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
