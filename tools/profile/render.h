// Human-readable forms of a profile record (record.h): the per-stage table printed by
// the profile tool, the phase-5 markdown record, and a self-contained HTML report
// (inline CSS and SVG charts, nothing fetched) with three charts whose <svg> ids the
// render test checks: "waterfall" (ms/token across stages), "breakdown" (where one
// token's time goes, baseline vs final stage) and "trend" (ms of every token).
// Thread-safety: pure functions.
#ifndef DK_TOOLS_PROFILE_RENDER_H_
#define DK_TOOLS_PROFILE_RENDER_H_

#include <string>

#include "tools/profile/record.h"

namespace dk::profile {

std::string FormatTable(const ProfileRecord& record);
std::string Markdown(const ProfileRecord& record, const std::string& command);
std::string Html(const ProfileRecord& record, const std::string& command);

}  // namespace dk::profile

#endif  // DK_TOOLS_PROFILE_RENDER_H_
