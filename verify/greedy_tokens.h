// A stage's greedy run over the golden prompts, written to a file by one process
// (verify --write_tokens, the build action verify_chain makes per stage) and read by
// another (the stage's own verify test for its top-5 gate, and its child stage's test
// for "same tokens as parent"), so that each stage's greedy decode runs once.
//
// The file records what the run depended on: the SHA-256 of the ELF's bytes, the
// weights digest (weights::Weights::Digest()), whether the BO protocol was validated,
// new_tokens, and each prompt's text and ids. ReadGreedyTokens refuses a file whose
// record does not match the reader's ELF, weights and prompts, so a stale or swapped
// file is an error, never a pass.
//
// JSON:
//   {"format": "decodekit greedy tokens 1", "elf": str, "elf_sha256": "<hex>",
//    "weights_digest": "sha256:<hex>", "weights": str, "validate": bool,
//    "new_tokens": int,
//    "sequences": [{"prompt": str, "prompt_ids": [int],
//                   "steps": [{"id": int, "top5": [int], "top5_logit_bits": [uint32]}]}]}
// The logits are stored as their f32 bit patterns, so every value (a NaN from a broken
// stage included) reads back exactly as the run produced it.
//
// Thread-safety: free functions; no shared state.
#ifndef DK_VERIFY_GREEDY_TOKENS_H_
#define DK_VERIFY_GREEDY_TOKENS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verify/goldens.h"
#include "verify/stage_gate.h"

namespace dk::verify {

// The SHA-256 of a file's bytes, 64 lowercase hex digits.
absl::StatusOr<std::string> FileSha256(const std::string& path);

// The file's text for `sequences`, the greedy run of the ELF at `elf_path` over the
// first setup.prompts golden prompts with setup's weights.
absl::StatusOr<std::string> FormatGreedyTokens(const std::string& elf_path, const GateSetup& setup,
                                               const std::vector<Sequence>& sequences);

// FormatGreedyTokens, written to `path`.
absl::Status WriteGreedyTokens(const std::string& path, const std::string& elf_path, const GateSetup& setup,
                               const std::vector<Sequence>& sequences);

// The sequences of `text` (read from `source`, named in errors), after checking that
// they were made by the ELF at `elf_path` (its bytes' SHA-256), with setup's weights
// (digest), over exactly setup's first setup.prompts golden prompts (text and ids) and
// the goldens' new_tokens, and with the BO protocol validated when setup.validate asks
// for it. InvalidArgument naming the mismatch otherwise.
absl::StatusOr<std::vector<Sequence>> ParseGreedyTokens(absl::string_view text, absl::string_view source,
                                                        const std::string& elf_path, const GateSetup& setup);

// ParseGreedyTokens of the file at `path`.
absl::StatusOr<std::vector<Sequence>> ReadGreedyTokens(const std::string& path, const std::string& elf_path,
                                                       const GateSetup& setup);

}  // namespace dk::verify

#endif  // DK_VERIFY_GREEDY_TOKENS_H_
