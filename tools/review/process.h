// Runs a command (git, bazel) without a shell and collects its output.
// Each command runs in its own process group; after InstallInterruptHandler(), a
// SIGINT or SIGTERM to this process while a command runs is forwarded to its group
// as one SIGINT, and Interrupted() says so, so the caller can clean up and exit.
// Thread-safety: Run() forks; call it from one thread at a time.
#ifndef DK_TOOLS_REVIEW_PROCESS_H_
#define DK_TOOLS_REVIEW_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dk::review {

struct ProcessResult {
  int exit_code = 0;  // 128 + N when killed by signal N
  std::string out;    // stdout
  std::string err;    // stderr
};

// Runs argv[0] (looked up on PATH) with `argv` in directory `cwd` (empty: the
// current one), with the variables in `unset_env` removed from its environment.
// An error only when the command cannot be started; a non-zero exit is a result.
absl::StatusOr<ProcessResult> Run(const std::vector<std::string>& argv, const std::string& cwd = "",
                                  const std::vector<std::string>& unset_env = {});

// Makes SIGINT / SIGTERM set Interrupted() instead of ending the process.
void InstallInterruptHandler();
bool Interrupted();

// The last `n` lines of `text`, for error messages.
std::string Tail(const std::string& text, int n);

}  // namespace dk::review

#endif  // DK_TOOLS_REVIEW_PROCESS_H_
