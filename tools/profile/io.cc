#include "tools/profile/io.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "util/read_file.h"

namespace dk::profile {

Progress::Progress() : tty_(isatty(2)) {}

void Progress::Line(const std::string& s) {
  End();
  std::fprintf(stderr, "[profile] %s\n", s.c_str());
}

void Progress::Tick(const std::string& what, int done, int total) {
  if (tty_) {
    std::fprintf(stderr, "\r[profile] %s: token %d/%d", what.c_str(), done, total);
    open_ = true;
  } else if (done == total || (total >= 4 && done % (total / 4) == 0)) {
    std::fprintf(stderr, "[profile] %s: token %d/%d\n", what.c_str(), done, total);
  }
  std::fflush(stderr);
}

void Progress::End() {
  if (open_) std::fprintf(stderr, "\n");
  open_ = false;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return dk::ReadRegularFile(path, "file");
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out << text;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  const std::string cmd = absl::StrCat("mkdir -p '", dir, "'");
  if (std::system(cmd.c_str()) != 0) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir));
  return absl::OkStatus();
}

absl::Status RenderPng(const std::string& svg, const std::string& png) {
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
    return absl::NotFoundError("rsvg-convert is not installed (Debian librsvg2-bin; ./bazelw installs it); no PNG");
  }
  const std::string cmd = absl::StrCat("timeout 120 rsvg-convert --format=png --output='", png, "' '", svg, "' 2>&1");
  std::string messages;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("cannot run rsvg-convert");
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) messages += buf;
  if (pclose(p) != 0) return absl::InternalError(absl::StrCat("rsvg-convert failed on ", svg, ": ", messages));
  return absl::OkStatus();
}

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace dk::profile
