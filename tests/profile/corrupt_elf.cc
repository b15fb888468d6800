// Test only: writes a copy of a decode ELF that must fail the verify gate, so the
// profile test can check that such a stage is reported as reverted. The first two
// LM-head partitions read each other's rows of the embedding (a wrong weight
// binding): every logit of the first two vocab blocks moves by one block, so the
// greedy choice lands far outside the reference's top-5.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "util/exit_codes.h"

ABSL_FLAG(std::string, in, "", "decode ELF");
ABSL_FLAG(std::string, out, "", "corrupted decode ELF");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto program = dk::elf::ReadElfFile(absl::GetFlag(FLAGS_in));
  if (!program.ok()) {
    std::fprintf(stderr, "corrupt_elf: %s\n", std::string(program.status().message()).c_str());
    return dk::kExitFailure;
  }
  dk::elf::BufferObject* part[2] = {nullptr, nullptr};
  for (auto& bo : *program->mutable_bos()) {
    if (bo.name() == "lm_head.w.part0") part[0] = &bo;
    if (bo.name() == "lm_head.w.part1") part[1] = &bo;
  }
  if (!part[0] || !part[1] || part[0]->size_bytes() != part[1]->size_bytes()) {
    std::fprintf(stderr, "corrupt_elf: needs two equal LM-head partitions (lm_head.w.part0/1); "
                         "put it after layout_alignment\n");
    return dk::kExitFailure;
  }
  const int64_t b0 = part[0]->weight_row_begin(), e0 = part[0]->weight_row_end();
  part[0]->set_weight_row_begin(part[1]->weight_row_begin());
  part[0]->set_weight_row_end(part[1]->weight_row_end());
  part[1]->set_weight_row_begin(b0);
  part[1]->set_weight_row_end(e0);
  auto* entry = program->add_lineage();
  entry->set_pass("corrupt_lm_head");
  entry->set_target("cpu");
  entry->set_applied(true);
  entry->set_reason("test only: LM-head partitions 0 and 1 read each other's rows (must fail the gate)");
  if (auto s = dk::elf::WriteElfFile(*program, absl::GetFlag(FLAGS_out)); !s.ok()) {
    std::fprintf(stderr, "corrupt_elf: %s\n", std::string(s.message()).c_str());
    return dk::kExitFailure;
  }
  return dk::kExitOk;
}
