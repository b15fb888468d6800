#include "kernels/gemv/quantize.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"
#include "util/ggml_blocks.h"

namespace dk::kernels {
namespace {

using ggml::kBlockElems;

void BlockQ8_0(const float* x, ggml::BlockQ8_0* b) {
  float amax = 0;
  for (size_t i = 0; i < kBlockElems; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  ggml::StoreF16Field(d, b->d);
  for (size_t i = 0; i < kBlockElems; ++i) {
    b->qs[i] = static_cast<int8_t>(std::clamp(std::round(x[i] * id), -127.0f, 127.0f));
  }
}

void BlockQ4_0(const float* x, ggml::BlockQ4_0* b) {
  float amax = 0, max = 0;
  for (size_t i = 0; i < kBlockElems; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  ggml::StoreF16Field(d, b->d);
  auto q = [&](size_t i) {
    return static_cast<uint8_t>(std::min(15, static_cast<int>(x[i] * id + 8.5f)));
  };
  for (size_t i = 0; i < kBlockElems / 2; ++i) {
    b->qs[i] = static_cast<uint8_t>(q(i) | (q(i + kBlockElems / 2) << 4));
  }
}

void BlockQ4_1(const float* x, ggml::BlockQ4_1* b) {
  float lo = x[0], hi = x[0];
  for (size_t i = 1; i < kBlockElems; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float d = (hi - lo) / 15.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  ggml::StoreF16Field(d, b->d);
  ggml::StoreF16Field(lo, b->m);
  auto q = [&](size_t i) {
    return static_cast<uint8_t>(std::min(15, static_cast<int>((x[i] - lo) * id + 0.5f)));
  };
  for (size_t i = 0; i < kBlockElems / 2; ++i) {
    b->qs[i] = static_cast<uint8_t>(q(i) | (q(i + kBlockElems / 2) << 4));
  }
}

}  // namespace

void QuantizeWeights(WeightFormat format, const bf16* w, size_t rows, size_t cols, uint8_t* out) {
  DK_CHECK(CanQuantizeWeights(format));
  DK_CHECK(cols % kBlockElems == 0);
  const size_t block_bytes = formats::BlockBytes(format);
  float x[kBlockElems];
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; c += kBlockElems, out += block_bytes) {
      for (size_t i = 0; i < kBlockElems; ++i) x[i] = Bf16ToF32(w[r * cols + c + i]);
      switch (format) {
        case WeightFormat::kQ8_0: BlockQ8_0(x, reinterpret_cast<ggml::BlockQ8_0*>(out)); break;
        case WeightFormat::kQ4_0: BlockQ4_0(x, reinterpret_cast<ggml::BlockQ4_0*>(out)); break;
        case WeightFormat::kQ4_1: BlockQ4_1(x, reinterpret_cast<ggml::BlockQ4_1*>(out)); break;
        default: break;  // not a block format
      }
    }
  }
}

}  // namespace dk::kernels
