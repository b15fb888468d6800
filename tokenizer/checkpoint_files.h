// A checkpoint's side files, read the one way the tokenizer's loaders and the chat
// templates both need: tokenizer_config.json, generation_config.json, found beside a
// tokenizer.json or in the checkpoint directory.
#ifndef DK_TOKENIZER_CHECKPOINT_FILES_H_
#define DK_TOKENIZER_CHECKPOINT_FILES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace dk::tokenizer {

// The JSON object in `path`; nullopt when the file does not exist. Present but
// unreadable (a directory, /dev/zero) or not a JSON object: an error naming `path`
// (`what` says which file in the read error).
absl::StatusOr<std::optional<nlohmann::json>> ReadJsonConfig(const std::string& path, absl::string_view what);

// The directory holding the file `path` ("." for a bare file name).
std::string DirectoryOf(const std::string& path);

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_CHECKPOINT_FILES_H_
