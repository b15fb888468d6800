// The KLD gate's bounds: a stage that changes numerics (quantize_weights) must keep its
// mean KL divergence from its bf16 ancestor's distribution (tools/perplexity: the
// stage against the last stage of its chain before any quantize_weights) within the
// bound of its weight scheme, over the verify slice of @english_text (one window of
// 256 tokens, positions 128..254 scored).
//
// One table for every model; the figures it was set from (the two trained models,
// smollm2_135m and gemma3_270m, on that slice and on the whole text) and what the
// mutations score are in docs/perplexity.md. Each bound sits well above what the trained
// models' correct stages score and well below what drop_last_layer, k_no_rope_last_layer
// and swap_kv_heads score on them.
#ifndef DK_VERIFY_KLD_BOUNDS_H_
#define DK_VERIFY_KLD_BOUNDS_H_

#include <string>

#include "absl/status/statusor.h"

namespace dk::verify {

struct KldBound {
  const char* scheme;   // quantize_weights' scheme ("q8_0", "q4_0", "gguf")
  double max_mean_kld;  // nats
};

// The bound of `scheme`; NotFound naming the schemes for another.
absl::StatusOr<KldBound> KldBoundFor(const std::string& scheme);

}  // namespace dk::verify

#endif  // DK_VERIFY_KLD_BOUNDS_H_
