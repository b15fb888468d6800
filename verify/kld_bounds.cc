#include "verify/kld_bounds.h"

#include "absl/strings/str_cat.h"

namespace dk::verify {
namespace {

// Set from measurements (docs/perplexity.md, "The gate's bounds").
// The trained models' correct stages score 0.0022-0.0053 on the verify slice, the
// weakest mutation caught (k_no_rope_last_layer) 0.018-0.023: the bound sits between.
constexpr KldBound kBounds[] = {
    {"q8_0", 0.010},
    {"q4_0", 0.010},
    {"gguf", 0.010},
};

}  // namespace

absl::StatusOr<KldBound> KldBoundFor(const std::string& scheme) {
  std::string names;
  for (const KldBound& b : kBounds) {
    if (scheme == b.scheme) return b;
    absl::StrAppend(&names, names.empty() ? "" : ", ", b.scheme);
  }
  return absl::NotFoundError(absl::StrCat("no KLD bound for weight scheme '", scheme, "' (verify/kld_bounds.cc has ", names, ")"));
}

}  // namespace dk::verify
