// Whole-file reads bounded by the file's size: every reader of a user-given file
// (decode ELF, goldens, config.json, tokenizer.json, ...) goes through here, so
// that a path naming /dev/zero, a FIFO, a directory or a huge file is refused with
// a message naming the path instead of reading without bound until the allocator
// aborts. The size is taken from fstat of the opened file (symlinks followed), checked
// against the caller's cap, and exactly that many bytes are read.
// Thread-safety: stateless function.
#ifndef DK_UTIL_READ_FILE_H_
#define DK_UTIL_READ_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dk {

// Caps for the kinds of files the tools read whole (the large tensor files are
// mapped, not read): far above any real file of the kind.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;  // JSON, text protos
inline constexpr uint64_t kMaxElfFileBytes = uint64_t{1} << 32;   // decode ELFs

// The contents of `path`. Errors name `what` (e.g. "decode ELF", "goldens") and the
// path: NotFound when it cannot be opened, InvalidArgument when it is not a regular
// file ("is a directory, not a file" / "is not a regular file") or is larger than
// `max_bytes`, DataLoss when fewer bytes than its size could be read.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, absl::string_view what,
                                            uint64_t max_bytes = kMaxTextFileBytes);

}  // namespace dk

#endif  // DK_UTIL_READ_FILE_H_
