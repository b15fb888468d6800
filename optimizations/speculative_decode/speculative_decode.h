// speculative_decode: greedy decode drafts tokens and checks them all with the
// parent's program in one run, instead of one run per token. The program itself is
// unchanged except for Program.speculative, which tells the runtime
// (runtime/greedy.h) to draft by prompt lookup (the continuation of the longest
// recent n-gram, up to max_ngram tokens, found earlier in the sequence's own tokens:
// no second model) and to check up to max_draft drafts in one run of max_draft + 1
// token rows (the multi-row kernels, each row bit-identical to the one-row kernels).
// The rows whose draft the model would not have chosen are dropped and the KV cache
// rolled back past them, so the generated tokens are exactly the parent's; what a
// check buys depends on how often drafts are right (repetitive text: code being
// edited, a passage quoted back). A check reads every weight once, like one token.
#ifndef DK_OPTIMIZATIONS_SPECULATIVE_DECODE_SPECULATIVE_DECODE_H_
#define DK_OPTIMIZATIONS_SPECULATIVE_DECODE_SPECULATIVE_DECODE_H_

#include <string>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt::speculative_decode {

inline constexpr char kName[] = "speculative_decode";

struct Options {
  std::string draft = "prompt_lookup";  // elf::kDraftPromptLookup
  int max_draft = 4;                    // 1..elf::kMaxDraft
  int max_ngram = 8;                    // elf::kMinDraftNgram..elf::kMaxNgram
};

// InvalidArgument for options outside their ranges (the build fails, naming them).
absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target,
                               const Options& options);

}  // namespace dk::opt::speculative_decode

#endif  // DK_OPTIMIZATIONS_SPECULATIVE_DECODE_SPECULATIVE_DECODE_H_
