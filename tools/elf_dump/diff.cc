#include "tools/elf_dump/diff.h"

#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "registry/registry.h"
#include "elf/elf.h"
#include "elf/stats.h"

namespace dk::elf_dump {
namespace {

bool Digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool Word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// "L12.q_proj.w" -> "L*.q_proj.w", "lm_head.w.part3" -> "lm_head.w.part*".
std::string Pattern(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == 'L' && (i == 0 || !Word(s[i - 1])) && i + 1 < s.size() && Digit(s[i + 1])) {
      size_t j = i + 1;
      while (j < s.size() && Digit(s[j])) ++j;
      if (j < s.size() && s[j] == '.') {
        out += "L*";
        i = j;
        continue;
      }
    }
    if (s.compare(i, 5, ".part") == 0 && i + 5 < s.size() && Digit(s[i + 5])) {
      size_t j = i + 5;
      while (j < s.size() && Digit(s[j])) ++j;
      if (j == s.size() || !Word(s[j])) {
        out += ".part*";
        i = j;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// The name without a trailing ".part<N>".
std::string StripPart(const std::string& s) {
  const size_t dot = s.rfind(".part");
  if (dot == std::string::npos || dot + 5 >= s.size()) return s;
  for (size_t i = dot + 5; i < s.size(); ++i) {
    if (!Digit(s[i])) return s;
  }
  return s.substr(0, dot);
}

// Compact() on one line: "a (x3), b, c".
std::string CompactInline(const std::vector<std::string>& items) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<int, std::string>> seen;  // pattern -> (count, first)
  for (const auto& item : items) {
    const std::string p = Pattern(item);
    auto [it, fresh] = seen.emplace(p, std::make_pair(0, item));
    if (fresh) order.push_back(p);
    ++it->second.first;
  }
  std::vector<std::string> out;
  for (const auto& p : order) {
    const auto& [n, first] = seen.at(p);
    out.push_back(n > 1 ? absl::StrCat(p, " (x", n, ")") : first);
  }
  return absl::StrJoin(out, ", ");
}

struct LaunchRef {
  std::string id;     // the BO its output binds
  std::string group;  // the launch group holding it
  std::string symbol;
};

std::vector<LaunchRef> Launches(const elf::Program& p) {
  std::vector<LaunchRef> out;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    for (int i = 0; i < s.group().launches_size(); ++i) {
      const elf::Launch& l = s.group().launches(i);
      std::string id;
      const registry::Kernel* kernel = nullptr;
      if (registry::FindSymbol(l.kernel_symbol(), &kernel).ok() && kernel->outputs_size() > 0) {
        for (const auto& b : l.bindings()) {
          if (b.param() == kernel->outputs(0)) id = b.bo();
        }
      }
      if (id.empty()) id = absl::StrCat(s.group().name(), "#", i);
      out.push_back({id, s.group().name(), l.kernel_symbol()});
    }
  }
  return out;
}

std::vector<std::string> GroupNames(const elf::Program& p) {
  std::vector<std::string> out;
  for (const auto& s : p.steps()) {
    if (s.has_group()) out.push_back(s.group().name());
  }
  return out;
}

std::string LineageLine(const elf::LineageEntry& l) {
  return absl::StrCat(l.pass(), " [", l.target(), "] ", l.applied() ? "applied" : "skipped", ": ",
                      l.reason());
}

// The layout, and the block format when the weight is in blocks: "row_major q8_0",
// "row_major q4_1 (as stored)" for the weights file's own blocks.
std::string Layout(const elf::BufferObject& b) {
  const std::string format = elf::BlockFormatName(b.block_format());
  return absl::StrCat(b.layout().empty() ? registry::kRowMajor : b.layout(), format.empty() ? "" : " ",
                      format, b.blocks_as_stored() ? " (as stored)" : "");
}

// `names` in the order they appear in `order`.
std::vector<std::string> InOrder(const std::set<std::string>& names, const std::vector<std::string>& order) {
  std::vector<std::string> out;
  for (const auto& n : order) {
    if (names.count(n)) out.push_back(n);
  }
  return out;
}

// The lineages: the passes b adds to a, or where they part.
void DiffLineage(const elf::Program& a, const elf::Program& b, const std::string& a_name,
                 const std::string& b_name, std::string& body) {
  int common = 0;
  while (common < a.lineage_size() && common < b.lineage_size() &&
         google::protobuf::util::MessageDifferencer::Equals(a.lineage(common), b.lineage(common))) {
    ++common;
  }
  if (common == a.lineage_size()) {
    for (int i = common; i < b.lineage_size(); ++i) {
      absl::StrAppend(&body, "lineage added: ", LineageLine(b.lineage(i)), "\n");
    }
  } else {
    absl::StrAppend(&body, "lineage: ", b_name, " is not derived from ", a_name, " (first difference at entry ",
                    common, ")\n");
    for (int i = common; i < a.lineage_size(); ++i) absl::StrAppend(&body, "  - ", LineageLine(a.lineage(i)), "\n");
    for (int i = common; i < b.lineage_size(); ++i) absl::StrAppend(&body, "  + ", LineageLine(b.lineage(i)), "\n");
  }
}

// Runs, launches, host traffic per token.
void DiffRuns(const elf::Program& a, const elf::Program& b, const std::vector<LaunchRef>& la,
              const std::vector<LaunchRef>& lb, std::string& body) {
  auto host_steps = [](const elf::Program& p) {
    int n = 0;
    for (const auto& s : p.steps()) n += s.has_host();
    return n;
  };
  const int runs_a = elf::RunsPerToken(a), runs_b = elf::RunsPerToken(b);
  if (runs_a != runs_b || la.size() != lb.size() || host_steps(a) != host_steps(b)) {
    absl::StrAppend(&body, "runs per token: ", runs_a, " -> ", runs_b, " (launches ", la.size(), " -> ",
                    lb.size(), ", host steps ", host_steps(a), " -> ", host_steps(b), ")\n");
  }
  const int64_t written_a = elf::BytesWrittenPerToken(a), written_b = elf::BytesWrittenPerToken(b);
  if (written_a != written_b) {
    absl::StrAppend(&body, "host writes per token: ", elf::HumanBytes(written_a), " -> ",
                    elf::HumanBytes(written_b), "\n");
  }
}

// Groups, matched through their launches: by the BO a launch's output binds,
// or, for a launch split into partitions ("lm_head.y.part0"), by the BO of the
// launch it was split from.
void DiffGroups(const elf::Program& a, const elf::Program& b, const std::vector<LaunchRef>& la,
                const std::vector<LaunchRef>& lb, std::string& body) {
  using GroupsOf = std::map<std::string, std::set<std::string>>;  // launch id -> groups
  GroupsOf a_groups_of, a_groups_of_whole, b_groups_of, b_groups_of_whole;
  for (const auto& l : la) {
    a_groups_of[l.id].insert(l.group);
    a_groups_of_whole[StripPart(l.id)].insert(l.group);
  }
  for (const auto& l : lb) {
    b_groups_of[l.id].insert(l.group);
    b_groups_of_whole[StripPart(l.id)].insert(l.group);
  }
  // The groups of the other side holding launch `id`: the same launch, its
  // partitions, or the launch it is a partition of.
  auto find = [](const GroupsOf& exact, const GroupsOf& whole,
                 const std::string& id) -> const std::set<std::string>* {
    if (auto it = exact.find(id); it != exact.end()) return &it->second;
    if (auto it = whole.find(id); it != whole.end()) return &it->second;
    if (auto it = exact.find(StripPart(id)); it != exact.end()) return &it->second;
    return nullptr;
  };
  auto find_in_a = [&](const std::string& id) { return find(a_groups_of, a_groups_of_whole, id); };
  auto find_in_b = [&](const std::string& id) { return find(b_groups_of, b_groups_of_whole, id); };
  std::map<std::string, std::set<std::string>> sources, targets;  // b group -> a groups, a -> b
  for (const auto& l : lb) {
    if (const auto* groups = find_in_a(l.id)) sources[l.group].insert(groups->begin(), groups->end());
  }
  for (const auto& l : la) {
    if (const auto* groups = find_in_b(l.id)) targets[l.group].insert(groups->begin(), groups->end());
  }
  const std::vector<std::string> ga = GroupNames(a), gb = GroupNames(b);
  std::vector<std::string> group_lines;
  for (const auto& g : gb) {
    const auto& src = sources[g];
    if (src.empty()) {
      group_lines.push_back(absl::StrCat("added: ", g));
    } else if (src.size() > 1) {
      group_lines.push_back(absl::StrCat("merged: ", g, " <- ", absl::StrJoin(InOrder(src, ga), " + ")));
    } else if (*src.begin() != g && targets[*src.begin()].size() == 1) {
      group_lines.push_back(absl::StrCat("renamed: ", *src.begin(), " -> ", g));
    }
  }
  for (const auto& g : ga) {
    const auto& dst = targets[g];
    if (dst.empty()) {
      group_lines.push_back(absl::StrCat("removed: ", g));
    } else if (dst.size() > 1) {
      group_lines.push_back(absl::StrCat("split: ", g, " -> ", absl::StrJoin(InOrder(dst, gb), " + ")));
    }
  }
  if (!group_lines.empty()) absl::StrAppend(&body, "groups:\n", Compact(group_lines));
}

// BO counts by category, BOs removed and added, category and layout changes.
void DiffBos(const elf::Program& a, const elf::Program& b, std::string& body) {
  std::map<std::string, const elf::BufferObject*> bos_a, bos_b;
  for (const auto& bo : a.bos()) bos_a[bo.name()] = &bo;
  for (const auto& bo : b.bos()) bos_b[bo.name()] = &bo;
  std::map<elf::BoCategory, int> count_a, count_b;
  for (const auto& bo : a.bos()) ++count_a[bo.category()];
  for (const auto& bo : b.bos()) ++count_b[bo.category()];
  if (count_a != count_b) {
    std::vector<std::string> parts;
    for (auto c : {elf::WRITE, elf::STATIC, elf::INTERMEDIATE, elf::OUTPUT}) {
      parts.push_back(absl::StrCat(elf::BoCategory_Name(c), " ", count_a[c], " -> ", count_b[c]));
    }
    absl::StrAppend(&body, "BOs: ", a.bos_size(), " -> ", b.bos_size(), " (", absl::StrJoin(parts, ", "), ")\n");
  }
  std::vector<std::string> category_lines, layout_lines, removed, added;
  for (const auto& bo : a.bos()) {
    auto it = bos_b.find(bo.name());
    if (it == bos_b.end()) {
      removed.push_back(bo.name());
      continue;
    }
    if (bo.category() != it->second->category()) {
      category_lines.push_back(absl::StrCat(bo.name(), ": ", elf::BoCategory_Name(bo.category()), " -> ",
                                            elf::BoCategory_Name(it->second->category())));
    }
    if (Layout(bo) != Layout(*it->second)) {
      layout_lines.push_back(absl::StrCat(bo.name(), ": ", Layout(bo), " -> ", Layout(*it->second)));
    }
  }
  for (const auto& bo : b.bos()) {
    if (bos_a.count(bo.name()) == 0) {
      added.push_back(absl::StrCat(bo.name(), " [", elf::BoCategory_Name(bo.category()),
                                   bo.weight_tensor().empty() ? "" : absl::StrCat(", ", Layout(bo)), "]"));
    }
  }
  if (!category_lines.empty()) absl::StrAppend(&body, "BO categories changed:\n", Compact(category_lines));
  if (!removed.empty()) absl::StrAppend(&body, "BOs removed (", removed.size(), "): ", CompactInline(removed), "\n");
  if (!added.empty()) absl::StrAppend(&body, "BOs added (", added.size(), "): ", CompactInline(added), "\n");
  if (!layout_lines.empty()) absl::StrAppend(&body, "layouts changed:\n", Compact(layout_lines));
}

// Kernel symbols, per launch of b (matched as above) and as the set the ELF links.
void DiffSymbols(const std::vector<LaunchRef>& la, const std::vector<LaunchRef>& lb, std::string& body) {
  std::map<std::string, std::string> symbol_in_a;  // launch id -> symbol
  for (const auto& l : la) symbol_in_a[l.id] = l.symbol;
  std::map<std::string, int> renames;
  std::vector<std::string> rename_order;
  for (const auto& l : lb) {
    auto it = symbol_in_a.find(l.id);
    if (it == symbol_in_a.end()) it = symbol_in_a.find(StripPart(l.id));
    if (it == symbol_in_a.end() || it->second == l.symbol) continue;
    const std::string key = absl::StrCat(it->second, " -> ", l.symbol);
    if (renames[key]++ == 0) rename_order.push_back(key);
  }
  std::set<std::string> linked_a, linked_b;
  for (const auto& l : la) linked_a.insert(l.symbol);
  for (const auto& l : lb) linked_b.insert(l.symbol);
  if (!rename_order.empty() || linked_a != linked_b) {
    absl::StrAppend(&body, "kernel symbols:\n");
    for (const auto& key : rename_order) {
      absl::StrAppend(&body, "  ", key, ": ", renames[key], renames[key] == 1 ? " launch\n" : " launches\n");
    }
    for (const auto& s : linked_a) {
      if (!linked_b.count(s)) absl::StrAppend(&body, "  - ", s, " (no longer linked)\n");
    }
    for (const auto& s : linked_b) {
      if (!linked_a.count(s)) absl::StrAppend(&body, "  + ", s, " (newly linked)\n");
    }
  }
}

}  // namespace

std::string Compact(const std::vector<std::string>& lines, const std::string& indent) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<int, std::string>> seen;
  for (const auto& line : lines) {
    const std::string p = Pattern(line);
    auto [it, fresh] = seen.emplace(p, std::make_pair(0, line));
    if (fresh) order.push_back(p);
    ++it->second.first;
  }
  std::string out;
  for (const auto& p : order) {
    const auto& [n, first] = seen.at(p);
    absl::StrAppend(&out, indent, n > 1 ? absl::StrCat(p, "  (x", n, ")") : first, "\n");
  }
  return out;
}

std::string DiffPrograms(const elf::Program& a, const elf::Program& b, const std::string& a_name,
                         const std::string& b_name) {
  std::string out;
  std::string body;
  auto lineage_of = [](const elf::Program& p) {
    std::vector<std::string> passes;
    for (const auto& l : p.lineage()) passes.push_back(l.pass());
    return absl::StrJoin(passes, " -> ");
  };
  absl::StrAppend(&out, "--- ", a_name, " (", lineage_of(a), ")\n+++ ", b_name, " (", lineage_of(b), ")\n");

  if (!google::protobuf::util::MessageDifferencer::Equals(a.model(), b.model())) {
    absl::StrAppend(&body, "model: ", a.model().name(), " -> ", b.model().name(),
                    " (different model shapes: the stages are not of one chain)\n");
  }
  if (a.weights_digest() != b.weights_digest()) {
    absl::StrAppend(&body, "weights digest: '", a.weights_digest(), "' -> '", b.weights_digest(), "'\n");
  }
  DiffLineage(a, b, a_name, b_name, body);
  const std::vector<LaunchRef> la = Launches(a), lb = Launches(b);
  DiffRuns(a, b, la, lb, body);
  DiffGroups(a, b, la, lb, body);
  DiffBos(a, b, body);
  DiffSymbols(la, lb, body);
  if (body.empty()) body = "no differences\n";
  return out + body;
}

}  // namespace dk::elf_dump
