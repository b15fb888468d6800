// Writes verify-gate goldens for the profile tool's tiny test model from the model's
// own baseline decode ELF (C++ runtime, synthetic weights), in the JSON shape of
// tools/hf_reference/make_goldens.py.
//
// Why not HF transformers: the test exercises the profile tool (timing, gating,
// revert reporting, rendering), not the numerics, and must stay hermetic and fast.
// The C++ baseline is independent enough of the optimized stages for that purpose:
// every later stage is produced by passes that rewrite the program, so a pass that
// breaks the numerics still diverges from these goldens. (The real models' goldens
// come from HF; see tools/hf_reference.)
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "elf/elf.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/session.h"
#include "tokenizer/tokenizer.h"
#include "verify/runner.h"
#include "util/exit_codes.h"

ABSL_FLAG(std::string, elf, "", "the baseline decode ELF");
ABSL_FLAG(std::string, weights, "synthetic", "weights spec (synthetic[:SEED], .gguf, dir)");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer for the prompts");
ABSL_FLAG(std::string, prompts_file, "", "prompts, one per line (verify's --prompts is a count)");
ABSL_FLAG(int, new_tokens, 32, "greedy tokens per prompt");
ABSL_FLAG(std::string, out, "", "goldens JSON to write");

namespace {
int Fail(const absl::Status& s) { return dk::ExitWithError("make_goldens", s); }
}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto program = dk::elf::ReadElfFile(absl::GetFlag(FLAGS_elf));
  if (!program.ok()) return Fail(program.status());
  auto weights = dk::runtime::LoadWeightsSpec(absl::GetFlag(FLAGS_weights), program->model());
  if (!weights.ok()) return Fail(weights.status());
  auto tok = dk::tokenizer::Tokenizer::Load(absl::GetFlag(FLAGS_tokenizer));
  if (!tok.ok()) return Fail(tok.status());
  std::ifstream in(absl::GetFlag(FLAGS_prompts_file));
  std::stringstream text;
  text << in.rdbuf();
  std::vector<dk::verify::GoldenPrompt> prompts;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipWhitespace())) {
    dk::verify::GoldenPrompt p;
    p.text = std::string(line);
    auto ids = (*tok)->Encode(line);
    if (!ids.ok()) return Fail(ids.status());
    p.prompt_ids.assign(ids->begin(), ids->end());
    prompts.push_back(std::move(p));
  }
  auto session = dk::runtime::CpuSession::Open(*program, absl::GetFlag(FLAGS_elf), *weights, {});
  if (!session.ok()) return Fail(session.status());
  const int n = absl::GetFlag(FLAGS_new_tokens);
  auto seqs = dk::verify::RunGreedy((*session)->decoder(), prompts, n);
  if (!seqs.ok()) return Fail(seqs.status());
  nlohmann::json j;
  j["model"] = program->model().name();
  j["weights_digest"] = (*weights)->Digest();
  j["transformers_version"] = "none: recorded from the C++ baseline stage";
  j["torch_version"] = "none";
  j["generator"] = "tests/profile/make_goldens.cc";
  j["new_tokens"] = n;
  j["prompts"] = nlohmann::json::array();
  for (size_t i = 0; i < prompts.size(); ++i) {
    nlohmann::json steps = nlohmann::json::array();
    std::vector<int32_t> out_ids;
    for (const auto& s : (*seqs)[i].steps) {
      steps.push_back({{"id", s.id}, {"top5", s.top5}, {"top5_logits", s.top5_logits}});
      out_ids.push_back(static_cast<int32_t>(s.id));
    }
    auto text_out = (*tok)->Decode(out_ids);
    j["prompts"].push_back({{"text", prompts[i].text},
                            {"prompt_ids", prompts[i].prompt_ids},
                            {"text_out", text_out.ok() ? *text_out : ""},
                            {"steps", steps}});
  }
  std::ofstream out(absl::GetFlag(FLAGS_out));
  out << j.dump(1) << "\n";
  return out ? dk::kExitOk : dk::kExitFailure;
}
