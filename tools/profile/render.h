// Human-readable forms of a profile record (record.h): the per-stage table printed by
// the profile tool, the phase-5 markdown record, and a self-contained HTML report
// (inline CSS and SVG charts, nothing fetched) with three charts whose <svg> ids the
// render test checks: "waterfall" (ms/token across stages), "breakdown" (where one
// token's time goes, baseline vs final stage) and "trend" (ms of every token); and the
// same three charts as one standalone SVG document (ChartSvg), drawn on a white page,
// from which the profile tool makes phase5_decode.png with librsvg (io.h, RenderPng).
// Thread-safety: pure functions.
#ifndef DK_TOOLS_PROFILE_RENDER_H_
#define DK_TOOLS_PROFILE_RENDER_H_

#include <string>

#include "tools/profile/record.h"

namespace dk::profile {

std::string FormatTable(const ProfileRecord& record);
std::string Markdown(const ProfileRecord& record, const std::string& command);
std::string Html(const ProfileRecord& record, const std::string& command);
// The charts stacked under a heading; each keeps its <svg> id and sits at x/y attributes
// in px (its viewBox equals its size, so chart units are the page's pixels).
std::string ChartSvg(const ProfileRecord& record);

}  // namespace dk::profile

#endif  // DK_TOOLS_PROFILE_RENDER_H_
