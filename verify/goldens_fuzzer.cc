// libFuzzer target: the HF goldens reader (issue 15). Any input gives an error or
// goldens whose every step passes ValidateStep (the gate relies on that) and whose
// prompts all have new_tokens steps; Sequences() of an accepted file is taken.
//   ./bazelw build --config=fuzz //verify:goldens_fuzzer
//   bazel-bin/verify/goldens_fuzzer -max_total_time=60 CORPUS_DIR
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "verify/goldens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto goldens = dk::verify::ParseGoldens(text, "fuzz.json");
  if (!goldens.ok()) return 0;
  if (goldens->new_tokens <= 0 || goldens->prompts.empty()) std::abort();
  for (const auto& p : goldens->prompts) {
    if (p.prompt_ids.empty()) std::abort();
    if (static_cast<int>(p.sequence.steps.size()) != goldens->new_tokens) std::abort();
    for (const auto& s : p.sequence.steps) {
      if (!dk::verify::ValidateStep(s, 5, "fuzz").ok()) std::abort();
      for (float l : s.top5_logits) {
        if (!std::isfinite(l)) std::abort();
      }
    }
  }
  (void)goldens->Sequences(1);
  return 0;
}
