// quantize_weights: GEMV weights are stored in one of GGUF's block formats and
// their launches switch to the GEMV variant that reads those blocks (row-major; a
// packed weight goes back to row_major). Schemes:
//  * "q8_0", "q4_0": every weight in that format (f16 scale per block), quantized
//    once at load from the bf16 weights;
//  * "gguf": each weight in the block format the GGUF file stores it in (Q8_0,
//    Q4_0, Q4_1, Q5_0, Q4_K, Q6_K), its blocks copied from the file as they are,
//    never re-quantized (BufferObject.blocks_as_stored); a weight the file stores as
//    floats (or in a format no kernel reads, such as Q5_K) stays bf16. The file's tensor types are the option
//    `stored` (elf_opt --weights fills it from the GGUF's header).
// Which weights stay bf16 is the option `keep`; its default depends on the scheme:
// the LM head for q8_0 / q4_0, nothing for gguf. The embedding table (which the
// host reads) and every norm weight (which no GEMV reads) are never quantized.
// Unlike the other passes this one changes the arithmetic: its stage is gated
// against the HF bf16 goldens, not against its parent's tokens (docs/architecture.md s.5).
#ifndef DK_OPTIMIZATIONS_QUANTIZE_WEIGHTS_QUANTIZE_WEIGHTS_H_
#define DK_OPTIMIZATIONS_QUANTIZE_WEIGHTS_QUANTIZE_WEIGHTS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt::quantize_weights {

inline constexpr char kName[] = "quantize_weights";

// The GEMV weight classes, as the option `keep` names them: a weight's class is
// the tensor name's last component before ".weight" (model.layers.3.mlp.up_proj.weight:
// up_proj); the LM head (lm_head.weight, or model.embed_tokens.weight when tied) is lm_head.
inline const std::vector<std::string>& WeightClasses() {
  static const auto* classes = new std::vector<std::string>{
      "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"};
  return *classes;
}

// The schemes: the block format every quantized weight gets, or "gguf" (as stored).
inline const std::vector<std::string>& Schemes() {
  static const auto* schemes = new std::vector<std::string>{"q8_0", "q4_0", "gguf"};
  return *schemes;
}

// `keep`'s value meaning "the scheme's default" (lm_head, or nothing for gguf).
inline constexpr char kKeepDefault[] = "default";

struct Options {
  std::string scheme = "q8_0";
  std::set<std::string> keep = {kKeepDefault};  // classes that stay bf16
  // scheme gguf: how the file stores each tensor, "tensor name=ggml type" (Q4_1, F32, ...).
  std::vector<std::string> stored;
};

absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target,
                               const Options& options = {});

}  // namespace dk::opt::quantize_weights

#endif  // DK_OPTIMIZATIONS_QUANTIZE_WEIGHTS_QUANTIZE_WEIGHTS_H_
