// quantize_weights: GEMV weights are stored in one of GGUF's 32-element block
// formats (Q8_0 or Q4_0: f16 scale per block), quantized once at load from the
// bf16 checkpoint, and their launches switch to the GEMV variant that reads those
// blocks (row-major; a packed weight goes back to row_major). Which weights stay
// bf16 is an option: by default the LM head (and so the tied embedding, which the
// host reads as a table, and every norm weight, which no GEMV reads). Unlike the
// other passes this one changes the arithmetic: its stage is gated against the
// HF bf16 goldens, not against its parent's tokens (DESIGN.md s.5).
#ifndef DK_OPTIMIZATIONS_QUANTIZE_WEIGHTS_QUANTIZE_WEIGHTS_H_
#define DK_OPTIMIZATIONS_QUANTIZE_WEIGHTS_QUANTIZE_WEIGHTS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
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

// The schemes: the block format every quantized weight gets.
inline const std::vector<std::string>& Schemes() {
  static const auto* schemes = new std::vector<std::string>{"q8_0", "q4_0"};
  return *schemes;
}

struct Options {
  std::string scheme = "q8_0";
  std::set<std::string> keep = {"lm_head"};  // classes that stay bf16
};

absl::StatusOr<bool> Run(elf::Program& program, const registry::TargetConstraints& target,
                         const Options& options = {});

}  // namespace dk::opt::quantize_weights

#endif  // DK_OPTIMIZATIONS_QUANTIZE_WEIGHTS_QUANTIZE_WEIGHTS_H_
