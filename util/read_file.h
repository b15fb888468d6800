// Opening and reading the files and directories a user names. Every loader of a
// user-given path (decode ELF, goldens, config.json, tokenizer.json, GGUF,
// safetensors, weights, the tools' own inputs) opens it here, so that a path naming
// /dev/zero, a FIFO, a socket, a directory where a file is wanted or a huge file is
// refused at once with a message naming the path, instead of blocking in open() (a
// FIFO with no writer), reading without bound, or allocating until the process aborts.
//
// The path is opened once, non-blocking, and its type and size are taken from fstat
// of that descriptor (symlinks followed): nothing can swap the file between the check
// and the read.
// Thread-safety: stateless functions; a ScopedFd is owned by one thread at a time.
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

// A file descriptor, closed when it goes out of scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }

 private:
  int fd_;
};

// What a caller takes at a path.
enum class PathKinds { kFile, kDirectory, kFileOrDirectory };

struct OpenedPath {
  ScopedFd fd;
  bool is_directory = false;
  uint64_t size = 0;  // bytes, for a regular file
};

// Opens `path` (read-only, non-blocking, no controlling terminal) and checks that it
// is what the caller takes. Errors name `what` (e.g. "decode ELF", "weights") and the
// path: NotFound when it cannot be opened (missing, a dangling symlink, no
// permission); InvalidArgument when it is "a directory, not a file", "not a
// directory", or "not a regular file" (a FIFO, device or socket: no size bounds it).
absl::StatusOr<OpenedPath> OpenUserPath(const std::string& path, absl::string_view what,
                                        PathKinds accept = PathKinds::kFile);

// Up to `n` bytes from the start of the regular file `file` (fewer when it is
// shorter), for telling formats apart by their content. `name` is for messages.
absl::StatusOr<std::string> ReadHead(const OpenedPath& file, const std::string& name, size_t n);

// The contents of `path`. Errors as OpenUserPath's (a directory is refused), and
// InvalidArgument when the file is larger than `max_bytes`, ResourceExhausted when
// its size does not fit in memory, DataLoss when fewer bytes than its size could be
// read.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, absl::string_view what,
                                            uint64_t max_bytes = kMaxTextFileBytes);

}  // namespace dk

#endif  // DK_UTIL_READ_FILE_H_
