// The model graph: the baseline ("phase 4") decode program of a Llama-architecture
// model, the straightforward correct port before any decode optimization.
//  * every kernel launch is its own launch group (one device run);
//  * every input BO, weights included, is WRITE (written from host memory before
//    every run) and every output BO is OUTPUT (read back after every run); each
//    launch has its own BOs, and the host holds every activation;
//  * host steps: embedding lookup, RoPE cos/sin lookup, KV-cache write, decode
//    attention and top-k stay on the host.
// Per layer: attn_norm, q/k/v_proj, rope_q, rope_k | kv_write, attention |
// o_proj, attn_add, ffn_norm, gate/up_proj, silu_mul, down_proj, ffn_add (14
// groups); then final_norm and lm_head (2 groups) and top-k.
//
// The graph is data in baseline.cc: one decoder layer, written once, reading the
// model's config (elf::ModelShape). An architecture feature (a bias, another norm
// or activation, a per-layer attention window) is a config field that this layer
// checks and ValidateModelShape accepts, not a second copy of the graph.
#ifndef DK_GRAPH_BASELINE_H_
#define DK_GRAPH_BASELINE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "elf/program.pb.h"

namespace dk::graph {

// InvalidArgument for a shape that is not a valid model (ValidateModelShape).
absl::StatusOr<elf::Program> BuildBaseline(const elf::ModelShape& model);

// elf::ValidateModelShape: InvalidArgument naming the model and the field for
// sizes that are zero or above the limits in elf/elf.h, heads not dividing, an odd
// head_dim, a non-positive eps or RoPE theta, or an unknown RoPE scaling.
// BuildBaseline calls it; ValidateProgram calls it on every ELF read.
absl::Status ValidateModelShape(const elf::ModelShape& model);

}  // namespace dk::graph

#endif  // DK_GRAPH_BASELINE_H_
