// elf_opt: runs one optimization pass over a decode ELF (the tool behind the
// rules in //optimizations:defs.bzl).
//   elf_opt --pass=merge_multi_launch --target=cpu --in a.elf --out b.elf
// Exits 1 with a message when the pass changes nothing, unless --allow_noop.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "elf/elf.h"
#include "registry/registry.h"
#include "optimizations/buffer_object_reuse/buffer_object_reuse.h"
#include "optimizations/layout_alignment/layout_alignment.h"
#include "optimizations/merge_multi_launch/merge_multi_launch.h"

ABSL_FLAG(std::string, pass, "", "buffer_object_reuse | merge_multi_launch | layout_alignment");
ABSL_FLAG(std::string, target, "cpu", "target whose constraints the pass respects (cpu, npu2)");
ABSL_FLAG(std::string, in, "", "input decode ELF");
ABSL_FLAG(std::string, out, "", "output decode ELF");
ABSL_FLAG(bool, allow_noop, false, "succeed even if the pass changes nothing");
ABSL_FLAG(std::string, groups, "", "merge_multi_launch: comma-separated merges (default all)");
ABSL_FLAG(int64_t, lm_head_partition_rows, 16384, "layout_alignment: rows per LM-head partition (0: no split)");

namespace {
int Fail(const std::string& message) {
  std::fprintf(stderr, "elf_opt: %s\n", message.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string pass = absl::GetFlag(FLAGS_pass);
  const std::string in = absl::GetFlag(FLAGS_in), out = absl::GetFlag(FLAGS_out);
  if (pass.empty() || in.empty() || out.empty()) {
    return Fail("usage: elf_opt --pass=NAME [--target=cpu] --in IN.elf --out OUT.elf");
  }
  auto program = dk::elf::ReadElfFile(in);
  if (!program.ok()) return Fail(std::string(program.status().message()));
  auto target = dk::registry::FindTarget(absl::GetFlag(FLAGS_target));
  if (!target.ok()) return Fail(std::string(target.status().message()));

  absl::StatusOr<bool> changed;
  if (pass == dk::opt::buffer_object_reuse::kName) {
    changed = dk::opt::buffer_object_reuse::Run(*program, **target);
  } else if (pass == dk::opt::merge_multi_launch::kName) {
    dk::opt::merge_multi_launch::Options options;
    for (auto g : absl::StrSplit(absl::GetFlag(FLAGS_groups), ',', absl::SkipEmpty())) {
      options.groups.insert(std::string(g));
    }
    changed = dk::opt::merge_multi_launch::Run(*program, **target, options);
  } else if (pass == dk::opt::layout_alignment::kName) {
    dk::opt::layout_alignment::Options options;
    options.lm_head_partition_rows = absl::GetFlag(FLAGS_lm_head_partition_rows);
    changed = dk::opt::layout_alignment::Run(*program, **target, options);
  } else {
    return Fail(absl::StrCat("unknown pass '", pass,
                             "' (known: buffer_object_reuse, merge_multi_launch, layout_alignment)"));
  }
  if (!changed.ok()) return Fail(absl::StrCat(pass, " on ", in, ": ", changed.status().message()));
  const auto& record = program->lineage(program->lineage_size() - 1);
  std::fprintf(stderr, "elf_opt: %s [%s] %s: %s\n", pass.c_str(), record.target().c_str(),
               record.applied() ? "applied" : "skipped", record.reason().c_str());
  if (!*changed && !absl::GetFlag(FLAGS_allow_noop)) {
    return Fail(absl::StrCat(pass, " changed nothing in ", in, " (", record.reason(),
                             "). An inert stage must not hide in the chain: remove it from BUILD, "
                             "or set allow_noop = True"));
  }
  if (auto s = dk::elf::WriteElfFile(*program, out); !s.ok()) {
    return Fail(absl::StrCat(pass, " produced an invalid program: ", s.message()));
  }
  return 0;
}
