// Bytes of a BO for its shape, dtype and layout, and the one mapping between the
// wire enum BlockFormat and the weight formats (formats/weight_format.h).
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "elf/internal.h"
#include "formats/weight_format.h"
#include "util/status.h"

namespace dk::elf {

using internal::CheckedNumel;
using internal::MulWithinLimit;

int64_t DTypeBytes(DType t) {
  switch (t) {
    case BF16: return 2;
    case F32: return 4;
    case I32: return 4;
    default: return 0;
  }
}

std::optional<formats::WeightFormat> WeightFormatOfBlocks(BlockFormat format) {
  switch (format) {
    case Q8_0: return formats::WeightFormat::kQ8_0;
    case Q4_0: return formats::WeightFormat::kQ4_0;
    case Q4_1: return formats::WeightFormat::kQ4_1;
    case Q5_0: return formats::WeightFormat::kQ5_0;
    case Q4_K: return formats::WeightFormat::kQ4_K;
    case Q6_K: return formats::WeightFormat::kQ6_K;
    default: return std::nullopt;
  }
}

BlockFormat BlockFormatOf(formats::WeightFormat format) {
  switch (format) {
    case formats::WeightFormat::kQ8_0: return Q8_0;
    case formats::WeightFormat::kQ4_0: return Q4_0;
    case formats::WeightFormat::kQ4_1: return Q4_1;
    case formats::WeightFormat::kQ5_0: return Q5_0;
    case formats::WeightFormat::kQ4_K: return Q4_K;
    case formats::WeightFormat::kQ6_K: return Q6_K;
    default: return BLOCK_FORMAT_NONE;
  }
}

std::string BlockFormatName(BlockFormat format) {
  const std::optional<formats::WeightFormat> f = WeightFormatOfBlocks(format);
  return f ? std::string(formats::Name(*f)) : "";
}

absl::StatusOr<formats::WeightFormat> WeightFormatOf(const BufferObject& bo) {
  if (bo.block_format() != BLOCK_FORMAT_NONE) {
    if (const std::optional<formats::WeightFormat> f = WeightFormatOfBlocks(bo.block_format())) return *f;
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\" has unknown block format ",
                                                   static_cast<int>(bo.block_format())));
  }
  const absl::StatusOr<formats::WeightFormat> f =
      formats::FromRegistry(bo.layout().empty() ? formats::kRowMajorName : bo.layout(), "");
  if (!f.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("BO \"", bo.name(), "\" has unknown layout \"", bo.layout(), "\""));
  }
  return *f;
}

int64_t X12StreamedBytes(const BufferObject& bo) {
  if (bo.layout() != formats::kPackedPanelX12V1Name) return bo.size_bytes();
  return formats::X12StreamedBytesOfTensor(bo.size_bytes());
}

namespace {

// Bytes of a BO in a block format: a 2-D row-major BF16 weight, cols a multiple of
// the format's block.
absl::StatusOr<int64_t> BlockBoBytes(const BufferObject& bo) {
  DK_ASSIGN_OR_RETURN(const formats::WeightFormat f, WeightFormatOf(bo));
  const std::string format(formats::Name(f));
  const std::string& layout = bo.layout();
  if (bo.weight_tensor().empty() || bo.dtype() != BF16 || bo.shape_size() != 2 ||
      !(layout.empty() || layout == formats::kRowMajorName)) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\": block format ", format,
                                                   " needs a 2-D row_major BF16 weight"));
  }
  if (bo.shape(1) % formats::BlockElems(f) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\": block format ", format,
                                                   " needs cols % ", formats::BlockElems(f), " == 0, cols is ",
                                                   bo.shape(1)));
  }
  return formats::TensorBytes(f, bo.shape(0), bo.shape(1));
}

}  // namespace

absl::StatusOr<int64_t> BoBytes(const BufferObject& bo) {
  const int64_t elem = DTypeBytes(bo.dtype());
  if (elem == 0) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\" has no dtype"));
  }
  if (bo.shape().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("BO \"", bo.name(), "\" has no shape"));
  }
  const std::string what = absl::StrCat("BO \"", bo.name(), "\"");
  auto n = CheckedNumel(bo.shape(), what);
  if (!n.ok()) return n.status();
  if (bo.blocks_as_stored() && bo.block_format() == BLOCK_FORMAT_NONE) {
    return absl::InvalidArgumentError(
        absl::StrCat("BO \"", bo.name(), "\": blocks_as_stored without a block format"));
  }
  if (bo.block_format() != BLOCK_FORMAT_NONE) return BlockBoBytes(bo);
  DK_ASSIGN_OR_RETURN(const formats::WeightFormat f, WeightFormatOf(bo));
  int64_t bytes = 0;
  if (f == formats::WeightFormat::kBf16Packed) {
    if (bo.shape_size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("BO \"", bo.name(), "\": packed_panel_v1 needs a 2-D shape"));
    }
    // Both dimensions are at most kMaxBytes (CheckedNumel), so the padded element
    // count (at most 8 x 32 times the BO's) fits an int64.
    if (MulWithinLimit(formats::PackedPanelElements(bo.shape(0), bo.shape(1)), elem, &bytes)) return bytes;
  } else if (f == formats::WeightFormat::kBf16X12) {
    if (bo.shape_size() != 2 || bo.dtype() != BF16) {
      return absl::InvalidArgumentError(
          absl::StrCat("BO \"", bo.name(), "\": packed_panel_x12_v1 needs a 2-D BF16 shape"));
    }
    DK_ASSIGN_OR_RETURN(bytes, formats::TensorBytes(f, bo.shape(0), bo.shape(1)));
    if (bytes <= kMaxBytes) return bytes;
  } else if (MulWithinLimit(*n, elem, &bytes)) {  // row_major, any rank and dtype
    return bytes;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " would be more than ", kMaxBytes, " bytes"));
}

}  // namespace dk::elf
