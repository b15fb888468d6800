// The verify gate on the CPU backend: runs a decode ELF over golden prompts and
// checks it against HF transformers bf16 goldens (top-5 agreement at the first
// divergence, DESIGN.md s.6); with --parent_elf, also checks that the stage
// generates exactly the tokens its parent stage generates. Exit 0 only if both hold.
//   verify --elf decode_opt.elf --goldens hf_bf16.json --weights model.gguf --prompts 2
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "runtime/cpu/session.h"
#include "tokenizer/tokenizer.h"
#include "verify/gate.h"
#include "verify/goldens.h"
#include "verify/runner.h"

ABSL_FLAG(std::string, elf, "", "decode ELF under test");
ABSL_FLAG(std::string, parent_elf, "", "the parent stage's ELF: tokens must be identical");
ABSL_FLAG(std::string, goldens, "", "HF goldens (tools/hf_reference)");
ABSL_FLAG(std::string, weights, "synthetic", "checkpoint dir, .gguf, or synthetic[:SEED]");
ABSL_FLAG(std::string, tokenizer, "", "optional: decode ids to text in the report");
ABSL_FLAG(int, prompts, 2, "how many golden prompts (the first N)");
ABSL_FLAG(bool, validate, true, "check the BO protocol while running");

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "verify: %s\n", std::string(s.message()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using dk::verify::Sequence;
  const std::string elf = absl::GetFlag(FLAGS_elf);
  auto goldens = dk::verify::LoadGoldens(absl::GetFlag(FLAGS_goldens));
  if (!goldens.ok()) return Fail(goldens.status());
  auto program = dk::elf::ReadElfFile(elf);
  if (!program.ok()) return Fail(program.status());
  auto weights = dk::runtime::LoadWeightsSpec(absl::GetFlag(FLAGS_weights), program->model());
  if (!weights.ok()) return Fail(weights.status());
  const std::string digest = (*weights)->Digest();
  if (digest != goldens->weights_digest) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "the goldens were recorded with weights ", goldens->weights_digest, " but this run uses ",
        (*weights)->source(), " = ", digest,
        "; goldens from other weights are meaningless: regenerate them with tools/hf_reference "
        "or run with the weights they were made from")));
  }
  const int n = absl::GetFlag(FLAGS_prompts);
  if (n <= 0 || n > static_cast<int>(goldens->prompts.size())) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--prompts=", n, " but the goldens have ",
                                                        goldens->prompts.size())));
  }
  const std::vector<dk::verify::GoldenPrompt> prompts(goldens->prompts.begin(),
                                                      goldens->prompts.begin() + n);
  dk::verify::DecodeFn decode = [](const std::vector<uint32_t>& ids) {
    return absl::StrCat("[", absl::StrJoin(ids, " "), "]");
  };
  std::unique_ptr<dk::tokenizer::Tokenizer> tok;
  if (!absl::GetFlag(FLAGS_tokenizer).empty()) {
    auto t = dk::tokenizer::Tokenizer::Load(absl::GetFlag(FLAGS_tokenizer));
    if (!t.ok()) return Fail(t.status());
    tok = *std::move(t);
    decode = [&tok](const std::vector<uint32_t>& ids) {
      std::vector<int32_t> v(ids.begin(), ids.end());
      auto text = tok->Decode(v);
      return text.ok() ? *text : std::string("<undecodable>");
    };
  }
  dk::runtime::SessionOptions options;
  options.validate = absl::GetFlag(FLAGS_validate);
  auto run = [&](const std::string& path) -> absl::StatusOr<std::vector<Sequence>> {
    auto session = dk::runtime::CpuSession::Open(path, *weights, options);
    if (!session.ok()) return session.status();
    return dk::verify::RunGreedy((*session)->decoder(), prompts, goldens->new_tokens);
  };

  std::printf("verify: %s (%s) against %s, %d prompts, weights %s\n", elf.c_str(),
              program->model().name().c_str(), absl::GetFlag(FLAGS_goldens).c_str(), n,
              (*weights)->source().c_str());
  auto candidate = run(elf);
  if (!candidate.ok()) return Fail(candidate.status());
  dk::verify::GateOptions gate_options;
  gate_options.num_tokens = goldens->new_tokens;
  auto report = dk::verify::CheckLogprobsClose(goldens->Sequences(n), *candidate, decode, gate_options);
  if (!report.ok()) return Fail(report.status());
  std::printf("%s\n", dk::verify::FormatGateReport(*report).c_str());
  bool ok = report->passed;

  const std::string parent = absl::GetFlag(FLAGS_parent_elf);
  if (!parent.empty()) {
    auto parent_run = run(parent);
    if (!parent_run.ok()) return Fail(parent_run.status());
    auto exact = dk::verify::CompareExact(*parent_run, *candidate, decode, goldens->new_tokens,
                                          parent, elf);
    if (!exact.ok()) return Fail(exact.status());
    std::printf("%s\n", dk::verify::FormatExactReport(*exact).c_str());
    ok = ok && exact->same;
  }
  return ok ? 0 : 1;
}
