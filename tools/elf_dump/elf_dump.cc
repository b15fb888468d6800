// Prints a decode ELF's program as text proto, after full validation.
//   ./bazelw run //tools/elf_dump -- path/to/decode.elf
//   ./bazelw run //tools/elf_dump -- --summary path/to/decode.elf
// or what a stage changed (tools/elf_dump/diff.h):
//   ./bazelw run //tools/elf_dump -- --diff bazel-bin/models/m/decode_bo.elf bazel-bin/models/m/decode_opt.elf
// Relative paths are resolved against the directory `bazel run` was called from.
// Exit status (util/exit_codes.h): 0 printed, 1 an ELF cannot be read, 2 usage error.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "elf/prefill_plan.h"
#include "elf/stats.h"
#include "google/protobuf/text_format.h"
#include "tools/elf_dump/diff.h"
#include "util/exit_codes.h"
#include "util/user_path.h"

ABSL_FLAG(bool, summary, false, "print only counts: BOs by category, groups, launches");
ABSL_FLAG(bool, diff, false,
          "elf_dump --diff a.elf b.elf: what b changed relative to a (groups merged, BO "
          "categories, layouts, kernel symbols, lineage)");

namespace {

void PrintSummary(const dk::elf::Program& p) {
  int groups = 0, launches = 0, host = 0;
  for (const auto& s : p.steps()) {
    if (s.has_group()) {
      ++groups;
      launches += s.group().launches_size();
    } else {
      ++host;
    }
  }
  int by_category[5] = {0, 0, 0, 0, 0};
  for (const auto& bo : p.bos()) ++by_category[bo.category()];
  std::printf("model %s: %d layers\n", p.model().name().c_str(), p.model().n_layers());
  std::printf("launch groups (device runs per token): %d, launches: %d, host steps: %d\n",
              groups, launches, host);
  std::printf("device runs: %s\n", dk::elf::DescribeRuns(dk::elf::RunsPerLayer(p)).c_str());
  // The prompt at the runtime's default chunk, planned for the program's target.
  auto target = dk::elf::ProgramTarget(p);
  auto prefill = target.ok() ? dk::elf::PlanPrefill(p, **target, dk::elf::kDefaultPrefillRows, dk::elf::DecodeMerged(p))
                             : absl::StatusOr<dk::elf::PrefillPlan>(target.status());
  std::printf("prefill device runs: %s\n",
              prefill.ok() ? dk::elf::DescribePrefill(*prefill, p.model().n_layers()).c_str()
                           : std::string(prefill.status().message()).c_str());
  std::printf("BOs: %d WRITE, %d STATIC, %d INTERMEDIATE, %d OUTPUT\n", by_category[1],
              by_category[2], by_category[3], by_category[4]);
  // Weight BOs per storage: "bf16" or the block format (elf BlockFormat).
  std::map<std::string, std::pair<int, int64_t>> weights;  // format -> count, bytes
  for (const auto& bo : p.bos()) {
    if (bo.weight_tensor().empty()) continue;
    const std::string format = dk::elf::BlockFormatName(bo.block_format());
    auto& [count, bytes] =
        weights[format.empty() ? "bf16" : absl::StrCat(format, bo.blocks_as_stored() ? " as stored" : "")];
    ++count;
    bytes += bo.size_bytes();
  }
  std::string line;
  for (const auto& [format, cb] : weights) {
    line += absl::StrCat(line.empty() ? "" : ", ", cb.first, " ", format, " (", cb.second, " bytes)");
  }
  std::printf("weight BOs: %s\n", line.empty() ? "none" : line.c_str());
  for (const auto& l : p.lineage()) {
    std::printf("lineage: %s [%s] %s: %s\n", l.pass().c_str(), l.target().c_str(),
                l.applied() ? "applied" : "skipped", l.reason().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] = "usage: elf_dump [--summary] file.elf | elf_dump --diff a.elf b.elf";
  absl::SetProgramUsageMessage(kUsage);
  const auto args = absl::ParseCommandLine(argc, argv);
  const bool diff = absl::GetFlag(FLAGS_diff);
  if (args.size() != (diff ? 3u : 2u) || (diff && absl::GetFlag(FLAGS_summary))) {
    std::fprintf(stderr, "%s\n", kUsage);
    return dk::kExitUsage;
  }
  std::vector<dk::elf::Program> programs;
  for (size_t i = 1; i < args.size(); ++i) {
    auto program = dk::elf::ReadElfFile(dk::UserPath(args[i]));
    if (!program.ok()) {
      std::fprintf(stderr, "elf_dump: %s\n", std::string(program.status().message()).c_str());
      return dk::kExitFailure;
    }
    programs.push_back(*std::move(program));
  }
  if (diff) {
    const std::string text = dk::elf_dump::DiffPrograms(programs[0], programs[1], args[1], args[2]);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return dk::kExitOk;
  }
  if (absl::GetFlag(FLAGS_summary)) {
    PrintSummary(programs[0]);
    return dk::kExitOk;
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(programs[0], &text);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return dk::kExitOk;
}
