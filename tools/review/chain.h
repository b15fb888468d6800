// A model's decode chain read from its BUILD file, and what changed between two
// versions of it (review --base=REV, part (a)).
//
// The BUILD file is tokenized (strings, comments, brackets), not evaluated: each
// top-level call `kind(attr = value, ...)` becomes a Rule, on one line or many.
// Chain stages are the `decode_elf` baseline and every rule with a `src`
// attribute. The final stage is the `final` attribute of decode_profile (else of
// verify_chain), or the last entry of their `stages = [...]` list (the older
// form), or else the one stage no other stage names as its `src`.
// Thread-safety: stateless functions.
#ifndef DK_TOOLS_REVIEW_CHAIN_H_
#define DK_TOOLS_REVIEW_CHAIN_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dk::review {

// One top-level call of a BUILD file.
struct Rule {
  std::string kind;  // the called name, e.g. "layout_alignment"
  int line = 0;      // 1-based line of the call
  // attribute -> its value's source text with whitespace and comments dropped
  // (string literals keep their quotes), e.g. "name" -> "\"decode\"".
  std::map<std::string, std::string> attrs;
  // attribute -> string values: the literal itself, or a list's string literals.
  std::map<std::string, std::vector<std::string>> strings;
};

// Every top-level call; InvalidArgument (with the line) on unterminated strings,
// unbalanced brackets or a call that is not `kind(...)`.
absl::StatusOr<std::vector<Rule>> ParseBuild(const std::string& text);

struct Stage {
  std::string name;  // ":decode_bo"
  std::string kind;  // "buffer_object_reuse"
  std::string src;   // ":decode_aligned"; empty for the decode_elf baseline
  // Other attributes (not name / src), source text, for "attributes changed".
  std::map<std::string, std::string> other;
};

struct Chain {
  std::vector<Stage> stages;  // in BUILD order
  std::string final_stage;    // ":decode_opt"; empty when the file has no stage
  std::string final_from;     // where final_stage came from, for the report
  const Stage* Find(const std::string& name) const;
  // The stages from the baseline to final_stage, following src back from the
  // final stage (stops at a src that names no stage, or a cycle).
  std::vector<std::string> Path() const;
};

// `model` is the package's directory name: "//models/<model>:x" labels are
// written ":x". InvalidArgument on parse errors, a stage without a string name or
// src, two stages of one name, or a final stage that is no stage of the chain.
absl::StatusOr<Chain> ParseChain(const std::string& build_text, const std::string& model);

// ":x" for "x", ":x", "//models/<model>:x"; other labels unchanged.
std::string NormalizeLabel(const std::string& label, const std::string& model);

// What changed from `base` to `work`, one line per change, e.g.
//   "- removed: :decode_bo = buffer_object_reuse(src = \":decode_aligned\")"
//   "+ added: ..."
//   "~ re-pointed: :decode_opt src \":decode_bo\" -> \":decode_aligned\""
//   "~ kind changed: ..." / "~ attributes changed: ..." / "~ final stage: ..."
// Empty when the chains agree.
std::vector<std::string> ChainChanges(const Chain& base, const Chain& work);

}  // namespace dk::review

#endif  // DK_TOOLS_REVIEW_CHAIN_H_
