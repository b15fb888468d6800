// The figures of a model's phase-5 record (models/<m>/docs/development_progress/
// phase5_decode.md, written by :profile) that a review puts side by side: per
// stage of the "## All stages" table its status, ms/token, runs/token, x floor
// and gate, and the "## Final" line.
// Thread-safety: stateless functions.
#ifndef DK_TOOLS_REVIEW_RECORD_H_
#define DK_TOOLS_REVIEW_RECORD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dk::review {

struct StageFigures {
  std::string stage;    // ":decode_bo"
  std::string status;   // "applied"
  std::string ms;       // the median, "9.22"
  std::string runs;     // "424"
  std::string x_floor;  // "1.57x"
  std::string gate;     // "PASS"
};

struct Record {
  std::vector<StageFigures> stages;  // in table order
  std::string final_line;            // the "## Final" paragraph, "**" dropped
};

// Columns are found by their header ("stage", "status", "ms/token...",
// "runs/token", "x floor", "gate"), so added columns do not matter.
// InvalidArgument when there is no "## All stages" table or it lacks a column.
absl::StatusOr<Record> ParseRecord(const std::string& markdown);

// A markdown table, one row per stage of either record (base order, with stages
// of `work` only inserted after their predecessor), each cell "base -> work";
// a stage on one side only is marked "(base only)" / "(working tree only)".
// Then the two Final lines.
std::string SideBySide(const Record* base, const Record* work);

}  // namespace dk::review

#endif  // DK_TOOLS_REVIEW_RECORD_H_
