// What the profile tool does besides measuring: progress lines on stderr, reading and
// writing files, the report's screenshot, the date. Thread-safety: one caller.
#ifndef DK_TOOLS_PROFILE_IO_H_
#define DK_TOOLS_PROFILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dk::profile {

// "[profile] ..." lines on stderr; a token counter that rewrites one line on a
// terminal, else prints every quarter.
class Progress {
 public:
  Progress();
  void Line(const std::string& s);
  void Tick(const std::string& what, int done, int total);
  void End();

 private:
  bool tty_;
  bool open_ = false;
};

absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFile(const std::string& path, const std::string& text);
absl::Status MakeDirs(const std::string& dir);

// Headless Chromium's screenshot of the report (no network: a local file); NotFound
// when chromium is not installed.
absl::Status Screenshot(const std::string& html, const std::string& png);

// Now, UTC, ISO 8601 ("2026-11-29T10:10:16Z").
std::string UtcNow();

}  // namespace dk::profile

#endif  // DK_TOOLS_PROFILE_IO_H_
