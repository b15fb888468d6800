// elf_opt: runs one optimization pass of the pass table (optimizations/passes.h)
// over a decode ELF; the tool behind the rules in //rules:defs.bzl.
//   elf_opt --pass=layout_alignment --target=cpu --in a.elf --out b.elf lm_head_partition_rows=128
//   elf_opt --pass=merge_multi_launch --in a.elf --out b.elf groups=rms_gemv_rope,lm_head
//   elf_opt --pass=quantize_weights --weights model.gguf --in a.elf --out b.elf scheme=gguf
// The pass's options are the positional key=value arguments; those not given
// take the table's defaults. The pipeline (ApplyPass) writes the lineage entry;
// a pass that changes nothing fails it (exit 1, with the pass's reason) unless
// --allow_noop.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "optimizations/passes.h"
#include "registry/registry.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "weights/weights.h"

ABSL_FLAG(std::string, pass, "", "the pass to run (one of the table below)");
ABSL_FLAG(std::string, target, "cpu", "target whose constraints the pass respects (cpu, npu2)");
ABSL_FLAG(std::string, in, "", "input decode ELF");
ABSL_FLAG(std::string, out, "", "output decode ELF");
ABSL_FLAG(bool, allow_noop, false, "succeed even if the pass changes nothing");
ABSL_FLAG(std::string, weights, "",
          "a GGUF whose tensor types fill the pass's option 'stored' (quantize_weights scheme=gguf); "
          "only its header is read");

namespace {

std::string Usage() {
  return absl::StrCat(
      "usage: elf_opt --pass=NAME [--target=cpu] [--allow_noop] --in IN.elf --out OUT.elf "
      "[key=value ...]\npasses and their options (key=value):\n",
      dk::opt::DescribePasses());
}

int Fail(const std::string& message, int code = dk::kExitFailure) {
  return dk::ExitWithError("elf_opt", absl::InvalidArgumentError(message), code);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(Usage());
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> options(positional.begin() + 1, positional.end());
  const std::string name = absl::GetFlag(FLAGS_pass);
  const std::string in = absl::GetFlag(FLAGS_in), out = absl::GetFlag(FLAGS_out);
  if (name.empty() && in.empty() && out.empty()) return Fail(Usage(), dk::kExitUsage);
  for (const absl::Status& s : {dk::cli::RequireFlag("pass", name), dk::cli::RequireFlag("in", in),
                                dk::cli::RequireFlag("out", out)}) {
    if (!s.ok()) return Fail(std::string(s.message()), dk::kExitUsage);
  }
  if (auto s = dk::cli::RequireFile("in", in); !s.ok()) return Fail(std::string(s.message()));

  auto pass = dk::opt::FindPass(name);
  if (!pass.ok()) return Fail(std::string(pass.status().message()), dk::kExitUsage);
  if (const std::string weights = absl::GetFlag(FLAGS_weights); !weights.empty()) {
    const bool takes_stored = std::any_of((*pass)->options.begin(), (*pass)->options.end(),
                                          [](const dk::opt::OptionSpec& o) { return o.name == "stored"; });
    if (!takes_stored) return Fail(absl::StrCat("--weights: pass ", name, " reads no weights file"), dk::kExitUsage);
    if (auto s = dk::cli::RequireFile("weights", weights); !s.ok()) return Fail(std::string(s.message()));
    auto types = dk::weights::GgufStoredTypes(weights);
    if (!types.ok()) return Fail(absl::StrCat("--weights ", weights, ": ", types.status().message()));
    std::vector<std::string> entries;
    for (const auto& [tensor, type] : *types) entries.push_back(absl::StrCat(tensor, "=", type));
    options.push_back(absl::StrCat("stored=", absl::StrJoin(entries, ",")));
  }
  auto pass_options = dk::opt::ParseOptions(**pass, options);
  if (!pass_options.ok()) return Fail(std::string(pass_options.status().message()), dk::kExitUsage);
  auto target = dk::registry::FindTarget(absl::GetFlag(FLAGS_target));
  if (!target.ok()) return Fail(std::string(target.status().message()), dk::kExitUsage);
  auto program = dk::elf::ReadElfFile(in);
  if (!program.ok()) return Fail(std::string(program.status().message()));

  const dk::opt::NoopPolicy noop =
      absl::GetFlag(FLAGS_allow_noop) ? dk::opt::NoopPolicy::kAllow : dk::opt::NoopPolicy::kFail;
  const auto entry = dk::opt::ApplyPass(**pass, *program, **target, *pass_options, noop);
  if (!entry.ok()) return Fail(absl::StrCat(name, " on ", in, ": ", entry.status().message()));
  std::fprintf(stderr, "elf_opt: %s [%s] %s: %s\n", name.c_str(), entry->target().c_str(),
               entry->applied() ? "applied" : "skipped", entry->reason().c_str());
  // A pass bug and a failed write are different failures: say which.
  if (auto s = dk::elf::ValidateProgram(*program); !s.ok()) {
    return Fail(absl::StrCat(name, " produced an invalid program: ", s.message()));
  }
  if (auto s = dk::elf::WriteElfFile(*program, out); !s.ok()) return Fail(std::string(s.message()));
  return dk::kExitOk;
}
