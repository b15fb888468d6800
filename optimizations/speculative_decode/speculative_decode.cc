#include "optimizations/speculative_decode/speculative_decode.h"

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "util/status.h"

namespace dk::opt::speculative_decode {

absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target,
                               const Options& options) {
  elf::Speculative s;
  s.set_draft(options.draft);
  s.set_max_draft(options.max_draft);
  s.set_max_ngram(options.max_ngram);
  if (absl::Status st = elf::CheckSpeculative(s); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kName, ": ", st.message()));
  }
  if (program.has_speculative()) {
    return Unchanged(absl::StrCat("the parent already drafts (max_draft ", program.speculative().max_draft(), ")"));
  }
  *program.mutable_speculative() = s;
  return Changed(absl::StrCat("greedy decode drafts up to ", s.max_draft(), " tokens by ", s.draft(),
                              " (n-grams up to ", s.max_ngram(), ") and checks them in one run of ",
                              s.max_draft() + 1, " token rows on ", target.name(),
                              "; the tokens stay the parent's, the program's steps are unchanged"));
}

}  // namespace dk::opt::speculative_decode
