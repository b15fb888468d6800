// What llama.cpp's converter writes for each GGUF architecture LoadGguf reads
// (llama, qwen2, qwen3, gemma3), undone (internal to //weights): the metadata keys
// under the architecture's prefix -> ModelShape (with the facts the file leaves
// implicit), GGUF tensor names -> HF names, and how the converter changed values
// (Q/K rows permuted for llama only, Gemma's norms stored as 1 + w).
#ifndef DK_WEIGHTS_GGUF_ARCH_H_
#define DK_WEIGHTS_GGUF_ARCH_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "elf/program.pb.h"
#include "weights/gguf.h"

namespace dk::weights {

// The model shape `f`'s metadata describes (`path` names it in messages).
// Unimplemented naming general.architecture when it is none of the four, or a
// feature the graph does not have (rope.scaling.type metadata, a rope_freqs.weight
// table of no Llama 3 scaling, logit soft-capping); Llama 3's scaling comes from the
// rope_freqs.weight tensor llama.cpp's converter writes (see gguf_arch.cc);
// InvalidArgument for sizes out of elf/elf.h's limits or inconsistent together.
absl::StatusOr<elf::ModelShape> ShapeFromGguf(const GgufFile& f, const std::string& path);

// The HF name of GGUF tensor `name` ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight") in a model of `shape`'s family; "" when
// the tensor has no HF counterpart (rope_freqs.weight, another family's tensors).
std::string GgufNameToHf(const elf::ModelShape& shape, absl::string_view name);

// Attention heads over which the converter permuted the rows of HF tensor `hf_name`
// for interleaved RoPE (GgufQkRowToHfRow undoes it); 0 when it stored them in HF
// order. Only llama's converter permutes (q_proj over n_heads, k_proj over
// n_kv_heads); Qwen and Gemma are stored as HF has them (NeoX RoPE in llama.cpp).
int64_t GgufQkPermutedHeads(const elf::ModelShape& shape, absl::string_view hf_name);

// What the converter added to every element of HF tensor `hf_name`: 1 for Gemma's
// norm weights (it stores 1 + w so that llama.cpp's plain RMSNorm multiplies by
// it), else 0. The loader subtracts it in f32 before rounding to bf16, as
// transformers' GGUF loader does, so that it yields HF's w.
float GgufStoredOffset(const elf::ModelShape& shape, absl::string_view hf_name);

}  // namespace dk::weights

#endif  // DK_WEIGHTS_GGUF_ARCH_H_
