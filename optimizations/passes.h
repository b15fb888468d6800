// The pass table: every pass, with a one-line doc, its options and the function
// that runs it. tools/elf_opt and the pass tests run passes only through this
// table. Adding a pass: its folder (optimizations/<pass>/, whose BUILD is one
// optimization_pass() call), one entry in passes.cc (and its dep in BUILD), one
// rule in rules/optimizations.bzl (exported by rules/defs.bzl).
//
// Options arrive as text, "key=value" (elf_opt's positional arguments, which
// rules/optimizations.bzl builds from the rule's attributes of the same names,
// passing only those set); every option the run does not set has the table's
// default: the table is where an option's default and allowed values are stated.
// Thread-safety: the table is immutable; the functions are stateless.
#ifndef DK_OPTIMIZATIONS_PASSES_H_
#define DK_OPTIMIZATIONS_PASSES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt {

enum class OptionKind {
  kInt,         // a decimal integer: "128"
  kStringList,  // comma-separated items, empty ones dropped: "rms_gemv_rope,lm_head"
  kString,      // one word: "q8_0"
};

// One option of a pass, declared once: the rule of the same name in
// rules/optimizations.bzl has an attribute of this name, of the matching type
// (attr.int, attr.string, attr.string_list), whose doc is this doc (plus "Unset: the
// pass table's default." where the attribute's default leaves the option unset);
// //tests/passes:options_match_rules_test holds them to it.
struct OptionSpec {
  std::string name;
  OptionKind kind;
  std::string default_value;  // as text, like a value given on the command line
  std::string doc;            // sentences, as `elf_opt --help` and the rule's attribute show them
  std::vector<std::string> choices;  // kStringList, kString: the allowed items (empty: any)
  // kInt: the allowed values, min..max (the doc states the range as "min..max");
  // ParseOptions refuses a value outside it.
  int64_t min = INT64_MIN;
  int64_t max = INT64_MAX;
};

struct Pass;
class PassOptions;
absl::StatusOr<PassOptions> ParseOptions(const Pass& pass, absl::Span<const std::string> args);

// The value of every option of one pass for one run (given, or the default).
class PassOptions {
 public:
  // The option's value; DK_CHECK-fails for a name the pass does not declare with
  // that kind (a bug in the table, which the pass table test catches).
  int64_t Int(const std::string& name) const;
  const std::vector<std::string>& StringList(const std::string& name) const;
  const std::string& String(const std::string& name) const;

 private:
  friend absl::StatusOr<PassOptions> ParseOptions(const Pass&, absl::Span<const std::string>);
  std::map<std::string, int64_t> ints_;
  std::map<std::string, std::vector<std::string>> string_lists_;
  std::map<std::string, std::string> strings_;
};

// Runs the pass: returns whether the program changed and what (or why not).
// Passes write no lineage: ApplyPass does.
using PassFn = std::function<absl::StatusOr<PassResult>(elf::Program&, const registry::TargetConstraints&,
                                                        const PassOptions&)>;

struct Pass {
  std::string name;  // --pass=<name>, the rule's lineage entry, the folder's name
  std::string doc;   // one line
  std::vector<OptionSpec> options;
  PassFn run;
};

// Every pass, in the order of the models' chains.
const std::vector<Pass>& Passes();

// InvalidArgument naming the known passes for an unknown name.
absl::StatusOr<const Pass*> FindPass(absl::string_view name);

// `args`: "key=value" each, each key at most once. InvalidArgument naming the
// pass's options for an unknown key, naming the option for a bad value.
absl::StatusOr<PassOptions> ParseOptions(const Pass& pass, absl::Span<const std::string> args);

// What the pipeline does with a pass that changes nothing.
enum class NoopPolicy {
  kAllow,  // the entry says "not applied" and the run succeeds
  kFail,   // FailedPrecondition: an inert stage must not hide in a chain
};

// The pipeline's one step: runs `pass` on `program` and appends the pass's
// lineage entry (its name, the target's name, applied = whether it changed the
// program, reason = its summary), then applies `noop`. Returns the entry. An
// error from the pass appends nothing.
absl::StatusOr<elf::LineageEntry> ApplyPass(const Pass& pass, elf::Program& program,
                                            const registry::TargetConstraints& target,
                                            const PassOptions& options, NoopPolicy noop);

// FindPass, ParseOptions, then ApplyPass with NoopPolicy::kAllow; returns whether
// the program changed.
absl::StatusOr<bool> RunPass(absl::string_view name, elf::Program& program,
                             const registry::TargetConstraints& target,
                             absl::Span<const std::string> args = {});

// The table as text (for usage messages): per pass a line "  <name>: <doc>", then
// one line per option: key, kind, default, allowed items, doc.
std::string DescribePasses();

}  // namespace dk::opt

#endif  // DK_OPTIMIZATIONS_PASSES_H_
