// RMSNorm as HF's LlamaRMSNorm computes it in bf16:
//   inv = 1 / sqrt(mean(x^2) + eps)           (f32 sum of squares)
//   out = bf16(weight * bf16(x * inv))
// Any pointer alignment; out may alias x. Activations are expected to be finite.
// Thread-safety: stateless.
#ifndef DK_KERNELS_NORM_RMSNORM_H_
#define DK_KERNELS_NORM_RMSNORM_H_

#include <cstddef>

#include "util/bf16.h"

namespace dk::kernels {

void RmsNorm(const bf16* x, const bf16* weight, size_t n, float eps, bf16* out);

// The same over each of `heads` rows of `head_dim` elements, all scaled by one
// `weight` of head_dim (Qwen3 / Gemma 3 QK-norm: RMSNorm of each q / k head).
void RmsNormHeads(const bf16* x, const bf16* weight, size_t heads, size_t head_dim, float eps,
                  bf16* out);

}  // namespace dk::kernels

#endif  // DK_KERNELS_NORM_RMSNORM_H_
