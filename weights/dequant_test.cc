#include "weights/dequant.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/cpp/runfiles/runfiles.h"
#include "util/bf16.h"

namespace dk::weights {
namespace {

using ::testing::HasSubstr;

TEST(DequantTest, F16ToF32IsExactForEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t exp = (h >> 10) & 31, mant = h & 1023;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const float got = F16ToF32(static_cast<uint16_t>(h));
    if (exp == 31) {
      if (mant == 0) {
        EXPECT_TRUE(std::isinf(got) && std::signbit(got) == (sign < 0)) << h;
      } else {
        EXPECT_TRUE(std::isnan(got)) << h;
      }
      continue;
    }
    const double want = exp == 0 ? sign * std::ldexp(mant, -24)
                                 : sign * std::ldexp(1024 + mant, static_cast<int>(exp) - 25);
    ASSERT_EQ(static_cast<double>(got), want) << "h=" << h;
    ASSERT_EQ(std::signbit(got), sign < 0) << h;
  }
}

TEST(DequantTest, Q8_0) {
  std::vector<uint8_t> block = {0x00, 0x38};  // d = 0.5
  for (int i = 0; i < 32; ++i) block.push_back(static_cast<uint8_t>(static_cast<int8_t>(i - 16)));
  std::vector<float> out(32);
  DequantizeToF32(GgmlType::kQ8_0, block.data(), 32, out.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * (i - 16)) << i;
  std::vector<bf16> b(32);
  DequantizeToBf16(GgmlType::kQ8_0, block.data(), 32, b.data());
  EXPECT_EQ(b[0].bits, 0xC100);  // -8.0
  EXPECT_EQ(b[17].bits, 0x3F00);  // 0.5
}

TEST(DequantTest, Q4_0LowNibblesFirst) {
  std::vector<uint8_t> block = {0x00, 0x40};  // d = 2.0
  for (int i = 0; i < 16; ++i) block.push_back(static_cast<uint8_t>(i | ((15 - i) << 4)));
  std::vector<float> out(32);
  DequantizeToF32(GgmlType::kQ4_0, block.data(), 32, out.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out[i], 2.0f * (i - 8)) << i;
    EXPECT_EQ(out[16 + i], 2.0f * ((15 - i) - 8)) << i;
  }
}

TEST(DequantTest, Q4_1MultipliesThenAddsInF32) {
  // d = f16 0x2E66 = 0.0999755859375, m = -1.0.
  std::vector<uint8_t> block = {0x66, 0x2E, 0x00, 0xBC};
  for (int i = 0; i < 16; ++i) block.push_back(static_cast<uint8_t>(i | ((15 - i) << 4)));
  std::vector<float> out(32);
  DequantizeToF32(GgmlType::kQ4_1, block.data(), 32, out.data());
  const float d = 0.0999755859375f;
  for (int i = 0; i < 16; ++i) {
    volatile float p0 = d * static_cast<float>(i);  // volatile: rounded, never fused
    volatile float p1 = d * static_cast<float>(15 - i);
    EXPECT_EQ(out[i], p0 + -1.0f) << i;
    EXPECT_EQ(out[16 + i], p1 + -1.0f) << i;
  }
  // Hand-computed: q = 3 -> 0.2999267578125 - 1 = -0.7000732421875 -> bf16 -0.69921875.
  std::vector<bf16> b(32);
  DequantizeToBf16(GgmlType::kQ4_1, block.data(), 32, b.data());
  EXPECT_EQ(out[3], -0.7000732421875f);
  EXPECT_EQ(Bf16ToF32(b[3]), -0.69921875f);
  EXPECT_EQ(Bf16ToF32(b[0]), -1.0f);
}

TEST(DequantTest, F32AndF16ToBf16RoundToNearestEven) {
  const std::vector<uint32_t> f32 = {0x3F808000u,   // 1 + 2^-8: tie -> even (down)
                                     0x3F818000u,   // tie -> even (up)
                                     0x3F808001u,   // above the tie -> up
                                     0xC0490FDBu};  // -pi
  std::vector<bf16> out(4);
  DequantizeToBf16(GgmlType::kF32, reinterpret_cast<const uint8_t*>(f32.data()), 4,
                   out.data());
  EXPECT_EQ(out[0].bits, 0x3F80);
  EXPECT_EQ(out[1].bits, 0x3F82);
  EXPECT_EQ(out[2].bits, 0x3F81);
  EXPECT_EQ(out[3].bits, 0xC049);
  const std::vector<uint16_t> f16 = {0x3C00, 0x0001, 0xC000, 0x7C00, 0x3555};
  std::vector<bf16> h(5);
  DequantizeToBf16(GgmlType::kF16, reinterpret_cast<const uint8_t*>(f16.data()), 5,
                   h.data());
  EXPECT_EQ(h[0].bits, 0x3F80);  // 1
  EXPECT_EQ(h[1].bits, 0x3380);  // 2^-24 (subnormal in f16)
  EXPECT_EQ(h[2].bits, 0xC000);  // -2
  EXPECT_EQ(h[3].bits, 0x7F80);  // inf
  EXPECT_EQ(h[4].bits, 0x3EAB);  // 0.333251953125 = 0x3EAAA000 -> up
}

TEST(DequantTest, RowBytes) {
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ4_1, 64), 40u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ8_0, 32), 34u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ4_0, 32), 18u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kF16, 3), 6u);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ4_0, 33).status().code(),
            absl::StatusCode::kInvalidArgument);
  // ggml's type table: block elements and bytes.
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ5_0, 64), 44u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ5_1, 32), 24u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ2_K, 512), 168u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ3_K, 256), 110u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ4_K, 1024), 576u);
  // K-quant rows hold whole 256-element super-blocks (Gemma's 640 is a Q5_0 row).
  const absl::Status k_row = GgmlRowBytes(GgmlType::kQ4_K, 640).status();
  EXPECT_EQ(k_row.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(k_row.message(), HasSubstr("Q4_K block size 256"));
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ5_K, 256), 176u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ6_K, 1024), 840u);
}
// Types with a ggml block layout but no dequantizer here are refused by name.
TEST(DequantTest, RefusesTypesItDoesNotDequantize) {
  for (GgmlType type : {GgmlType::kIQ4_NL, GgmlType::kIQ2_XXS, GgmlType::kIQ4_XS,
                        GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kI8, GgmlType::kF64,
                        static_cast<GgmlType>(34) /* TQ1_0 */, static_cast<GgmlType>(35) /* TQ2_0 */,
                        static_cast<GgmlType>(99) /* unknown */}) {
    EXPECT_FALSE(IsSupportedGgmlType(type)) << static_cast<int>(type);
    const absl::StatusOr<uint64_t> bytes = GgmlRowBytes(type, 256);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kUnimplemented) << static_cast<int>(type);
    const absl::StatusOr<GgmlTypeTraits> traits = GetGgmlTypeTraits(type);
    EXPECT_THAT(bytes.status().message(),
                HasSubstr(absl::StrCat("unsupported ggml type ", traits.ok() ? traits->name : "unknown",
                                       " (", static_cast<int>(type), ")")));
  }
  for (GgmlType type : {GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
                        GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(IsSupportedGgmlType(type)) << static_cast<int>(type);
  }
}

// Crafted blocks of each type dequantized by gguf-py 0.19.0 (random bytes under
// normal, negative, subnormal and +-65504 f16 scales, all-ones and all-zero blocks;
// tools/peer/dequant_digests.py blocks): every f32 equal bit for bit, to f32 and bf16.
TEST(DequantTest, CraftedBlocksEqualGgufPy) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  std::ifstream in(runfiles->Rlocation("decodekit/weights/testdata/dequant_blocks.json"));
  ASSERT_TRUE(in) << "dequant_blocks.json";
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["cases"].size(), 7u);
  for (const nlohmann::json& c : doc["cases"]) {
    const std::string name = c["type"];
    const auto type = static_cast<GgmlType>(c["ggml_type"].get<uint32_t>());
    const std::string blocks = absl::HexStringToBytes(c["blocks_hex"].get<std::string>());
    const std::string want = absl::HexStringToBytes(c["f32_le_hex"].get<std::string>());
    const int64_t n = static_cast<int64_t>(want.size() / 4);
    ASSERT_EQ(*GgmlRowBytes(type, n), blocks.size()) << name;
    std::vector<float> got(n);
    DequantizeToF32(type, reinterpret_cast<const uint8_t*>(blocks.data()), n, got.data());
    std::vector<bf16> got16(n);
    DequantizeToBf16(type, reinterpret_cast<const uint8_t*>(blocks.data()), n, got16.data());
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t w, g;
      std::memcpy(&w, want.data() + 4 * i, 4);  // little-endian host
      std::memcpy(&g, &got[i], 4);
      float wf;
      std::memcpy(&wf, &w, 4);
      if ((w != g || got16[i].bits != F32ToBf16(wf).bits) && ++mismatches <= 5) {
        ADD_FAILURE() << name << " element " << i << " (block " << i / GetGgmlTypeTraits(type)->block_size
                      << "): got 0x" << std::hex << g << " (bf16 0x" << got16[i].bits << "), gguf-py 0x"
                      << w << std::dec << " (" << wf << ")";
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
  }
}

// The converter's permutation, written out as loops: HF row (h, j, i) of
// [n_head, 2, half] goes to GGUF row (h, i, j) of [n_head, half, 2].
TEST(DequantTest, QkUnpermuteInvertsTheConverter) {
  for (int64_t n_head : {1, 3, 8}) {
    for (int64_t half : {1, 2, 32}) {
      const int64_t rows = n_head * 2 * half;
      std::vector<int64_t> gguf_holds(rows, -1);
      for (int64_t h = 0; h < n_head; ++h) {
        for (int64_t j = 0; j < 2; ++j) {
          for (int64_t i = 0; i < half; ++i) {
            gguf_holds[h * half * 2 + i * 2 + j] = h * 2 * half + j * half + i;
          }
        }
      }
      for (int64_t g = 0; g < rows; ++g) {
        EXPECT_EQ(GgufQkRowToHfRow(g, rows, n_head), gguf_holds[g])
            << "n_head " << n_head << " half " << half << " row " << g;
        EXPECT_EQ(HfRowToGgufQkRow(gguf_holds[g], rows, n_head), g)
            << "inverse: n_head " << n_head << " half " << half << " HF row " << gguf_holds[g];
      }
    }
  }
}

}  // namespace
}  // namespace dk::weights
