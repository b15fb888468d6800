// elfc: model config (text proto of dk.elf.ModelShape) -> baseline decode ELF,
// through the model graph (//graph).
//   elfc --config models/llama32_1b/config.textproto --out decode.elf
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "graph/baseline.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/read_file.h"

ABSL_FLAG(std::string, config, "", "model config, text proto of dk.elf.ModelShape");
ABSL_FLAG(std::string, out, "", "output decode ELF");

namespace {

absl::StatusOr<dk::elf::ModelShape> ReadConfig(const std::string& path) {
  DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(path, "--config"));
  return dk::elf::ParseModelShapeText(text, path);
}

absl::Status Run(const std::string& config, const std::string& out) {
  DK_ASSIGN_OR_RETURN(const dk::elf::ModelShape model, ReadConfig(config));
  DK_ASSIGN_OR_RETURN(const dk::elf::Program program, dk::graph::BuildBaseline(model));
  return dk::elf::WriteElfFile(program, out);
}

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] = "usage: elfc --config model.textproto --out decode.elf";
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() > 1) {
    return dk::ExitWithError(
        "elfc", absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[1], "'; ", kUsage)),
        dk::kExitUsage);
  }
  const std::string config = absl::GetFlag(FLAGS_config), out = absl::GetFlag(FLAGS_out);
  for (const absl::Status& s : {dk::cli::RequireFlag("config", config), dk::cli::RequireFlag("out", out)}) {
    if (!s.ok()) return dk::ExitWithError("elfc", s, dk::kExitUsage);
  }
  if (absl::Status s = dk::cli::RequireFile("config", config); !s.ok()) {
    return dk::ExitWithError("elfc", s);
  }
  if (absl::Status s = Run(config, out); !s.ok()) return dk::ExitWithError("elfc", s);
  return dk::kExitOk;
}
