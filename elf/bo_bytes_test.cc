#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "elf/elf.h"
#include "formats/weight_format.h"
#include "gtest/gtest.h"

namespace dk::elf {
namespace {

// The wire enum and the format library map one to one: every BlockFormat value to a
// block format and back, every block format of the library to a wire value.
TEST(BoBytes, BlockFormatsMapToTheFormatLibrary) {
  const auto* values = BlockFormat_descriptor();
  for (int i = 0; i < values->value_count(); ++i) {
    const auto format = static_cast<BlockFormat>(values->value(i)->number());
    const std::optional<formats::WeightFormat> f = WeightFormatOfBlocks(format);
    if (format == BLOCK_FORMAT_NONE) {
      EXPECT_FALSE(f.has_value());
      continue;
    }
    ASSERT_TRUE(f.has_value()) << values->value(i)->name();
    EXPECT_TRUE(formats::IsBlockFormat(*f)) << values->value(i)->name();
    EXPECT_EQ(BlockFormatOf(*f), format) << values->value(i)->name();
    EXPECT_EQ(absl::AsciiStrToUpper(BlockFormatName(format)), values->value(i)->name());
  }
  for (const formats::WeightFormat f : formats::kAllWeightFormats) {
    EXPECT_EQ(BlockFormatOf(f) != BLOCK_FORMAT_NONE, formats::IsBlockFormat(f)) << formats::Name(f);
  }
  EXPECT_FALSE(WeightFormatOfBlocks(static_cast<BlockFormat>(99)).has_value());
}

BufferObject Weight(int64_t rows, int64_t cols, const std::string& layout, BlockFormat blocks = BLOCK_FORMAT_NONE) {
  BufferObject bo;
  bo.set_name("w");
  bo.set_dtype(BF16);
  bo.add_shape(rows);
  bo.add_shape(cols);
  bo.set_layout(layout);
  bo.set_weight_tensor("t");
  bo.set_block_format(blocks);
  return bo;
}

// Each layout's bytes, hand-computed for [10, 70] / [3, 2048].
TEST(BoBytes, EveryLayoutAndBlockFormat) {
  EXPECT_EQ(*BoBytes(Weight(10, 70, "")), 10 * 70 * 2);
  EXPECT_EQ(*BoBytes(Weight(10, 70, "row_major")), 10 * 70 * 2);
  EXPECT_EQ(*BoBytes(Weight(10, 70, "packed_panel_v1")), 16 * 96 * 2);
  EXPECT_EQ(*BoBytes(Weight(10, 70, "packed_panel_x12_v1")), 2 * 2 * 1024 + 64);
  EXPECT_EQ(*BoBytes(Weight(3, 2048, "", Q8_0)), 3 * 64 * 34);
  EXPECT_EQ(*BoBytes(Weight(3, 2048, "row_major", Q4_0)), 3 * 64 * 18);
  EXPECT_EQ(*BoBytes(Weight(3, 2048, "", Q4_1)), 3 * 64 * 20);
  EXPECT_EQ(*BoBytes(Weight(3, 2048, "", Q5_0)), 3 * 64 * 22);
  EXPECT_EQ(*BoBytes(Weight(3, 2048, "", Q4_K)), 3 * 8 * 144);
  EXPECT_EQ(*BoBytes(Weight(3, 2048, "", Q6_K)), 3 * 8 * 210);
  // The K-quants' rows are whole 256-element super-blocks.
  EXPECT_EQ(BoBytes(Weight(3, 2080, "", Q6_K)).status().message(),
            "BO \"w\": block format q6_k needs cols % 256 == 0, cols is 2080");
  EXPECT_EQ(BoBytes(Weight(3, 2048, "q8_0")).status().message(), "BO \"w\" has unknown layout \"q8_0\"");
  EXPECT_EQ(BoBytes(Weight(3, 2048, "packed_panel_v1", Q8_0)).status().message(),
            "BO \"w\": block format q8_0 needs a 2-D row_major BF16 weight");
  EXPECT_EQ(BoBytes(Weight(3, 2048, "", static_cast<BlockFormat>(9))).status().message(),
            "BO \"w\" has unknown block format 9");
  EXPECT_EQ(*WeightFormatOf(Weight(3, 2048, "packed_panel_x12_v1")), formats::WeightFormat::kBf16X12);
  EXPECT_EQ(*WeightFormatOf(Weight(3, 2048, "", Q4_0)), formats::WeightFormat::kQ4_0);
}

TEST(BoBytes, X12StreamedBytesAreTheCompactBlocks) {
  BufferObject bo = Weight(10, 70, "packed_panel_x12_v1");
  bo.set_size_bytes(*BoBytes(bo));
  EXPECT_EQ(X12StreamedBytes(bo), 4 * 784);
  bo = Weight(10, 70, "packed_panel_v1");
  bo.set_size_bytes(*BoBytes(bo));
  EXPECT_EQ(X12StreamedBytes(bo), 16 * 96 * 2);
}

}  // namespace
}  // namespace dk::elf
