// Synthetic weights for the e2e tests' tiny models, scaled so that logits spread out
// (std 0.02 weights give near-uniform logits, where any rounding flips the argmax).
#ifndef DK_TESTS_E2E_TINY_WEIGHTS_H_
#define DK_TESTS_E2E_TINY_WEIGHTS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "util/bf16.h"
#include "weights/weights.h"

namespace dk::testing {

// The matrices and biases times `scale`. Norm weights, all one (Gemma: zero) in
// synthetic weights, stay as they are, or with `spread_norms` get a spread of
// +-0.25 so that which norm weight is read shows in the logits.
inline std::shared_ptr<const weights::Weights> ScaledWeights(const elf::ModelShape& m, float scale,
                                                             bool spread_norms = false) {
  weights::Weights w = weights::MakeSyntheticWeights(m, 7).value();
  weights::Weights out;
  out.set_source("synthetic(seed=7) x" + std::to_string(scale) + (spread_norms ? ", spread norms" : ""));
  out.set_shape(m);
  for (const std::string& name : w.Names()) {
    const weights::Tensor* t = w.Find(name);
    weights::Tensor copy;
    copy.shape = t->shape;
    copy.data = AlignedBuffer<bf16>(t->numel());
    const bool norm = absl::EndsWith(name, "norm.weight");
    for (int64_t i = 0; i < t->numel(); ++i) {
      const float v = Bf16ToF32(t->data[i]);
      const float spread = static_cast<float>((i * 37 + name.size() * 11) % 17) / 32 - 0.25f;
      copy.data[i] = norm ? (spread_norms ? F32ToBf16(v + spread) : t->data[i]) : F32ToBf16(v * scale);
    }
    out.Add(name, std::move(copy));
  }
  return std::make_shared<const weights::Weights>(std::move(out));
}

}  // namespace dk::testing

#endif  // DK_TESTS_E2E_TINY_WEIGHTS_H_
