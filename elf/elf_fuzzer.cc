// libFuzzer target: the decode-ELF reader and ValidateProgram (issue 15). Any input
// must give an error or a program, never a crash; a program ReadElf accepts must
// also validate and write back (the readers and the writer agree on what is valid).
//   ./bazelw build --config=fuzz //elf:elf_fuzzer
//   bazel-bin/elf/elf_fuzzer -max_total_time=60 CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "elf/elf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto program = dk::elf::ReadElf(bytes, "fuzz.elf");
  if (!program.ok()) return 0;
  if (!dk::elf::ValidateProgram(*program).ok()) std::abort();  // ReadElf let an invalid one through
  if (!dk::elf::WriteElf(*program).ok()) std::abort();
  return 0;
}
