// The verify gate (docs/architecture.md s.6): a candidate's greedy decode against the reference's,
// as vLLM's `check_logprobs_close` with k = 5 over 32 tokens.
//
// For each prompt, walk both sequences in lockstep; at the first step where the chosen
// ids differ, the candidate's choice must be in the reference's top-k AND the
// reference's choice in the candidate's top-k, else the prompt FAILS; the walk stops at
// that first divergence either way. A prompt that never diverges passes. The gate
// passes when every prompt does. Top-k sets follow the records as given (ties went to
// the smaller id when they were recorded; ValidateStep checks that).
//
// CompareExact is the stricter check that an optimization stage generates exactly the
// tokens of its parent stage.
//
// Structural problems (a missing prompt, a short sequence, a malformed step) are errors
// (InvalidArgument), not FAILs: the gate never passes or fails on data it cannot read.
//
// Thread-safety: free functions over caller-owned data; the decode callback is called
// from the calling thread only.
#ifndef DK_VERIFY_GATE_H_
#define DK_VERIFY_GATE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verify/goldens.h"

namespace dk::verify {

// Ids -> text, for the agreed prefix in reports (e.g. wrapping tokenizer::Decode). The
// gate does not depend on a tokenizer; a null callback prints the ids instead.
using DecodeFn = std::function<std::string(const std::vector<uint32_t>&)>;

struct GateOptions {
  int k = 5;            // top-k both sides recorded
  int num_tokens = 32;  // steps compared per prompt; both sides need at least this many
};

struct PromptVerdict {
  std::string prompt;
  bool passed = false;
  // First step (0-based) where the chosen ids differ; nullopt when none did.
  std::optional<int> divergence_step;
  uint32_t reference_choice = 0;  // at divergence_step (when set)
  uint32_t candidate_choice = 0;
  // 1-based rank of the candidate's choice in the reference's top-k, and of the
  // reference's choice in the candidate's top-k; nullopt = absent (FAIL).
  std::optional<int> candidate_rank_in_reference;
  std::optional<int> reference_rank_in_candidate;
  // Ids of the steps both sides agreed on (all num_tokens when no divergence), and their
  // decoded text.
  std::vector<uint32_t> agreed_ids;
  std::string agreed_text;
};

struct GateReport {
  bool passed = false;
  GateOptions options;
  std::vector<PromptVerdict> prompts;
};

// Gates `candidate` against `reference`: same number of sequences, the same prompt at
// each index, each with >= options.num_tokens steps that pass ValidateStep.
absl::StatusOr<GateReport> CheckLogprobsClose(const std::vector<Sequence>& reference,
                                              const std::vector<Sequence>& candidate,
                                              const DecodeFn& decode,
                                              const GateOptions& options = {});

// A table, one row per prompt, then "verify gate: PASS (n/n prompts)" or FAIL.
std::string FormatGateReport(const GateReport& report);

struct ExactVerdict {
  std::string prompt;
  bool same = false;
  std::optional<int> first_difference;  // 0-based step; nullopt when identical
  uint32_t parent_id = 0;               // at first_difference (when set)
  uint32_t child_id = 0;
  std::vector<uint32_t> agreed_ids;
  std::string agreed_text;
};

struct ExactReport {
  bool same = false;
  std::string parent_name;
  std::string child_name;
  std::vector<ExactVerdict> prompts;
};

// Whether `child` chose exactly the ids of `parent` at each of the first num_tokens
// steps of every prompt (top-k sets are not compared). Same structural errors as
// CheckLogprobsClose. The names label the report ("decode_bo", "decode_aligned").
absl::StatusOr<ExactReport> CompareExact(const std::vector<Sequence>& parent,
                                         const std::vector<Sequence>& child, const DecodeFn& decode,
                                         int num_tokens = 32,
                                         const std::string& parent_name = "parent",
                                         const std::string& child_name = "child");

std::string FormatExactReport(const ExactReport& report);

}  // namespace dk::verify

#endif  // DK_VERIFY_GATE_H_
