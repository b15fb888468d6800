// Goldens from the reference decoder (reference_decoder.h) instead of HF transformers:
// the JSON tools/hf_reference/make_goldens.py writes (verify/goldens.h), the same
// greedy loop (the prompt fed one token at a time over a KV cache, logits rounded to
// bf16 as HF's bf16 LM head then .float(), top-5 by (-logit, id), the chosen id the
// top-1), with "reference" saying it was this decoder and not HF, which verify and the
// profile print. For a model HF transformers cannot load, or where Python is not
// wanted; //tools/reference_goldens is the command.
#ifndef DK_VERIFY_REFERENCE_REFERENCE_GOLDENS_H_
#define DK_VERIFY_REFERENCE_REFERENCE_GOLDENS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "tokenizer/tokenizer.h"
#include "weights/weights.h"

namespace dk::verify {

// The value of the goldens' "reference" field this decoder writes.
inline constexpr char kReferenceDecoderName[] =
    "decodekit reference decoder (verify/reference/reference_decoder.h: scalar f64, bf16 rounding "
    "where HF rounds; not HF transformers)";

struct ReferenceGoldensOptions {
  std::string model;      // the "model" field ("": shape.name())
  int new_tokens = 32;    // greedy tokens per prompt
  std::string generator;  // the "generator" field (the tool that ran this)
};

// Goldens JSON text (one line per step, as make_goldens.py writes) for `prompts`
// (each encoded by `tok` as verify encodes it), decoded greedily by ReferenceDecoder
// over (shape, weights); "weights_digest" is weights.Digest(). InvalidArgument for no
// prompt, an empty one, or a prompt that with new_tokens does not fit max_context.
absl::StatusOr<std::string> RecordReferenceGoldens(const elf::ModelShape& shape, const weights::Weights& weights,
                                                   const tokenizer::Tokenizer& tok,
                                                   const std::vector<std::string>& prompts,
                                                   const ReferenceGoldensOptions& options);

}  // namespace dk::verify

#endif  // DK_VERIFY_REFERENCE_REFERENCE_GOLDENS_H_
