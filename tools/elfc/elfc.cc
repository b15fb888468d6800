// elfc: model shape -> baseline decode ELF, through the model graph (//graph). The
// shape comes from the model file itself (a GGUF, an HF checkpoint directory or its
// config.json: weights/model_file.h) or from a text proto of dk.elf.ModelShape.
//   elfc --model SmolLM2-135M.Q4_1.gguf --out decode.elf
//   elfc --model Llama-3.2-1B/config.json --name llama32_1b --max_context 2048 --shape_out shape.textproto
//   elfc --config shape.textproto --out decode.elf
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
#include "google/protobuf/text_format.h"
#include "graph/baseline.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/read_file.h"
#include "weights/model_file.h"

ABSL_FLAG(std::string, config, "", "model config, text proto of dk.elf.ModelShape");
ABSL_FLAG(std::string, model, "",
          "the model file whose shape to build: a .gguf, an HF checkpoint directory, or its config.json "
          "(instead of --config)");
ABSL_FLAG(std::string, name, "", "with --model: the shape's name (default: the file's own)");
ABSL_FLAG(int64_t, max_context, 0,
          "with --model: the most positions the ELF holds, capping the model's own maximum "
          "(0: the default cap, 32768)");
ABSL_FLAG(std::string, out, "", "output decode ELF");
ABSL_FLAG(std::string, shape_out, "",
          "also (or only, without --out) write the shape as a text proto of dk.elf.ModelShape");

namespace {

absl::StatusOr<dk::elf::ModelShape> ReadConfig(const std::string& path) {
  DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(path, "--config"));
  return dk::elf::ParseModelShapeText(text, path);
}

absl::Status WriteShape(const dk::elf::ModelShape& shape, const std::string& path) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(shape, &text)) {
    return absl::InternalError("could not print the model shape");
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("--shape_out: cannot write ", path));
  const std::string header = "# proto-file: elf/program.proto\n# proto-message: dk.elf.ModelShape\n";
  const bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
                  std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return absl::InvalidArgumentError(absl::StrCat("--shape_out: cannot write ", path));
  return absl::OkStatus();
}

absl::Status Run(const std::string& config, const std::string& model, const std::string& out,
                 const std::string& shape_out) {
  dk::elf::ModelShape shape;
  if (!model.empty()) {
    dk::weights::ModelFileOptions options;
    options.name = absl::GetFlag(FLAGS_name);
    options.max_context = absl::GetFlag(FLAGS_max_context);
    DK_ASSIGN_OR_RETURN(shape, dk::weights::ShapeFromModelFile(model, options));
  } else {
    DK_ASSIGN_OR_RETURN(shape, ReadConfig(config));
  }
  if (!shape_out.empty()) DK_RETURN_IF_ERROR(WriteShape(shape, shape_out));
  if (out.empty()) return absl::OkStatus();
  DK_ASSIGN_OR_RETURN(const dk::elf::Program program, dk::graph::BuildBaseline(shape));
  return dk::elf::WriteElfFile(program, out);
}

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: elfc (--model FILE_OR_DIR [--name N] [--max_context N] | --config model.textproto) "
      "[--out decode.elf] [--shape_out shape.textproto]";
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() > 1) {
    return dk::ExitWithError(
        "elfc", absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[1], "'; ", kUsage)),
        dk::kExitUsage);
  }
  const std::string config = absl::GetFlag(FLAGS_config), out = absl::GetFlag(FLAGS_out);
  const std::string model = absl::GetFlag(FLAGS_model), shape_out = absl::GetFlag(FLAGS_shape_out);
  if (!config.empty() && !model.empty()) {
    return dk::ExitWithError("elfc", absl::InvalidArgumentError("--config and --model: give one"), dk::kExitUsage);
  }
  if (model.empty()) {
    if (absl::Status s = dk::cli::RequireFlag("config", config); !s.ok()) {
      return dk::ExitWithError("elfc", absl::InvalidArgumentError(absl::StrCat(s.message(), " (or --model)")),
                               dk::kExitUsage);
    }
  }
  if (out.empty() && shape_out.empty()) {
    return dk::ExitWithError("elfc", dk::cli::RequireFlag("out", out), dk::kExitUsage);
  }
  if (model.empty() && (!absl::GetFlag(FLAGS_name).empty() || absl::GetFlag(FLAGS_max_context) != 0)) {
    return dk::ExitWithError("elfc", absl::InvalidArgumentError("--name and --max_context go with --model"),
                             dk::kExitUsage);
  }
  if (!config.empty()) {
    if (absl::Status s = dk::cli::RequireFile("config", config); !s.ok()) return dk::ExitWithError("elfc", s);
  }
  if (absl::Status s = Run(config, model, out, shape_out); !s.ok()) return dk::ExitWithError("elfc", s);
  return dk::kExitOk;
}
