#include "verify/gate.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/status.h"

namespace dk::verify {
namespace {

// Text for one table cell: control characters escaped so a row stays on one line.
std::string Escape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '|':
        out += "\\|";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string Quote(absl::string_view s) { return absl::StrCat("\"", Escape(s), "\""); }

std::string DecodeOrIds(const DecodeFn& decode, const std::vector<uint32_t>& ids) {
  if (decode) return decode(ids);
  return absl::StrCat("[", absl::StrJoin(ids, " "), "]");
}

// 1-based rank of `id` in `top`, nullopt when absent.
std::optional<int> RankIn(const std::vector<uint32_t>& top, uint32_t id) {
  auto it = std::find(top.begin(), top.end(), id);
  if (it == top.end()) return std::nullopt;
  return static_cast<int>(it - top.begin()) + 1;
}

std::string RankText(const std::optional<int>& rank, int k) {
  return rank ? absl::StrCat("#", *rank, "/", k) : std::string("absent");
}

// Checks both sides have the same prompts, each with >= num_tokens valid steps.
absl::Status CheckShapes(const std::vector<Sequence>& a, const std::vector<Sequence>& b,
                         absl::string_view a_name, absl::string_view b_name, int num_tokens,
                         int k) {
  if (num_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_tokens must be > 0, got ", num_tokens));
  }
  if (a.empty()) return absl::InvalidArgumentError(absl::StrCat(a_name, " has no sequences"));
  if (a.size() != b.size()) {
    const std::vector<Sequence>& longer = a.size() > b.size() ? a : b;
    absl::string_view lacking = a.size() > b.size() ? b_name : a_name;
    size_t n = std::min(a.size(), b.size());
    return absl::InvalidArgumentError(absl::StrCat(
        a_name, " has ", a.size(), " sequences, ", b_name, " has ", b.size(), "; ", lacking,
        " is missing the sequence for prompt ", n, " ", Quote(longer[n].prompt)));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].prompt != b[i].prompt) {
      return absl::InvalidArgumentError(absl::StrCat("prompt ", i, " differs: ", a_name, " ",
                                                     Quote(a[i].prompt), ", ", b_name, " ",
                                                     Quote(b[i].prompt)));
    }
    for (const auto& [seq, name] : {std::make_pair(&a[i], a_name), std::make_pair(&b[i], b_name)}) {
      if (static_cast<int>(seq->steps.size()) < num_tokens) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " sequence for prompt ", i, " ", Quote(seq->prompt), " has ",
                         seq->steps.size(), " steps, the gate needs ", num_tokens));
      }
      if (k <= 0) continue;  // exact comparison: top-k sets are not used
      for (int s = 0; s < num_tokens; ++s) {
        DK_RETURN_IF_ERROR(
            ValidateStep(seq->steps[s], k,
                         absl::StrCat(name, " prompt ", i, " ", Quote(seq->prompt), " step ", s)));
      }
    }
  }
  return absl::OkStatus();
}

// Pads `cells` column by column (byte widths; the last column is not padded).
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c + 1 < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      out += row[c];
      if (c + 1 < row.size()) out += std::string(width[c] - row[c].size(), ' ') + " | ";
    }
    out += "\n";
  }
  return out;
}

}  // namespace

absl::StatusOr<GateReport> CheckLogprobsClose(const std::vector<Sequence>& reference,
                                              const std::vector<Sequence>& candidate,
                                              const DecodeFn& decode, const GateOptions& options) {
  if (options.k <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("k must be > 0, got ", options.k));
  }
  DK_RETURN_IF_ERROR(
      CheckShapes(reference, candidate, "reference", "candidate", options.num_tokens, options.k));
  GateReport report;
  report.options = options;
  report.passed = true;
  for (size_t i = 0; i < reference.size(); ++i) {
    const Sequence& ref = reference[i];
    const Sequence& cand = candidate[i];
    PromptVerdict v;
    v.prompt = ref.prompt;
    v.passed = true;
    for (int s = 0; s < options.num_tokens; ++s) {
      const StepRecord& r = ref.steps[s];
      const StepRecord& c = cand.steps[s];
      if (r.id == c.id) {
        v.agreed_ids.push_back(r.id);
        continue;
      }
      // First divergence: each side's choice must be in the other's top-k; stop here.
      v.divergence_step = s;
      v.reference_choice = r.id;
      v.candidate_choice = c.id;
      v.candidate_rank_in_reference = RankIn(r.top5, c.id);
      v.reference_rank_in_candidate = RankIn(c.top5, r.id);
      v.passed =
          v.candidate_rank_in_reference.has_value() && v.reference_rank_in_candidate.has_value();
      break;
    }
    v.agreed_text = DecodeOrIds(decode, v.agreed_ids);
    report.passed = report.passed && v.passed;
    report.prompts.push_back(std::move(v));
  }
  return report;
}

std::string FormatGateReport(const GateReport& report) {
  const int k = report.options.k;
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"#", "result", "prompt", "diverged at", "ref -> cand",
                  absl::StrCat("cand in ref top-", k), absl::StrCat("ref in cand top-", k),
                  "agreed prefix"});
  int passed = 0;
  for (size_t i = 0; i < report.prompts.size(); ++i) {
    const PromptVerdict& v = report.prompts[i];
    passed += v.passed ? 1 : 0;
    std::vector<std::string> row = {absl::StrCat(i), v.passed ? "PASS" : "FAIL", Quote(v.prompt)};
    if (v.divergence_step) {
      row.push_back(absl::StrCat("step ", *v.divergence_step));
      row.push_back(absl::StrCat(v.reference_choice, " -> ", v.candidate_choice));
      row.push_back(RankText(v.candidate_rank_in_reference, k));
      row.push_back(RankText(v.reference_rank_in_candidate, k));
    } else {
      row.insert(row.end(), {"none", "-", "-", "-"});
    }
    row.push_back(absl::StrCat(Quote(v.agreed_text), " (", v.agreed_ids.size(), " tokens)"));
    rows.push_back(std::move(row));
  }
  return absl::StrCat(Table(rows), "verify gate (k=", k, ", ", report.options.num_tokens,
                      " tokens): ", report.passed ? "PASS" : "FAIL", " (", passed, "/",
                      report.prompts.size(), " prompts)\n");
}

absl::StatusOr<ExactReport> CompareExact(const std::vector<Sequence>& parent,
                                         const std::vector<Sequence>& child, const DecodeFn& decode,
                                         int num_tokens, const std::string& parent_name,
                                         const std::string& child_name) {
  DK_RETURN_IF_ERROR(CheckShapes(parent, child, parent_name, child_name, num_tokens, /*k=*/0));
  ExactReport report;
  report.same = true;
  report.parent_name = parent_name;
  report.child_name = child_name;
  for (size_t i = 0; i < parent.size(); ++i) {
    ExactVerdict v;
    v.prompt = parent[i].prompt;
    v.same = true;
    for (int s = 0; s < num_tokens; ++s) {
      uint32_t p = parent[i].steps[s].id, c = child[i].steps[s].id;
      if (p != c) {
        v.same = false;
        v.first_difference = s;
        v.parent_id = p;
        v.child_id = c;
        break;
      }
      v.agreed_ids.push_back(p);
    }
    v.agreed_text = DecodeOrIds(decode, v.agreed_ids);
    report.same = report.same && v.same;
    report.prompts.push_back(std::move(v));
  }
  return report;
}

std::string FormatExactReport(const ExactReport& report) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"#", "result", "prompt", "first difference",
                  absl::StrCat(report.parent_name, " -> ", report.child_name), "agreed prefix"});
  int same = 0;
  for (size_t i = 0; i < report.prompts.size(); ++i) {
    const ExactVerdict& v = report.prompts[i];
    same += v.same ? 1 : 0;
    rows.push_back({absl::StrCat(i), v.same ? "SAME" : "DIFFERENT", Quote(v.prompt),
                    v.first_difference ? absl::StrCat("step ", *v.first_difference) : "none",
                    v.first_difference ? absl::StrCat(v.parent_id, " -> ", v.child_id) : "-",
                    absl::StrCat(Quote(v.agreed_text), " (", v.agreed_ids.size(), " tokens)")});
  }
  return absl::StrCat(Table(rows), report.child_name, " vs ", report.parent_name, ": ",
                      report.same ? "SAME tokens" : "DIFFERENT tokens", " (", same, "/",
                      report.prompts.size(), " prompts identical)\n");
}

}  // namespace dk::verify
