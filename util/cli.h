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
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
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

// A --weights value: "synthetic" or "synthetic:SEED" with SEED a decimal number (no
// file), else an existing checkpoint file or directory (RequirePath).
inline absl::Status RequireWeightsSpec(absl::string_view flag, const std::string& spec) {
  if (spec == "synthetic") return absl::OkStatus();
  if (spec.rfind("synthetic:", 0) == 0) {
    const std::string seed = spec.substr(10);
    uint64_t v = 0;
    if (!seed.empty() && seed.find_first_not_of("0123456789") == std::string::npos &&
        absl::SimpleAtoi(seed, &v)) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", spec,
                                                   ": the seed after 'synthetic:' must be a decimal number "
                                                   "(synthetic:SEED, or synthetic for seed 1)"));
  }
  return RequirePath(flag, spec, PathKind::kFileOrDirectory);
}

// InvalidArgument naming the words left over after the flags (what
// absl::ParseCommandLine returns after argv[0]) for a tool that takes none: an
// unquoted `--prompt The capital` leaves "capital" there, and running on "The" alone
// would be a silent wrong answer.
inline absl::Status RequireNoPositional(const std::vector<char*>& args) {
  if (args.size() <= 1) return absl::OkStatus();
  std::string words;
  for (size_t i = 1; i < args.size(); ++i) absl::StrAppend(&words, i > 1 ? " " : "", "'", args[i], "'");
  return absl::InvalidArgumentError(absl::StrCat(
      "unexpected argument", args.size() > 2 ? "s " : " ", words,
      ": this tool takes only --flags; quote a value that has spaces, e.g. --prompt \"The capital of France is\""));
}

// InvalidArgument "--flag N is outside [lo, hi]" unless lo <= value <= hi.
inline absl::Status RequireRange(absl::string_view flag, int64_t value, int64_t lo, int64_t hi) {
  if (lo <= value && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " ", value, " is outside [", lo, ", ", hi, "]"));
}

}  // namespace dk::cli

#endif  // DK_UTIL_CLI_H_
