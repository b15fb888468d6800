// elfc: model config (text proto of dk.elf.ModelShape) -> baseline decode ELF.
//   elfc --config models/llama32_1b/config.textproto --out decode.elf
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "elf/elf.h"
#include "google/protobuf/text_format.h"
#include "tools/elfc/baseline.h"

ABSL_FLAG(std::string, config, "", "model config, text proto of dk.elf.ModelShape");
ABSL_FLAG(std::string, out, "", "output decode ELF");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string config = absl::GetFlag(FLAGS_config), out = absl::GetFlag(FLAGS_out);
  if (config.empty() || out.empty()) {
    std::fprintf(stderr, "usage: elfc --config model.textproto --out decode.elf\n");
    return 2;
  }
  std::ifstream in(config);
  if (!in) {
    std::fprintf(stderr, "elfc: cannot read %s\n", config.c_str());
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  dk::elf::ModelShape model;
  if (!google::protobuf::TextFormat::ParseFromString(text.str(), &model)) {
    std::fprintf(stderr, "elfc: %s is not a valid dk.elf.ModelShape text proto\n", config.c_str());
    return 1;
  }
  auto program = dk::elfc::BuildBaseline(model);
  if (!program.ok()) {
    std::fprintf(stderr, "elfc: %s\n", std::string(program.status().message()).c_str());
    return 1;
  }
  if (auto s = dk::elf::WriteElfFile(*program, out); !s.ok()) {
    std::fprintf(stderr, "elfc: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
