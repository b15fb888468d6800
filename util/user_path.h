// Paths a user types on `bazel run ... -- --flag=path`: `bazel run` starts tools in
// their runfiles directory, so a relative path is taken relative to where the user
// called bazel (BUILD_WORKING_DIRECTORY). Absolute and empty paths, paths outside
// `bazel run`, and the weights specs "synthetic[:SEED]" are returned unchanged.
#ifndef DK_UTIL_USER_PATH_H_
#define DK_UTIL_USER_PATH_H_

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace dk {

inline std::string UserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr || path.rfind("synthetic", 0) == 0) {
    return path;
  }
  return std::string(cwd) + "/" + path;
}

// `path` as records and messages show it: relative to the working directory (the
// runfiles tree under `bazel run`) when it lies below it, e.g. a target's own file
// that its launcher passed as "$PWD"/models/m/goldens.json; otherwise unchanged.
inline std::string ShownPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return path;
  char buf[4096];
  const char* dirs[] = {getcwd(buf, sizeof(buf)), std::getenv("PWD")};
  for (const char* dir : dirs) {
    if (dir == nullptr || *dir == '\0') continue;
    const std::string prefix = std::string(dir) + "/";
    if (path.rfind(prefix, 0) == 0) return path.substr(prefix.size());
  }
  return path;
}

}  // namespace dk

#endif  // DK_UTIL_USER_PATH_H_
