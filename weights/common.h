// Helpers the weight loaders share (internal to //weights): shapes in messages,
// paths, whole-file reads.
#ifndef DK_WEIGHTS_COMMON_H_
#define DK_WEIGHTS_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dk::weights {

// "[2, 3]".
std::string ShapeStr(const std::vector<int64_t>& shape);
// The last path component ("a/b/" -> "b").
std::string Basename(std::string path);
std::string JoinPath(const std::string& dir, const std::string& file);
bool IsDirectory(const std::string& path);
bool FileExists(const std::string& path);
// The whole file (ReadRegularFile): NotFound when it cannot be opened,
// InvalidArgument when it is not a regular file or is above kMaxTextFileBytes.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace dk::weights

#endif  // DK_WEIGHTS_COMMON_H_
