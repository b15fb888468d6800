// Small decode kernels on bf16 activations, with torch's bf16 rounding points:
//  * SiluMul:  out = bf16(bf16(silu(gate)) * up)      (LlamaMLP: act_fn(gate) * up)
//  * GeluTanhMul: out = bf16(bf16(gelu_tanh(gate)) * up) (Gemma's MLP, gelu_pytorch_tanh)
//  * Add:      out = bf16(a + b)                      (residual add)
//  * AddBias:  out = bf16(x + bias), x f32            (Linear's bias: addmm rounds once)
//  * EmbeddingLookup: out = table[id, :]              (bf16 row copy)
// All accept any pointer alignment and in-place use (out == an input).
// Activations are expected to be finite (NaN is not preserved by the SIMD rounding).
// Thread-safety: stateless; safe to call concurrently on disjoint outputs.
#ifndef DK_KERNELS_ELEMENTWISE_ELEMENTWISE_H_
#define DK_KERNELS_ELEMENTWISE_ELEMENTWISE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "util/bf16.h"

namespace dk::kernels {

void SiluMul(const bf16* gate, const bf16* up, size_t n, bf16* out);
void GeluTanhMul(const bf16* gate, const bf16* up, size_t n, bf16* out);
void Add(const bf16* a, const bf16* b, size_t n, bf16* out);
void AddBias(const float* x, const bf16* bias, size_t n, bf16* out);

// Copies row `id` of the [vocab, dim] table into out; InvalidArgument if
// id >= vocab (ids come from users and files).
absl::Status EmbeddingLookup(const bf16* table, size_t vocab, size_t dim, uint32_t id,
                             bf16* out);

}  // namespace dk::kernels

#endif  // DK_KERNELS_ELEMENTWISE_ELEMENTWISE_H_
