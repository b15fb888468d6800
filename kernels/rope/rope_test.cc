#include "kernels/rope/rope.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/rope/rope_ref.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::Misaligned;
using testing::RandomBf16;

RopeConfig Llama32Config() {
  RopeConfig c;
  c.head_dim = 64;
  c.theta = 500000.0f;
  c.llama3_scaling = true;
  c.llama3 = {32.0f, 1.0f, 4.0f, 8192.0f};
  return c;
}

TEST(Rope, InverseFrequenciesMatchHfFormula) {
  for (const RopeConfig& c : {Llama32Config(), RopeConfig{64, 100000.0f}, RopeConfig{128, 10000.0f}}) {
    const auto got = RopeInverseFrequencies(c);
    const auto want = ref::InverseFrequencies(c);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 4e-7 * want[i]) << i;
    }
  }
}

TEST(Rope, Llama3ScalingBands) {
  const RopeConfig scaled = Llama32Config();
  RopeConfig plain = scaled;
  plain.llama3_scaling = false;
  const auto s = RopeInverseFrequencies(scaled), p = RopeInverseFrequencies(plain);
  // High frequencies (wavelength < 8192 / 4) are untouched, the lowest are divided
  // by the factor, and the band between is in between.
  EXPECT_EQ(s[0], p[0]);
  EXPECT_FLOAT_EQ(s.back(), p.back() / 32.0f);
  int medium = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double wavelen = 2 * M_PI / p[i];
    if (wavelen > 2048 && wavelen < 8192) {
      ++medium;
      EXPECT_LT(s[i], p[i]);
      EXPECT_GT(s[i], p[i] / 32.0f);
    }
  }
  EXPECT_GT(medium, 0);
}

TEST(Rope, TableValuesAndErrors) {
  auto table = RopeTable::Create(Llama32Config(), 300);
  ASSERT_TRUE(table.ok()) << table.status();
  const auto inv = ref::InverseFrequencies(Llama32Config());
  for (size_t p : {0, 1, 17, 299}) {
    for (size_t i = 0; i < 32; ++i) {
      const double angle = static_cast<double>(static_cast<float>(inv[i])) * p;
      EXPECT_NEAR(Bf16ToF32(table->cos(p)[i]), std::cos(angle), 1.0 / 128) << p << " " << i;
      EXPECT_NEAR(Bf16ToF32(table->sin(p)[i]), std::sin(angle), 1.0 / 128) << p << " " << i;
    }
  }
  EXPECT_FALSE(RopeTable::Create(RopeConfig{63, 10000.0f}, 4).ok());
  EXPECT_FALSE(RopeTable::Create(RopeConfig{64, -1.0f}, 4).ok());
  EXPECT_FALSE(RopeTable::Create(RopeConfig{64, 10000.0f}, 0).ok());
  RopeConfig bad = Llama32Config();
  bad.llama3.high_freq_factor = 0.5f;
  const auto status = RopeTable::Create(bad, 4).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("high_freq_factor"), std::string::npos) << status;
}

TEST(Rope, KernelMatchesReferenceOnEveryTarget) {
  ForEachTarget([](const char*) {
    for (size_t head_dim : {2, 6, 34, 64, 66, 128}) {
      RopeConfig c = Llama32Config();
      c.head_dim = head_dim;
      auto table = RopeTable::Create(c, 40);
      ASSERT_TRUE(table.ok());
      for (size_t n_heads : {1, 3, 9, 32}) {
        for (size_t pos : {0, 1, 39}) {
          const auto x = RandomBf16(n_heads * head_dim, head_dim + n_heads + pos, 3.0f);
          std::vector<uint8_t> storage;
          bf16* xp = Misaligned(x, 2, &storage);
          RopeHalfSplit(xp, n_heads, head_dim, table->cos(pos), table->sin(pos));
          for (size_t h = 0; h < n_heads; ++h) {
            const auto want = ref::RotateHead(x.data() + h * head_dim, head_dim,
                                              table->cos(pos), table->sin(pos));
            for (size_t i = 0; i < head_dim; ++i) {
              ASSERT_EQ(Bf16ToF32(xp[h * head_dim + i]), want[i])
                  << "head_dim=" << head_dim << " head=" << h << " i=" << i
                  << " pos=" << pos;
            }
          }
        }
      }
    }
  });
}

TEST(Rope, PositionZeroIsIdentity) {
  auto table = RopeTable::Create(RopeConfig{64, 100000.0f}, 1);
  ASSERT_TRUE(table.ok());
  const auto x = RandomBf16(9 * 64, 3);
  auto y = x;
  RopeHalfSplit(y.data(), 9, 64, table->cos(0), table->sin(0));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i].bits, x[i].bits) << i;
}

}  // namespace
}  // namespace dk::kernels
