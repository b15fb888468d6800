#include "tools/review/record.h"

#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dk::review {
namespace {

// "| a | b |" -> {"a", "b"}.
std::vector<std::string> Cells(absl::string_view row) {
  row = absl::StripAsciiWhitespace(row);
  absl::ConsumePrefix(&row, "|");
  absl::ConsumeSuffix(&row, "|");
  std::vector<std::string> cells;
  for (absl::string_view c : absl::StrSplit(row, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(c));
  }
  return cells;
}

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n'); }

// The lines after the "## <title>" heading, up to the next "## " heading.
std::vector<std::string> Section(const std::vector<std::string>& lines, absl::string_view title,
                                 bool& found) {
  std::vector<std::string> out;
  found = false;
  for (const std::string& raw : lines) {
    absl::string_view line = absl::StripTrailingAsciiWhitespace(raw);
    if (absl::StartsWith(line, "## ")) {
      if (found) break;
      found = absl::StripAsciiWhitespace(line.substr(3)) == title;
      continue;
    }
    if (found) out.push_back(std::string(line));
  }
  return out;
}

std::string Cell(const std::vector<std::string>& cells, int i) {
  return i >= 0 && i < static_cast<int>(cells.size()) ? cells[i] : "";
}

std::string Pair(const std::string& a, const std::string& b) {
  return absl::StrCat(a.empty() ? "-" : a, " -> ", b.empty() ? "-" : b);
}

}  // namespace

absl::StatusOr<Record> ParseRecord(const std::string& markdown) {
  const std::vector<std::string> lines = Lines(markdown);
  bool found = false;
  const std::vector<std::string> table = Section(lines, "All stages", found);
  if (!found) return absl::InvalidArgumentError("no \"## All stages\" section");
  Record record;
  std::map<std::string, int> col;
  bool header = false;
  for (const std::string& line : table) {
    if (!absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "|")) {
      if (header) break;  // the table ended
      continue;
    }
    std::vector<std::string> cells = Cells(line);
    if (!header) {
      for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
        const std::string& h = cells[i];
        if (h == "stage") col["stage"] = i;
        if (h == "status") col["status"] = i;
        if (absl::StartsWith(h, "ms/token") && !col.count("ms")) col["ms"] = i;
        if (h == "runs/token") col["runs"] = i;
        if (h == "x floor") col["x_floor"] = i;
        if (h == "gate") col["gate"] = i;
      }
      for (const char* need : {"stage", "status", "ms", "runs", "x_floor", "gate"}) {
        if (!col.count(need)) {
          return absl::InvalidArgumentError(
              absl::StrCat("the \"## All stages\" table has no ", need, " column"));
        }
      }
      header = true;
      continue;
    }
    if (!cells.empty() && cells[0].find_first_not_of("-: ") == std::string::npos) continue;  // | --- |
    StageFigures f;
    f.stage = Cell(cells, col["stage"]);
    f.status = Cell(cells, col["status"]);
    const std::string ms = Cell(cells, col["ms"]);
    f.ms = ms.substr(0, ms.find(' '));  // "35.46 (33.90-88.68)" -> the median
    f.runs = Cell(cells, col["runs"]);
    f.x_floor = Cell(cells, col["x_floor"]);
    f.gate = Cell(cells, col["gate"]);
    if (!f.stage.empty()) record.stages.push_back(std::move(f));
  }
  if (!header) return absl::InvalidArgumentError("the \"## All stages\" section has no table");
  for (const std::string& line : Section(lines, "Final", found)) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    record.final_line = absl::StrReplaceAll(std::string(absl::StripAsciiWhitespace(line)), {{"**", ""}});
    break;
  }
  return record;
}

std::string SideBySide(const Record* base, const Record* work) {
  static const StageFigures kNone;
  // Stage order: base's, with work-only stages after their predecessor in work.
  std::vector<std::string> order;
  auto index_of = [&order](const std::string& s) {
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] == s) return static_cast<int>(i);
    }
    return -1;
  };
  if (base != nullptr) {
    for (const auto& f : base->stages) {
      if (index_of(f.stage) < 0) order.push_back(f.stage);
    }
  }
  if (work != nullptr) {
    int after = -1;
    for (const auto& f : work->stages) {
      const int at = index_of(f.stage);
      if (at >= 0) {
        after = at;
      } else {
        order.insert(order.begin() + after + 1, f.stage);
        ++after;
      }
    }
  }
  auto find = [](const Record* r, const std::string& stage) -> const StageFigures* {
    if (r == nullptr) return nullptr;
    for (const auto& f : r->stages) {
      if (f.stage == stage) return &f;
    }
    return nullptr;
  };
  std::string out =
      "| stage | status | ms/token | runs/token | x floor | gate |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const std::string& stage : order) {
    const StageFigures* b = find(base, stage);
    const StageFigures* w = find(work, stage);
    const StageFigures& bf = b ? *b : kNone;
    const StageFigures& wf = w ? *w : kNone;
    std::string name = stage;
    if (b == nullptr) absl::StrAppend(&name, " (working tree only)");
    if (w == nullptr) absl::StrAppend(&name, " (base only)");
    absl::StrAppend(&out, "| ", name, " | ", Pair(bf.status, wf.status), " | ", Pair(bf.ms, wf.ms), " | ",
                    Pair(bf.runs, wf.runs), " | ", Pair(bf.x_floor, wf.x_floor), " | ",
                    Pair(bf.gate, wf.gate), " |\n");
  }
  absl::StrAppend(&out, "\nFinal, base:         ",
                  base == nullptr            ? "(no record)"
                  : base->final_line.empty() ? "(no Final line)"
                                             : base->final_line,
                  "\nFinal, working tree: ",
                  work == nullptr            ? "(no record)"
                  : work->final_line.empty() ? "(no Final line)"
                                             : work->final_line,
                  "\n");
  return out;
}

}  // namespace dk::review
