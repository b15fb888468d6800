#include "tokenizer/checkpoint_files.h"

#include "absl/strings/str_cat.h"
#include "util/read_file.h"

namespace dk::tokenizer {

absl::StatusOr<std::optional<nlohmann::json>> ReadJsonConfig(const std::string& path, absl::string_view what) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, what);
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  nlohmann::json root = nlohmann::json::parse(*text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return root;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace dk::tokenizer
