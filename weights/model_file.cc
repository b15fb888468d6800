#include "weights/model_file.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "util/read_file.h"
#include "util/status.h"
#include "weights/common.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

// "Llama-3.2-1B" -> "llama_3_2_1b": a ModelShape name from a directory's name.
std::string NameFromDirectory(const std::string& dir) {
  std::string out;
  for (char c : Basename(dir)) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      out.push_back(c);
    } else if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (!out.empty() && out.back() != '_') {
      out.push_back('_');
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "model" : out;
}

// The directory holding `file` ("a/b/config.json" -> "a/b"; "config.json" -> ".").
std::string DirectoryOf(const std::string& file) {
  const size_t slash = file.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : file.substr(0, slash);
}

absl::StatusOr<elf::ModelShape> ShapeFromConfigJson(const std::string& config_path,
                                                    const std::string& dir) {
  DK_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(config_path));
  return ShapeFromHfConfig(text, NameFromDirectory(dir), config_path);
}

}  // namespace

absl::StatusOr<elf::ModelShape> ShapeFromModelFile(const std::string& path,
                                                   const ModelFileOptions& options) {
  if (options.max_context < 0 || options.max_context > elf::kMaxDimension) {
    return absl::InvalidArgumentError(absl::StrCat("max_context ", options.max_context,
                                                   " is out of range (1..", elf::kMaxDimension,
                                                   ", or 0 for the default ", kDefaultMaxContext, ")"));
  }
  absl::StatusOr<OpenedPath> opened = OpenUserPath(path, "model", PathKinds::kFileOrDirectory);
  if (absl::IsNotFound(opened.status())) {
    return absl::NotFoundError(absl::StrCat(
        opened.status().message(), " (expected a .gguf file, an HF checkpoint directory or its config.json)"));
  }
  if (!opened.ok()) return opened.status();

  elf::ModelShape shape;
  if (opened->is_directory) {
    const std::string config = JoinPath(path, "config.json");
    if (!FileExists(config)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", path, " is a directory without a config.json: not an HF checkpoint directory"));
    }
    DK_ASSIGN_OR_RETURN(shape, ShapeFromConfigJson(config, path));
  } else {
    // By content, not by name: a GGUF file starts with its magic; JSON with '{'.
    DK_ASSIGN_OR_RETURN(const std::string head, ReadHead(*opened, path, 4));
    if (head == "GGUF") {
      DK_ASSIGN_OR_RETURN(shape, GgufShape(path));
    } else if (absl::StrContains(head, "{")) {
      DK_ASSIGN_OR_RETURN(shape, ShapeFromConfigJson(path, DirectoryOf(path)));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", path, " is not a GGUF file (", head.size() < 4 ? "shorter than" : "no",
          " GGUF magic), not a config.json and not an HF checkpoint directory"));
    }
  }
  if (!options.name.empty()) shape.set_name(options.name);
  const int64_t cap = options.max_context > 0 ? options.max_context : kDefaultMaxContext;
  shape.set_max_context(static_cast<int32_t>(std::min<int64_t>(shape.max_context(), cap)));
  // The capped shape must still be one the ELF can hold (the KV cache's bytes).
  DK_RETURN_IF_ERROR(elf::ValidateModelShape(shape));
  return shape;
}

}  // namespace dk::weights
