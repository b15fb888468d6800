// Checks of the command-line arguments every tool's main makes, so that each error
// names the flag and says what is wrong in one way for all tools: a required flag
// not given, a path that does not exist, a directory where a file is needed (or the
// reverse), a number out of range. Each returns OK or an error whose message starts
// with the flag, e.g. "--elf: models/m is a directory, not a file". Mains print it
// with ExitWithError (util/exit_codes.h) and exit kExitUsage.
// Thread-safety: stateless functions.
#ifndef DK_UTIL_CLI_H_
#define DK_UTIL_CLI_H_

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dk::cli {

// InvalidArgument "--flag is required" when `value` is empty.
inline absl::Status RequireFlag(absl::string_view flag, const std::string& value) {
  if (!value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
}

enum class PathKind { kFile, kDirectory, kFileOrDirectory };

// The flag is given and names an existing path of `kind`: NotFound when it does
// not exist, InvalidArgument when it is a directory where a file is needed or the
// reverse (or not given).
inline absl::Status RequirePath(absl::string_view flag, const std::string& path, PathKind kind) {
  if (absl::Status s = RequireFlag(flag, path); !s.ok()) return s;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("--", flag, ": ", path, " does not exist"));
  }
  const bool dir = S_ISDIR(st.st_mode);
  if (kind == PathKind::kFile && dir) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " is a directory, not a file"));
  }
  if (kind == PathKind::kDirectory && !dir) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " is not a directory"));
  }
  return absl::OkStatus();
}
inline absl::Status RequireFile(absl::string_view flag, const std::string& path) {
  return RequirePath(flag, path, PathKind::kFile);
}
inline absl::Status RequireDirectory(absl::string_view flag, const std::string& path) {
  return RequirePath(flag, path, PathKind::kDirectory);
}

// A --weights value: "synthetic" or "synthetic:SEED" (no file), else an existing
// checkpoint file or directory (RequirePath).
inline absl::Status RequireWeightsSpec(absl::string_view flag, const std::string& spec) {
  if (spec.rfind("synthetic", 0) == 0) return absl::OkStatus();
  return RequirePath(flag, spec, PathKind::kFileOrDirectory);
}

// InvalidArgument "--flag N is outside [lo, hi]" unless lo <= value <= hi.
inline absl::Status RequireRange(absl::string_view flag, int64_t value, int64_t lo, int64_t hi) {
  if (lo <= value && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " ", value, " is outside [", lo, ", ", hi, "]"));
}

}  // namespace dk::cli

#endif  // DK_UTIL_CLI_H_
