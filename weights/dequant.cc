#include "weights/dequant.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/check.h"
#include "util/ggml_blocks.h"
#include "weights/dequant_kquant.h"

namespace dk::weights {
namespace {

// The most elements one block holds (a K-quant super-block).
constexpr int64_t kMaxBlockElems = ggml::kSuperBlockElems;

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

void DequantQ8_0Block(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ8_0*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  for (size_t i = 0; i < ggml::kBlockElems; ++i) out[i] = static_cast<float>(blk->qs[i]) * d;
}

void DequantQ4_0Block(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ4_0*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  for (size_t i = 0; i < ggml::kBlockElems; ++i) {
    out[i] = d * static_cast<float>(ggml::Nibble(blk->qs, i) - 8);
  }
}

void DequantQ4_1Block(const uint8_t* b, float* out) {
  const auto* blk = reinterpret_cast<const ggml::BlockQ4_1*>(b);
  const float d = ggml::F16FieldToF32(blk->d);
  const float m = ggml::F16FieldToF32(blk->m);
  for (size_t i = 0; i < ggml::kBlockElems; ++i) {
    const float p = d * static_cast<float>(ggml::Nibble(blk->qs, i));
    out[i] = p + m;
  }
}

// Writes one block's elements as f32, in gguf-py's operation order.
using BlockDequantizer = void (*)(const uint8_t* block, float* out);

// The block dequantizer of `type`; nullptr for the element types (F32, F16, BF16)
// and the types this library does not dequantize.
BlockDequantizer BlockDequantizerOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0: return DequantQ8_0Block;
    case GgmlType::kQ4_0: return DequantQ4_0Block;
    case GgmlType::kQ4_1: return DequantQ4_1Block;
    case GgmlType::kQ5_0: return internal::DequantQ5_0Block;
    case GgmlType::kQ5_1: return internal::DequantQ5_1Block;
    case GgmlType::kQ2_K: return internal::DequantQ2_KBlock;
    case GgmlType::kQ3_K: return internal::DequantQ3_KBlock;
    case GgmlType::kQ4_K: return internal::DequantQ4_KBlock;
    case GgmlType::kQ5_K: return internal::DequantQ5_KBlock;
    case GgmlType::kQ6_K: return internal::DequantQ6_KBlock;
    default: return nullptr;
  }
}

// Calls `emit(first_element, f32_values, count)` for each block of `n` elements of a
// block type, in order.
template <typename Emit>
void ForEachBlock(GgmlType type, const uint8_t* src, int64_t n, Emit emit) {
  const BlockDequantizer dequant = BlockDequantizerOf(type);
  const absl::StatusOr<GgmlTypeTraits> traits = GetGgmlTypeTraits(type);
  DK_CHECK(dequant != nullptr && traits.ok() && traits->block_size <= kMaxBlockElems);
  const int64_t elems = traits->block_size;
  DK_CHECK(n % elems == 0);
  float tmp[kMaxBlockElems];
  for (int64_t b = 0; b < n / elems; ++b) {
    dequant(src + b * traits->type_size, tmp);
    emit(b * elems, tmp, elems);
  }
}

}  // namespace

float F16ToF32(uint16_t h) { return ggml::F16ToF32(h); }

bool IsSupportedGgmlType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return true;
    default:
      return BlockDequantizerOf(type) != nullptr;
  }
}

absl::StatusOr<uint64_t> GgmlRowBytes(GgmlType type, int64_t n) {
  absl::StatusOr<GgmlTypeTraits> traits = GetGgmlTypeTraits(type);
  if (!IsSupportedGgmlType(type) || !traits.ok()) {
    return absl::UnimplementedError(absl::StrCat(
        "unsupported ggml type ", traits.ok() ? traits->name : "unknown", " (",
        static_cast<uint32_t>(type),
        "); supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
        "Q5_K, Q6_K"));
  }
  if (n < 0) return absl::InvalidArgumentError("negative element count");
  if (n % traits->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("row of ", n, " elements is not a multiple of the ",
                                                   traits->name, " block size ", traits->block_size));
  }
  return static_cast<uint64_t>(n / traits->block_size) * static_cast<uint64_t>(traits->type_size);
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
  ForEachBlock(type, src, n, [out](int64_t first, const float* v, int64_t count) {
    std::memcpy(out + first, v, static_cast<size_t>(count) * sizeof(float));
  });
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
  ForEachBlock(type, src, n, [out](int64_t first, const float* v, int64_t count) {
    for (int64_t i = 0; i < count; ++i) out[first + i] = F32ToBf16(v[i]);
  });
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
