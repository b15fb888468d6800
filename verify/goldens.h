// Greedy-decode records: the reference goldens HuggingFace transformers wrote in bf16
// (tools/hf_reference/make_goldens.py) and the same record shape for a candidate run.
//
// Goldens JSON (all fields required unless noted):
//   {"model": str, "weights_digest": "sha256:<hex>", "transformers_version": str,
//    "torch_version": str, "new_tokens": int,
//    "prompts": [{"text": str, "prompt_ids": [int], "text_out": str,
//                 "steps": [{"id": int, "top5": [int x5], "top5_logits": [float x5]}]}]}
// Optional: "reference" (str): which reference recorded them ("transformers 5.24.0 bf16",
// or the decodekit reference decoder's kReferenceDecoderName, verify/reference), and
// "dtype" (str), "generator" (str). Extra fields are ignored. Errors name the file and the JSON path of the bad field
// ("prompts[3].steps[7].top5: missing field").
//
// Thread-safety: plain data and free functions; no shared state.
#ifndef DK_VERIFY_GOLDENS_H_
#define DK_VERIFY_GOLDENS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dk::verify {

// What one side chose at one decode step.
struct StepRecord {
  uint32_t id = 0;                 // the chosen (greedy) token
  std::vector<uint32_t> top5;      // [k] ids by (-logit, id): ties go to the smaller id
  std::vector<float> top5_logits;  // [k] or empty when the side does not record logits
};

// One prompt's greedy decode.
struct Sequence {
  std::string prompt;
  std::vector<StepRecord> steps;
};

// One prompt of a goldens file.
struct GoldenPrompt {
  std::string text;
  std::vector<uint32_t> prompt_ids;
  std::string text_out;  // HF decode of the generated ids
  Sequence sequence;     // sequence.prompt == text
};

struct Goldens {
  std::string model;
  std::string weights_digest;  // "sha256:<hex>", as weights::Weights::Digest()
  std::string transformers_version;
  std::string torch_version;
  // The "reference" field; "" when the file has none (goldens older than it).
  std::string reference;
  std::string dtype;      // "dtype", "" when absent
  std::string generator;  // "generator", "" when absent
  int new_tokens = 0;
  std::vector<GoldenPrompt> prompts;

  // Which reference made these goldens, as verify and the profile print it: the
  // "reference" field, else (older files) "transformers <version> <dtype>" when
  // transformers_version names a version, else the generator and
  // transformers_version as recorded (e.g. "tools/peer/record_goldens.py (none
  // (llama.cpp record))").
  std::string Reference() const;

  // The sequences of the first `n` prompts (all when n < 0 or n > size).
  std::vector<Sequence> Sequences(int n = -1) const;
};

// Parses goldens JSON; `source` names the input in errors (a path). InvalidArgument on
// malformed JSON, a missing or mistyped field, or a prompt with a step count other than
// new_tokens; every step is checked with ValidateStep.
absl::StatusOr<Goldens> ParseGoldens(absl::string_view json_text, absl::string_view source);
// Reads and parses a goldens file; NotFound when it cannot be opened.
absl::StatusOr<Goldens> LoadGoldens(const std::string& path);

// OK if `step` is a consistent greedy record for top-k of size `k`: top5 has k distinct
// ids, id == top5[0], and top5_logits (when present) has k values, non-increasing, with
// tied values ordered by ascending id. `where` prefixes the error ("prompts[0].steps[3]").
absl::Status ValidateStep(const StepRecord& step, int k, absl::string_view where);

}  // namespace dk::verify

#endif  // DK_VERIFY_GOLDENS_H_
