// RMSNorm as HF's LlamaRMSNorm computes it in bf16:
//   inv = 1 / sqrt(mean(x^2) + eps)           (f32 sum of squares)
//   out = bf16(weight * bf16(x * inv))
// and as Gemma3RMSNorm does: out = bf16((x * inv) * (1 + weight)).
// Any pointer alignment; out may alias x. Activations are expected to be finite.
// Thread-safety: stateless.
#ifndef DK_KERNELS_NORM_RMSNORM_H_
#define DK_KERNELS_NORM_RMSNORM_H_

#include <cstddef>

#include "util/bf16.h"

namespace dk::kernels {

void RmsNorm(const bf16* x, const bf16* weight, size_t n, float eps, bf16* out);

// Gemma's RMSNorm (Gemma3RMSNorm): out = bf16((x * inv) * (1 + weight)), computed in
// f32 and rounded once.
void RmsNormPlusOne(const bf16* x, const bf16* weight, size_t n, float eps, bf16* out);

// RmsNorm (plus_one: RmsNormPlusOne) over each of `heads` rows of `head_dim` elements,
// all scaled by one `weight` of head_dim (Qwen3 / Gemma 3 QK-norm of each q / k head).
void RmsNormHeads(const bf16* x, const bf16* weight, size_t heads, size_t head_dim, float eps,
                  bf16* out, bool plus_one = false);

}  // namespace dk::kernels

#endif  // DK_KERNELS_NORM_RMSNORM_H_
