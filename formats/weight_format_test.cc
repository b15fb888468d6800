#include "formats/weight_format.h"

#include <ostream>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace dk::formats {

// Failure messages name the format (gtest finds PrintTo by argument-dependent lookup).
void PrintTo(WeightFormat f, std::ostream* os) { *os << Name(f); }

namespace {

TEST(WeightFormatTest, TableIsInEnumOrderAndNamesRoundTrip) {
  std::set<std::string> names, gguf_names;
  for (size_t i = 0; i < std::size(kAllWeightFormats); ++i) {
    const WeightFormat f = kAllWeightFormats[i];
    EXPECT_EQ(static_cast<size_t>(f), i);
    const std::string name(Name(f));
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    auto parsed = ParseWeightFormat(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, f) << name;
    // The registry's (layout, block_format) pair names the same format.
    auto from_registry = FromRegistry(RegistryLayout(f), RegistryBlockFormat(f));
    ASSERT_TRUE(from_registry.ok()) << from_registry.status();
    EXPECT_EQ(*from_registry, f) << name;
    if (const auto id = GgmlTypeId(f)) {
      EXPECT_TRUE(gguf_names.insert(std::string(GgufTypeName(f))).second) << GgufTypeName(f);
      EXPECT_EQ(FromGgmlTypeId(*id), f) << name;
      EXPECT_EQ(FromGgufTypeName(GgufTypeName(f)), f) << name;
    } else {
      EXPECT_EQ(GgufTypeName(f), "") << name;
    }
  }
}

TEST(WeightFormatTest, NamesAndGgufTypes) {
  EXPECT_EQ(Name(WeightFormat::kBf16RowMajor), "row_major");
  EXPECT_EQ(Name(WeightFormat::kBf16Packed), "packed_panel_v1");
  EXPECT_EQ(Name(WeightFormat::kBf16X12), "packed_panel_x12_v1");
  EXPECT_EQ(Name(WeightFormat::kQ8_0), "q8_0");
  EXPECT_EQ(Name(WeightFormat::kQ4_0), "q4_0");
  EXPECT_EQ(Name(WeightFormat::kQ4_1), "q4_1");
  EXPECT_EQ(Name(WeightFormat::kQ5_0), "q5_0");
  EXPECT_EQ(Name(WeightFormat::kQ4_K), "q4_k");
  EXPECT_EQ(Name(WeightFormat::kQ6_K), "q6_k");
  // ggml's type ids (ggml.h: GGML_TYPE_Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q8_0 = 8,
  // Q4_K = 12, Q6_K = 14, BF16 = 30).
  EXPECT_EQ(GgmlTypeId(WeightFormat::kQ4_0), 2u);
  EXPECT_EQ(GgmlTypeId(WeightFormat::kQ5_0), 6u);
  EXPECT_EQ(GgmlTypeId(WeightFormat::kQ4_K), 12u);
  EXPECT_EQ(GgmlTypeId(WeightFormat::kQ6_K), 14u);
  EXPECT_EQ(GgmlTypeId(WeightFormat::kQ4_1), 3u);
  EXPECT_EQ(GgmlTypeId(WeightFormat::kQ8_0), 8u);
  EXPECT_EQ(GgmlTypeId(WeightFormat::kBf16RowMajor), 30u);
  EXPECT_EQ(GgufTypeName(WeightFormat::kQ8_0), "Q8_0");
  EXPECT_EQ(FromGgmlTypeId(13), std::nullopt);  // Q5_K: not (yet) a format here
  EXPECT_EQ(FromGgufTypeName("Q4_K"), WeightFormat::kQ4_K);
  EXPECT_EQ(FromGgmlTypeId(0), std::nullopt);   // F32 is dequantized at load, not a weight format
  EXPECT_EQ(FromGgufTypeName("Q5_K"), std::nullopt);
  EXPECT_EQ(FromGgufTypeName(""), std::nullopt);
  EXPECT_EQ(FromGgufTypeName("q8_0"), std::nullopt);  // GGUF's names are upper case
  EXPECT_EQ(RegistryLayout(WeightFormat::kQ4_1), "row_major");
  EXPECT_EQ(RegistryBlockFormat(WeightFormat::kQ4_1), "q4_1");
  EXPECT_EQ(RegistryBlockFormat(WeightFormat::kBf16X12), "");
}

TEST(WeightFormatTest, UnknownNamesAreRefusedWithTheKnownOnes) {
  auto f = ParseWeightFormat("q5_k");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(),
            "unknown weight format \"q5_k\" (known: row_major, packed_panel_v1, packed_panel_x12_v1, "
            "q8_0, q4_0, q4_1, q5_0, q4_k, q6_k)");
  EXPECT_FALSE(ParseWeightFormat("Q8_0").ok());  // the GGUF spelling is not the name
  EXPECT_FALSE(ParseWeightFormat("").ok());
  EXPECT_EQ(FromRegistry("row_major", "q5_1").status().message(),
            "unknown weight format \"q5_1\" (known: row_major, packed_panel_v1, packed_panel_x12_v1, "
            "q8_0, q4_0, q4_1, q5_0, q4_k, q6_k)");
  EXPECT_EQ(FromRegistry("packed_panel_v1", "q8_0").status().message(),
            "block format q8_0 is read row_major, not \"packed_panel_v1\"");
  EXPECT_EQ(FromRegistry("q8_0", "").status().message(), "\"q8_0\" is a block format, not a layout");
  EXPECT_EQ(FromRegistry("row_major", "packed_panel_v1").status().message(),
            "\"packed_panel_v1\" is a layout, not a block format");
}

TEST(WeightFormatTest, BlockSizesAndBitsPerWeight) {
  // Hand-computed from the block layouts (util/ggml_blocks.h).
  EXPECT_EQ(BlockBytes(WeightFormat::kQ8_0), 2 + 32);
  EXPECT_EQ(BlockBytes(WeightFormat::kQ4_0), 2 + 16);
  EXPECT_EQ(BlockBytes(WeightFormat::kQ4_1), 2 + 2 + 16);
  EXPECT_EQ(BlockBytes(WeightFormat::kQ5_0), 2 + 4 + 16);
  EXPECT_EQ(BlockBytes(WeightFormat::kQ4_K), 2 + 2 + 12 + 128);
  EXPECT_EQ(BlockBytes(WeightFormat::kQ6_K), 128 + 64 + 16 + 2);
  EXPECT_EQ(BlockElems(WeightFormat::kQ4_1), 32);
  EXPECT_EQ(BlockElems(WeightFormat::kQ5_0), 32);
  EXPECT_EQ(BlockElems(WeightFormat::kQ4_K), 256);
  EXPECT_EQ(BlockElems(WeightFormat::kQ6_K), 256);
  EXPECT_EQ(BlockElems(WeightFormat::kBf16Packed), 1);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kBf16RowMajor), 16);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kBf16Packed), 16);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kBf16X12), 784.0 * 8 / 512);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kQ8_0), 8.5);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kQ4_0), 4.5);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kQ4_1), 5);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kQ5_0), 5.5);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kQ4_K), 4.5);
  EXPECT_DOUBLE_EQ(BitsPerWeight(WeightFormat::kQ6_K), 6.5625);
}

TEST(WeightFormatTest, TensorAndRowBytes) {
  // [10, 70]: 2 panels of 8 rows; 3 chunks of 32 columns (96), 2 x12 blocks per panel.
  EXPECT_EQ(*TensorBytes(WeightFormat::kBf16RowMajor, 10, 70), 10 * 70 * 2);
  EXPECT_EQ(*TensorBytes(WeightFormat::kBf16Packed, 10, 70), 16 * 96 * 2);
  EXPECT_EQ(*TensorBytes(WeightFormat::kBf16X12, 10, 70), 2 * 2 * 1024 + 64);
  EXPECT_EQ(*TensorBytes(WeightFormat::kBf16X12, 8, 64), 1024 + 64);
  EXPECT_EQ(*TensorBytes(WeightFormat::kQ8_0, 3, 2048), 3 * 64 * 34);
  EXPECT_EQ(*TensorBytes(WeightFormat::kQ4_0, 3, 2048), 3 * 64 * 18);
  EXPECT_EQ(*TensorBytes(WeightFormat::kQ4_1, 3, 2048), 3 * 64 * 20);
  EXPECT_EQ(*TensorBytes(WeightFormat::kQ5_0, 3, 2048), 3 * 64 * 22);
  EXPECT_EQ(*TensorBytes(WeightFormat::kQ4_K, 3, 2048), 3 * 8 * 144);
  EXPECT_EQ(*TensorBytes(WeightFormat::kQ6_K, 3, 2048), 3 * 8 * 210);
  EXPECT_EQ(RowBytes(WeightFormat::kQ4_1, 64), 40);
  EXPECT_EQ(RowBytes(WeightFormat::kQ6_K, 512), 420);
  EXPECT_EQ(RowBytes(WeightFormat::kQ8_0, 2048), 64 * 34);
  EXPECT_EQ(RowBytes(WeightFormat::kBf16RowMajor, 7), 14);
  EXPECT_EQ(PackedPanelElements(9, 33), 16 * 64);
  EXPECT_EQ(X12Blocks(9, 65), 2 * 2);
  EXPECT_EQ(X12Blocks(8, 64), 1);
  // Streamed x12 bytes: 784 per compact block, 1040 per raw one.
  EXPECT_EQ(X12StreamedBytes(4, 1), 3 * 784 + 1040);
  EXPECT_EQ(X12StreamedBytesOfTensor(4 * 1024 + 64), 4 * 784);
  EXPECT_EQ(X12StreamedBytesOfTensor(10), 10);

  EXPECT_EQ(TensorBytes(WeightFormat::kQ8_0, 2, 33).status().message(), "q8_0 needs cols % 32 == 0, cols is 33");
  EXPECT_EQ(TensorBytes(WeightFormat::kQ4_K, 2, 640).status().message(), "q4_k needs cols % 256 == 0, cols is 640");
  EXPECT_EQ(TensorBytes(WeightFormat::kQ4_0, 0, 32).status().message(),
            "q4_0 tensor [0, 32] has a non-positive dimension");
  EXPECT_EQ(TensorBytes(WeightFormat::kBf16X12, int64_t{1} << 40, int64_t{1} << 40).status().message(),
            "packed_panel_x12_v1 tensor [1099511627776, 1099511627776] is more bytes than an int64 holds");
  EXPECT_FALSE(TensorBytes(WeightFormat::kBf16Packed, int64_t{1} << 62, 64).ok());
  EXPECT_FALSE(TensorBytes(WeightFormat::kQ8_0, int64_t{1} << 62, 64).ok());
}

}  // namespace
}  // namespace dk::formats
