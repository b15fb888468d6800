// What the profile tool does besides measuring: progress lines on stderr, reading and
// writing files, the charts' PNG, the date. Thread-safety: one caller.
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

// Renders an SVG file (render.h, ChartSvg) to a PNG file with librsvg's rsvg-convert
// (Debian librsvg2-bin, which ./bazelw installs; no browser, nothing fetched). NotFound
// when rsvg-convert is not installed; Internal, with its messages, when it fails.
absl::Status RenderPng(const std::string& svg_path, const std::string& png_path);

// Now, UTC, ISO 8601 ("2026-11-29T10:10:16Z").
std::string UtcNow();

}  // namespace dk::profile

#endif  // DK_TOOLS_PROFILE_IO_H_
