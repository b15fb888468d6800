#include "weights/dequant.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "formats/weight_format.h"
#include "util/check.h"
#include "util/ggml_blocks.h"

namespace dk::weights {
namespace {

constexpr int64_t kQk = formats::kBlockElems;  // elements per Q8_0 / Q4_0 / Q4_1 block

inline uint16_t LoadU16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));  // little-endian file data
}

inline float LoadF32(const uint8_t* p) {
  const uint32_t u = uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) |
                     (uint32_t{p[3]} << 24);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One block of 32 elements -> f32, in gguf-py's operation order.
inline void DequantBlock(GgmlType type, const uint8_t* b, float* out) {
  switch (type) {
    case GgmlType::kQ8_0: {
      const auto* blk = reinterpret_cast<const ggml::BlockQ8_0*>(b);
      const float d = ggml::F16FieldToF32(blk->d);
      for (int i = 0; i < kQk; ++i) out[i] = static_cast<float>(blk->qs[i]) * d;
      return;
    }
    case GgmlType::kQ4_0: {
      const auto* blk = reinterpret_cast<const ggml::BlockQ4_0*>(b);
      const float d = ggml::F16FieldToF32(blk->d);
      for (int i = 0; i < kQk; ++i) out[i] = d * static_cast<float>(ggml::Nibble(blk->qs, i) - 8);
      return;
    }
    case GgmlType::kQ4_1: {
      const auto* blk = reinterpret_cast<const ggml::BlockQ4_1*>(b);
      const float d = ggml::F16FieldToF32(blk->d);
      const float m = ggml::F16FieldToF32(blk->m);
      for (int i = 0; i < kQk; ++i) {
        const float p = d * static_cast<float>(ggml::Nibble(blk->qs, i));
        out[i] = p + m;
      }
      return;
    }
    default:
      DK_CHECK(false && "not a 32-element block type");
  }
}

}  // namespace

float F16ToF32(uint16_t h) { return ggml::F16ToF32(h); }

bool IsSupportedGgmlType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<uint64_t> GgmlRowBytes(GgmlType type, int64_t n) {
  if (!IsSupportedGgmlType(type)) {
    absl::StatusOr<GgmlTypeTraits> traits = GetGgmlTypeTraits(type);
    return absl::UnimplementedError(
        absl::StrCat("unsupported ggml type ",
                     traits.ok() ? traits->name : "unknown", " (",
                     static_cast<uint32_t>(type),
                     "); supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1"));
  }
  if (n < 0) return absl::InvalidArgumentError("negative element count");
  switch (type) {
    case GgmlType::kF32:
      return static_cast<uint64_t>(n) * 4;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return static_cast<uint64_t>(n) * 2;
    default:
      break;
  }
  if (n % kQk != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row of ", n, " elements is not a multiple of the block size ", kQk));
  }
  return static_cast<uint64_t>(
      formats::RowBytes(*formats::FromGgmlTypeId(static_cast<uint32_t>(type)), n));
}

void DequantizeToF32(GgmlType type, const uint8_t* src, int64_t n, float* out) {
  switch (type) {
    case GgmlType::kF32:
      for (int64_t i = 0; i < n; ++i) out[i] = LoadF32(src + 4 * i);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(LoadU16(src + 2 * i));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(bf16{LoadU16(src + 2 * i)});
      return;
    default:
      break;
  }
  const uint64_t block_bytes = *GgmlRowBytes(type, kQk);
  DK_CHECK(n % kQk == 0);
  for (int64_t b = 0; b < n / kQk; ++b) {
    DequantBlock(type, src + b * block_bytes, out + b * kQk);
  }
}

void DequantizeToBf16(GgmlType type, const uint8_t* src, int64_t n, bf16* out) {
  switch (type) {
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16{LoadU16(src + 2 * i)};
      return;
    case GgmlType::kF32:
      for (int64_t i = 0; i < n; ++i) out[i] = F32ToBf16(LoadF32(src + 4 * i));
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = F32ToBf16(F16ToF32(LoadU16(src + 2 * i)));
      return;
    default:
      break;
  }
  const uint64_t block_bytes = *GgmlRowBytes(type, kQk);
  DK_CHECK(n % kQk == 0);
  float tmp[kQk];
  for (int64_t b = 0; b < n / kQk; ++b) {
    DequantBlock(type, src + b * block_bytes, tmp);
    for (int i = 0; i < kQk; ++i) out[b * kQk + i] = F32ToBf16(tmp[i]);
  }
}

int64_t GgufQkRowToHfRow(int64_t gguf_row, int64_t rows, int64_t n_head) {
  const int64_t half = rows / n_head / 2;  // rows per head half
  const int64_t h = gguf_row / (2 * half);
  const int64_t r = gguf_row % (2 * half);
  const int64_t i = r / 2;
  const int64_t j = r % 2;
  return h * 2 * half + j * half + i;
}

int64_t HfRowToGgufQkRow(int64_t hf_row, int64_t rows, int64_t n_head) {
  const int64_t half = rows / n_head / 2;
  const int64_t h = hf_row / (2 * half);
  const int64_t r = hf_row % (2 * half);
  const int64_t j = r / half;
  const int64_t i = r % half;
  return h * 2 * half + 2 * i + j;
}

}  // namespace dk::weights
