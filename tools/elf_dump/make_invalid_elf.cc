// Test only: writes a copy of a valid decode ELF with one integer field out of
// range, bypassing validation (elf::WriteElfUnvalidatedForTesting), so that the
// tools' tests can check that every reader refuses it (issue 15).
//   make_invalid_elf --in a.elf --out bad.elf --mutation=host_offset
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "elf/elf.h"
#include "util/exit_codes.h"

ABSL_FLAG(std::string, in, "", "a valid decode ELF");
ABSL_FLAG(std::string, out, "", "the invalid copy");
ABSL_FLAG(std::string, mutation, "host_offset",
          "host_offset (negative) | row_begin (negative) | vocab (2^31 - 1) | layers (2^31 - 1)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto program = dk::elf::ReadElfFile(absl::GetFlag(FLAGS_in));
  if (!program.ok()) return dk::ExitWithError("make_invalid_elf", program.status());
  const std::string mutation = absl::GetFlag(FLAGS_mutation);
  bool done = false;
  for (dk::elf::BufferObject& bo : *program->mutable_bos()) {
    if (done) break;
    if (mutation == "host_offset" && !bo.host_value().empty()) {
      bo.set_host_offset(-4096);
      done = true;
    } else if (mutation == "row_begin" && !bo.weight_tensor().empty()) {
      bo.set_weight_row_begin(-8);  // with weight_row_end 0 ("all rows")
      done = true;
    }
  }
  if (mutation == "vocab") program->mutable_model()->set_vocab(2147483647), done = true;
  if (mutation == "layers") program->mutable_model()->set_n_layers(2147483647), done = true;
  if (!done) {
    return dk::ExitWithError("make_invalid_elf",
                             absl::InvalidArgumentError("unknown or inapplicable --mutation"));
  }
  auto bytes = dk::elf::WriteElfUnvalidatedForTesting(*program);
  if (!bytes.ok()) return dk::ExitWithError("make_invalid_elf", bytes.status());
  std::ofstream(absl::GetFlag(FLAGS_out), std::ios::binary) << *bytes;
  return dk::kExitOk;
}
