// Rotary position embedding, half-split pairing as HF's `rotate_half`: element i
// of a head is rotated with element i + head_dim/2. Numerics follow HF in bf16:
//   out[i]     = bf16(bf16(x[i] * cos[i])     - bf16(x[i + h] * sin[i]))
//   out[i + h] = bf16(bf16(x[i + h] * cos[i]) + bf16(x[i] * sin[i]))
// with cos/sin computed in f32 and rounded to bf16 (h = head_dim / 2).
// Thread-safety: RopeTable is immutable after construction; functions are stateless.
#ifndef DK_KERNELS_ROPE_ROPE_H_
#define DK_KERNELS_ROPE_ROPE_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "util/aligned_buffer.h"
#include "util/bf16.h"

namespace dk::kernels {

// Llama-3 frequency scaling ("rope_type": "llama3" in an HF config).
struct Llama3RopeScaling {
  float factor = 32.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  float original_max_position = 8192.0f;
};

struct RopeConfig {
  size_t head_dim = 64;
  float theta = 10000.0f;
  bool llama3_scaling = false;  // plain RoPE when false
  Llama3RopeScaling llama3;
};

// The head_dim / 2 inverse frequencies, in f32 exactly as HF computes them
// (including the Llama-3 smoothing between the low and high frequency bands).
std::vector<float> RopeInverseFrequencies(const RopeConfig& config);

// cos / sin for positions [0, max_positions), bf16, [position][head_dim / 2].
class RopeTable {
 public:
  // InvalidArgument for an odd or zero head_dim, theta <= 0, zero positions, or
  // scaling factors that make no sense (factor <= 0, high <= low).
  static absl::StatusOr<RopeTable> Create(const RopeConfig& config, size_t max_positions);

  size_t head_dim() const { return head_dim_; }
  size_t max_positions() const { return max_positions_; }
  const bf16* cos(size_t pos) const { return cos_.data() + pos * (head_dim_ / 2); }
  const bf16* sin(size_t pos) const { return sin_.data() + pos * (head_dim_ / 2); }

 private:
  size_t head_dim_ = 0;
  size_t max_positions_ = 0;
  AlignedBuffer<bf16> cos_;  // [max_positions][head_dim / 2]
  AlignedBuffer<bf16> sin_;  // [max_positions][head_dim / 2]
};

// Rotates x [n_heads, head_dim] in place with one position's cos / sin rows
// (head_dim / 2 each). head_dim must be even. Any alignment.
void RopeHalfSplit(bf16* x, size_t n_heads, size_t head_dim, const bf16* cos,
                   const bf16* sin);

}  // namespace dk::kernels

#endif  // DK_KERNELS_ROPE_ROPE_H_
