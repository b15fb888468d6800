// The exit status of every decodekit tool (tools/*, and the test helpers that
// build goldens), one convention for all, described in README.md "Exit codes".
#ifndef DK_UTIL_EXIT_CODES_H_
#define DK_UTIL_EXIT_CODES_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"

namespace dk {

enum ExitCode : int {
  kExitOk = 0,        // success (for the checking tools: every check passed)
  kExitFailure = 1,   // bad input (a file that cannot be read or does not fit) or a failed check
  kExitUsage = 2,     // a missing or bad flag or argument, or an input decodekit does not support
  kExitReverted = 3,  // profile: a stage failed its gate and was reported reverted
  kExitNotFaster = 4, // profile: the final stage is not faster than the baseline
};

// Prints "<tool>: <message>" on stderr and returns `code`: `return Fail(s)` in a
// main, through each tool's one-line Fail. A failure whose status is Unimplemented
// (a well-formed file asking for what decodekit does not support: a ggml tensor
// type, a GGUF architecture, a tokenizer or checkpoint feature) exits kExitUsage,
// like a request the tool does not take, so that a script can tell "this model is
// not supported" from "this file is broken".
inline int ExitWithError(const char* tool, const absl::Status& status, int code = kExitFailure) {
  std::fprintf(stderr, "%s: %s\n", tool, std::string(status.message()).c_str());
  if (code == kExitFailure && status.code() == absl::StatusCode::kUnimplemented) return kExitUsage;
  return code;
}

}  // namespace dk

#endif  // DK_UTIL_EXIT_CODES_H_
