// The baseline ("phase 4") decode program of a Llama-architecture model: the
// straightforward correct port before any decode optimization.
//  * every kernel launch is its own launch group (one device run);
//  * every input BO, weights included, is WRITE (written from host memory before
//    every run) and every output BO is OUTPUT (read back after every run); each
//    launch has its own BOs, and the host holds every activation;
//  * host steps: embedding lookup, RoPE cos/sin lookup, KV-cache write, decode
//    attention and top-k stay on the host.
// Per layer: attn_norm, q/k/v_proj, rope_q, rope_k | kv_write, attention |
// o_proj, attn_add, ffn_norm, gate/up_proj, silu_mul, down_proj, ffn_add (14
// groups); then final_norm and lm_head (2 groups) and top-k.
#ifndef DK_TOOLS_ELFC_BASELINE_H_
#define DK_TOOLS_ELFC_BASELINE_H_

#include "absl/status/statusor.h"
#include "elf/program.pb.h"

namespace dk::elfc {

// InvalidArgument for a shape that is not a valid Llama model (zero sizes, heads
// not dividing, odd head_dim, ...).
absl::StatusOr<elf::Program> BuildBaseline(const elf::ModelShape& model);

// Checks a model shape (used by BuildBaseline and the runtime).
absl::Status ValidateModelShape(const elf::ModelShape& model);

}  // namespace dk::elfc

#endif  // DK_TOOLS_ELFC_BASELINE_H_
