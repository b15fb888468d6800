// The weight formats: one enum, one name table and the byte geometry of every
// layout, so that the schema (elf/), the kernels, the loaders (weights/), the kernel
// registry and the passes spell and size a weight format the same way.
//
// A format is how a 2-D weight [rows, cols] stores its elements: bf16 row-major,
// bf16 in the packed panel layout (kernels/gemv/gemv.h), bf16 in 12 bits each
// (kernels/gemv/gemv_x12.h), or GGUF's blocks (util/ggml_blocks.h: 32 elements, 256 for the K-quants). Its
// canonical name is the one the kernel registry uses: a layout ("row_major",
// "packed_panel_v1", "packed_panel_x12_v1") for the bf16 formats, a block_format
// ("q8_0", ...) for the block formats, which the registry pairs with layout
// "row_major". A block format also has its GGUF type name and id.
//
// Adding a format (say GGUF's Q5_K) touches: this library (an enumerator in
// kAllWeightFormats, its row in weight_format.cc's table, its block size and
// elements here; its test), its block struct
// (util/ggml_blocks.h), its kernels (kernels/gemv: quantize.cc and the dispatch of
// gemv_quant.cc / gemv_quant_vnni.cc), its loader (weights/dequant.cc), and for the
// wire one BlockFormat value in elf/program.proto with its two lines in the one
// mapping, elf/bo_bytes.cc; the registry's variants of its kernel symbols are data.
// Names, GGUF types, sizes and checks elsewhere follow from the table.
//
// Thread-safety: constants and pure functions.
#ifndef DK_FORMATS_WEIGHT_FORMAT_H_
#define DK_FORMATS_WEIGHT_FORMAT_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dk::formats {

enum class WeightFormat : uint8_t {
  kBf16RowMajor,  // "row_major": rows of cols bf16
  kBf16Packed,    // "packed_panel_v1": panels of 8 rows x 32-column chunks, zero-padded
  kBf16X12,       // "packed_panel_x12_v1": bf16 in 12 bits, 8 x 64 blocks, lossless
  kQ8_0,          // "q8_0" (GGUF Q8_0): 34 bytes per 32 elements
  kQ4_0,          // "q4_0" (GGUF Q4_0): 18 bytes per 32 elements
  kQ4_1,          // "q4_1" (GGUF Q4_1): 20 bytes per 32 elements
  kQ5_0,          // "q5_0" (GGUF Q5_0): 22 bytes per 32 elements
  kQ4_K,          // "q4_k" (GGUF Q4_K): 144 bytes per 256 elements
  kQ6_K,          // "q6_k" (GGUF Q6_K): 210 bytes per 256 elements
};

// Every format, in enum order (tests and tables iterate over it).
inline constexpr WeightFormat kAllWeightFormats[] = {
    WeightFormat::kBf16RowMajor, WeightFormat::kBf16Packed, WeightFormat::kBf16X12,
    WeightFormat::kQ8_0,         WeightFormat::kQ4_0,       WeightFormat::kQ4_1,
    WeightFormat::kQ5_0,         WeightFormat::kQ4_K,       WeightFormat::kQ6_K,
};

// The registry's layout names.
inline constexpr char kRowMajorName[] = "row_major";
inline constexpr char kPackedPanelV1Name[] = "packed_panel_v1";
inline constexpr char kPackedPanelX12V1Name[] = "packed_panel_x12_v1";

// Elements of one GGUF block of the 32-element formats (Q8_0, Q4_0, Q4_1, Q5_0),
// and of one K-quant super-block (Q4_K, Q6_K). BlockElems(f) says which a format has.
inline constexpr int64_t kBlockElems = 32;
inline constexpr int64_t kSuperBlockElems = 256;

// The packed panel layout's tile: panels of kPanelRows rows, chunks of kChunkCols
// columns (one 64-byte line of bf16).
inline constexpr int64_t kPanelRows = 8;
inline constexpr int64_t kChunkCols = 32;

// The x12 layout: blocks of 8 rows x 64 columns (two chunks), 1024 bytes each in the
// tensor (room for a raw bf16 block); a compact block streams 768 bytes of codes and
// its 16-byte table; a 64-byte header ends the tensor.
inline constexpr int64_t kX12BlockCols = 2 * kChunkCols;
inline constexpr int64_t kX12CodeBytes = kPanelRows * (kX12BlockCols + kX12BlockCols / 2);  // 768
inline constexpr int64_t kX12TableBytes = 16;
inline constexpr int64_t kX12RawBytes = kPanelRows * kX12BlockCols * 2;  // 1024
inline constexpr int64_t kX12HeaderBytes = 64;

constexpr bool IsBlockFormat(WeightFormat f) {
  return f == WeightFormat::kQ8_0 || f == WeightFormat::kQ4_0 || f == WeightFormat::kQ4_1 ||
         f == WeightFormat::kQ5_0 || f == WeightFormat::kQ4_K || f == WeightFormat::kQ6_K;
}
// The K-quants: 256-element super-blocks of sub-blocks with their own scales.
constexpr bool IsKQuant(WeightFormat f) { return f == WeightFormat::kQ4_K || f == WeightFormat::kQ6_K; }

// Bytes of one block of a block format (2, one bf16 element, for the bf16 formats).
constexpr int64_t BlockBytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::kQ8_0: return 34;  // f16 d, int8 q[32]
    case WeightFormat::kQ4_0: return 18;  // f16 d, 16 bytes of nibbles
    case WeightFormat::kQ4_1: return 20;  // f16 d, f16 m, 16 bytes of nibbles
    case WeightFormat::kQ5_0: return 22;  // f16 d, 4 bytes of fifth bits, 16 bytes of nibbles
    case WeightFormat::kQ4_K: return 144;  // f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles
    case WeightFormat::kQ6_K: return 210;  // 128 + 64 bytes of 6-bit values, 16 int8 scales, f16 d
    default: return 2;
  }
}
// Elements of one block (1 for the bf16 formats).
constexpr int64_t BlockElems(WeightFormat f) {
  return IsKQuant(f) ? kSuperBlockElems : IsBlockFormat(f) ? kBlockElems : 1;
}

// Bits per weight a GEMV streams: 16 for bf16, 8.5 / 4.5 / 5 / 5.5 / 4.5 / 6.5625 for
// the blocks, 12.25 for x12's compact blocks (codes and table; a raw block streams 16).
double BitsPerWeight(WeightFormat f);

// The canonical name ("row_major", "q8_0", ...; see the top of this file).
absl::string_view Name(WeightFormat f);
// The format named `name` (Name's inverse); InvalidArgument naming the known ones.
absl::StatusOr<WeightFormat> ParseWeightFormat(absl::string_view name);
// The format of a kernel-registry variant: `block_format` "" is a bf16 `layout`,
// otherwise a block format read row_major. InvalidArgument for anything else.
absl::StatusOr<WeightFormat> FromRegistry(absl::string_view layout, absl::string_view block_format);
// The registry's layout of `f` ("row_major" for the block formats) and its
// block_format ("" for the bf16 formats).
absl::string_view RegistryLayout(WeightFormat f);
absl::string_view RegistryBlockFormat(WeightFormat f);

// GGUF's type name ("BF16", "Q8_0", ...) and ggml type id; "" and nullopt for the
// layouts GGUF has no type for (packed, x12). The names (Name's too) view string
// literals, so data() is NUL-terminated.
absl::string_view GgufTypeName(WeightFormat f);
std::optional<uint32_t> GgmlTypeId(WeightFormat f);
// The format of ggml type `id` or GGUF type name `name` ("Q8_0"; BF16 is
// kBf16RowMajor); nullopt for the others.
std::optional<WeightFormat> FromGgmlTypeId(uint32_t id);
std::optional<WeightFormat> FromGgufTypeName(absl::string_view name);

// Geometry. Unchecked products: callers pass a shape whose bytes fit int64 (or use
// TensorBytes, which checks).
constexpr int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
// bf16 elements of the packed panel layout of [rows, cols] (padding included).
constexpr int64_t PackedPanelElements(int64_t rows, int64_t cols) {
  return RoundUp(rows, kPanelRows) * RoundUp(cols, kChunkCols);
}
// Panels of `rows` rows, and 8 x 64 blocks per panel of `cols` columns, in the x12
// layout; X12Blocks: the blocks of [rows, cols].
constexpr int64_t X12Panels(int64_t rows) { return RoundUp(rows, kPanelRows) / kPanelRows; }
constexpr int64_t X12BlocksPerPanel(int64_t cols) { return RoundUp(cols, kX12BlockCols) / kX12BlockCols; }
constexpr int64_t X12Blocks(int64_t rows, int64_t cols) { return X12Panels(rows) * X12BlocksPerPanel(cols); }
// Bytes of the x12 layout of [rows, cols]: kX12RawBytes per block, then the header.
constexpr int64_t X12TensorBytes(int64_t rows, int64_t cols) {
  return X12Blocks(rows, cols) * kX12RawBytes + kX12HeaderBytes;
}
// Bytes a GEMV streams from an x12 tensor of `blocks` blocks, `raw` of them stored
// raw (bf16): codes and table of each compact block, the raw bytes and table of the
// others.
constexpr int64_t X12StreamedBytes(int64_t blocks, int64_t raw) {
  return (blocks - raw) * kX12CodeBytes + raw * kX12RawBytes + blocks * kX12TableBytes;
}
// The same for an x12 tensor of `tensor_bytes` bytes when every block is compact
// (784 of each 1024 bytes); the bytes themselves below one header.
constexpr int64_t X12StreamedBytesOfTensor(int64_t tensor_bytes) {
  return tensor_bytes < kX12HeaderBytes ? tensor_bytes
                                        : X12StreamedBytes((tensor_bytes - kX12HeaderBytes) / kX12RawBytes, 0);
}

// Bytes of one row of `cols` elements of a row-wise format (bf16 row-major and the
// block formats; the panel layouts have no rows of their own), cols a multiple of
// BlockElems(f).
constexpr int64_t RowBytes(WeightFormat f, int64_t cols) { return cols / BlockElems(f) * BlockBytes(f); }
// Bytes of a [rows, cols] tensor in `f`, padding and x12's header included;
// InvalidArgument for a non-positive dimension, cols not a multiple of BlockElems,
// or more bytes than an int64 holds.
absl::StatusOr<int64_t> TensorBytes(WeightFormat f, int64_t rows, int64_t cols);

}  // namespace dk::formats

#endif  // DK_FORMATS_WEIGHT_FORMAT_H_
