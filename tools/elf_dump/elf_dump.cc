// Prints a decode ELF's program as text proto, after full validation.
//   ./bazelw run //tools/elf_dump -- path/to/decode.elf
//   ./bazelw run //tools/elf_dump -- --summary path/to/decode.elf
// Relative paths are resolved against the directory `bazel run` was called from.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "elf/elf.h"
#include "google/protobuf/text_format.h"

ABSL_FLAG(bool, summary, false, "print only counts: BOs by category, groups, launches");

namespace {

std::string Resolve(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

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
  std::printf("BOs: %d WRITE, %d STATIC, %d INTERMEDIATE, %d OUTPUT\n", by_category[1],
              by_category[2], by_category[3], by_category[4]);
  for (const auto& l : p.lineage()) {
    std::printf("lineage: %s [%s] %s: %s\n", l.pass().c_str(), l.target().c_str(),
                l.applied() ? "applied" : "skipped", l.reason().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("elf_dump [--summary] file.elf");
  const auto args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "usage: elf_dump [--summary] file.elf\n");
    return 2;
  }
  auto program = dk::elf::ReadElfFile(Resolve(args[1]));
  if (!program.ok()) {
    std::fprintf(stderr, "elf_dump: %s\n", std::string(program.status().message()).c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_summary)) {
    PrintSummary(*program);
    return 0;
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(*program, &text);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
