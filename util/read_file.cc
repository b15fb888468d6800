#include "util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dk {

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<OpenedPath> OpenUserPath(const std::string& path, absl::string_view what,
                                        PathKinds accept) {
  const std::string name = absl::StrCat(what, " ", path);
  // O_NONBLOCK: opening a FIFO with no writer returns at once (it is refused below)
  // instead of waiting for a writer that never comes. It changes nothing for the
  // regular files and directories that are accepted.
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", name, ": ", std::strerror(errno)));
  }
  OpenedPath out;
  out.fd = ScopedFd(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot stat ", name, ": ", std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    if (accept == PathKinds::kFile) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is a directory, not a file"));
    }
    out.is_directory = true;
    return out;
  }
  // A device, FIFO or socket has no size to bound a read (/dev/zero never ends).
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is not a regular file", accept == PathKinds::kFile ? "" : " or directory"));
  }
  if (accept == PathKinds::kDirectory) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a directory"));
  }
  out.size = static_cast<uint64_t>(st.st_size);
  return out;
}

namespace {

// Reads `size` bytes of `fd` from `offset` into `out`; the count actually read.
absl::StatusOr<size_t> ReadAt(int fd, char* out, size_t size, const std::string& name) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::DataLossError(absl::StrCat("error reading ", name, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

absl::StatusOr<std::string> ReadHead(const OpenedPath& file, const std::string& name, size_t n) {
  const size_t want = file.size < n ? static_cast<size_t>(file.size) : n;
  std::string head(want, '\0');
  absl::StatusOr<size_t> got = ReadAt(file.fd.get(), head.data(), want, name);
  if (!got.ok()) return got.status();
  head.resize(*got);
  return head;
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, absl::string_view what,
                                            uint64_t max_bytes) {
  absl::StatusOr<OpenedPath> file = OpenUserPath(path, what, PathKinds::kFile);
  if (!file.ok()) return file.status();
  const std::string name = absl::StrCat(what, " ", path);
  const uint64_t size = file->size;
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is ", size, " bytes, more than the ",
                                                   max_bytes, " a ", what, " may have"));
  }
  std::string bytes;
  // The caps allow sizes a small machine cannot hold: that is an error to report, not
  // an abort from an uncaught std::bad_alloc.
  try {
    bytes.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot read ", name, ": ", size, " bytes do not fit in memory"));
  } catch (const std::length_error&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot read ", name, ": ", size, " bytes do not fit in memory"));
  }
  absl::StatusOr<size_t> done = ReadAt(file->fd.get(), bytes.data(), bytes.size(), name);
  if (!done.ok()) return done.status();
  if (*done != size) {
    return absl::DataLossError(absl::StrCat("error reading ", name, ": ", *done, " of ", size,
                                            " bytes (the file shrank while being read)"));
  }
  return bytes;
}

}  // namespace dk
