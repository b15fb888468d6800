// What one run of a pass reports to the pipeline (optimizations/passes.h), which
// writes it as the pass's lineage entry and applies the no-op policy: passes
// change the program and say what they did, never write lineage themselves, so
// every entry has one shape and one writer.
#ifndef DK_OPTIMIZATIONS_COMMON_PASS_RESULT_H_
#define DK_OPTIMIZATIONS_COMMON_PASS_RESULT_H_

#include <string>
#include <utility>

namespace dk::opt {

struct PassResult {
  bool changed = false;  // the lineage entry's `applied`
  std::string summary;   // its `reason`: what changed, or why nothing did
};

inline PassResult Changed(std::string summary) { return PassResult{true, std::move(summary)}; }
inline PassResult Unchanged(std::string why) { return PassResult{false, std::move(why)}; }

}  // namespace dk::opt

#endif  // DK_OPTIMIZATIONS_COMMON_PASS_RESULT_H_
