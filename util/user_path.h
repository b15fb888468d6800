// Paths a user types on `bazel run ... -- --flag=path`: `bazel run` starts tools in
// their runfiles directory, so a relative path is taken relative to where the user
// called bazel (BUILD_WORKING_DIRECTORY). Absolute and empty paths, paths outside
// `bazel run`, and the weights specs "synthetic[:SEED]" are returned unchanged.
#ifndef DK_UTIL_USER_PATH_H_
#define DK_UTIL_USER_PATH_H_

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

}  // namespace dk

#endif  // DK_UTIL_USER_PATH_H_
