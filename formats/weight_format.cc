#include "formats/weight_format.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace dk::formats {
namespace {

struct Row {
  WeightFormat format;
  const char* name;       // canonical (registry) name
  const char* gguf_name;  // "" when GGUF has no such type
  int64_t ggml_type;      // -1 when GGUF has no such type
};

// The one name table; in enum order (checked by weight_format_test).
constexpr Row kTable[] = {
    {WeightFormat::kBf16RowMajor, kRowMajorName, "BF16", 30},
    {WeightFormat::kBf16Packed, kPackedPanelV1Name, "", -1},
    {WeightFormat::kBf16X12, kPackedPanelX12V1Name, "", -1},
    {WeightFormat::kQ8_0, "q8_0", "Q8_0", 8},
    {WeightFormat::kQ4_0, "q4_0", "Q4_0", 2},
    {WeightFormat::kQ4_1, "q4_1", "Q4_1", 3},
    {WeightFormat::kQ5_0, "q5_0", "Q5_0", 6},
    {WeightFormat::kQ4_K, "q4_k", "Q4_K", 12},
    {WeightFormat::kQ6_K, "q6_k", "Q6_K", 14},
};
static_assert(std::size(kTable) == std::size(kAllWeightFormats), "one row per format");

const Row& RowOf(WeightFormat f) { return kTable[static_cast<size_t>(f)]; }

std::string KnownNames() {
  std::string names;
  for (const Row& r : kTable) absl::StrAppend(&names, names.empty() ? "" : ", ", r.name);
  return names;
}

// a * b for non-negative a, b; false when the product overflows int64.
bool Mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

}  // namespace

double BitsPerWeight(WeightFormat f) {
  if (f == WeightFormat::kBf16X12) {
    return 8.0 * X12StreamedBytes(1, 0) / static_cast<double>(kPanelRows * kX12BlockCols);
  }
  return 8.0 * BlockBytes(f) / static_cast<double>(BlockElems(f));
}

absl::string_view Name(WeightFormat f) { return RowOf(f).name; }

absl::StatusOr<WeightFormat> ParseWeightFormat(absl::string_view name) {
  for (const Row& r : kTable) {
    if (name == r.name) return r.format;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight format \"", name, "\" (known: ", KnownNames(), ")"));
}

absl::StatusOr<WeightFormat> FromRegistry(absl::string_view layout, absl::string_view block_format) {
  if (block_format.empty()) {
    absl::StatusOr<WeightFormat> f = ParseWeightFormat(layout);
    if (f.ok() && IsBlockFormat(*f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", layout, "\" is a block format, not a layout"));
    }
    return f;
  }
  absl::StatusOr<WeightFormat> f = ParseWeightFormat(block_format);
  if (!f.ok()) return f.status();
  if (!IsBlockFormat(*f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", block_format, "\" is a layout, not a block format"));
  }
  if (layout != kRowMajorName) {
    return absl::InvalidArgumentError(absl::StrCat("block format ", block_format, " is read ",
                                                   kRowMajorName, ", not \"", layout, "\""));
  }
  return f;
}

absl::string_view RegistryLayout(WeightFormat f) { return IsBlockFormat(f) ? kRowMajorName : Name(f); }

absl::string_view RegistryBlockFormat(WeightFormat f) { return IsBlockFormat(f) ? Name(f) : ""; }

absl::string_view GgufTypeName(WeightFormat f) { return RowOf(f).gguf_name; }

std::optional<uint32_t> GgmlTypeId(WeightFormat f) {
  if (RowOf(f).ggml_type < 0) return std::nullopt;
  return static_cast<uint32_t>(RowOf(f).ggml_type);
}

std::optional<WeightFormat> FromGgmlTypeId(uint32_t id) {
  for (const Row& r : kTable) {
    if (r.ggml_type == static_cast<int64_t>(id)) return r.format;
  }
  return std::nullopt;
}

std::optional<WeightFormat> FromGgufTypeName(absl::string_view name) {
  for (const Row& r : kTable) {
    if (!name.empty() && name == r.gguf_name) return r.format;
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> TensorBytes(WeightFormat f, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(Name(f), " tensor [", rows, ", ", cols,
                                                   "] has a non-positive dimension"));
  }
  const auto too_large = [&] {
    return absl::InvalidArgumentError(absl::StrCat(Name(f), " tensor [", rows, ", ", cols,
                                                   "] is more bytes than an int64 holds"));
  };
  // Rounding up adds less than one tile to a dimension below 2^62.
  if (rows > (int64_t{1} << 62) || cols > (int64_t{1} << 62)) return too_large();
  int64_t bytes = 0;
  switch (f) {
    case WeightFormat::kBf16Packed: {
      int64_t elements = 0;
      if (!Mul(RoundUp(rows, kPanelRows), RoundUp(cols, kChunkCols), &elements) || !Mul(elements, 2, &bytes)) {
        return too_large();
      }
      return bytes;
    }
    case WeightFormat::kBf16X12: {
      int64_t blocks = 0;
      if (!Mul(X12Panels(rows), X12BlocksPerPanel(cols), &blocks) ||
          blocks > (std::numeric_limits<int64_t>::max() - kX12HeaderBytes) / kX12RawBytes) {
        return too_large();
      }
      return X12TensorBytes(rows, cols);
    }
    default: {  // rows of blocks (bf16: blocks of one element)
      if (cols % BlockElems(f) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(Name(f), " needs cols % ", BlockElems(f), " == 0, cols is ", cols));
      }
      if (!Mul(rows, RowBytes(f, cols), &bytes)) return too_large();
      return bytes;
    }
  }
}

}  // namespace dk::formats
