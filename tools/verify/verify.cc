// The verify gate on the CPU backend: runs a decode ELF over golden prompts and
// checks it against HF transformers bf16 goldens: the top-5 gate (agreement at the
// first divergence, docs/architecture.md s.6) and the numeric check (teacher-forced logits at
// HF's top-5 ids within a bf16 tolerance, verify/numeric.h); with --parent_elf, also
// checks that the stage generates exactly the tokens its parent stage generates
// (verify/stage_gate.h). All of them must hold.
//   verify --elf decode_opt.elf --goldens hf_bf16.json --weights model.gguf --prompts 2
//   verify --model model.gguf --goldens hf_bf16.json
// With --model (the model file alone), every stage of its standard chain is built
// (chain/model_elf.h) and verified in chain order, each against the goldens and
// against its parent stage's tokens (reported only for a stage that changes numerics,
// quantize_weights'), one "stage NAME: PASS|FAIL" line each; --stage verifies one.
// With --write_tokens, verify only runs --elf's greedy decode over the prompts and
// writes it to a file (verify/greedy_tokens.h; verify_chain's build action per stage);
// --tokens and --parent_tokens read such files in place of running --elf's and
// --parent_elf's greedy decode, after checking that each was made from that ELF's
// bytes, these weights and these prompts.
// The goldens are matched to the file by the weights digest they carry. Without
// --goldens, the reference is the chain's own baseline stage (run first, over two
// built-in prompts), and the report says so: not HF transformers.
// The last lines name each check and its result: "gate: PASS", "numeric: FAIL", ...
// Exit status (util/exit_codes.h): 0 every check holds, 1 a check failed or an input
// is bad, 2 a usage error.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "runtime/cpu/session.h"
#include "tokenizer/model_special_ids.h"
#include "tokenizer/tokenizer.h"
#include "tools/flags/model_flags.h"
#include "tools/flags/runtime_flags.h"
#include "tools/perplexity/run.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/read_file.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "verify/gate.h"
#include "verify/goldens.h"
#include "verify/greedy_tokens.h"
#include "verify/kld_bounds.h"
#include "verify/mutations.h"
#include "verify/numeric.h"
#include "verify/stage_gate.h"

ABSL_FLAG(std::string, elf, "", "decode ELF under test");
ABSL_FLAG(std::string, parent_elf, "", "the parent stage's ELF: tokens must be identical");
ABSL_FLAG(bool, parent_report_only, false,
          "the stage changes numerics (e.g. quantize_weights): the top-5 gate decides; the "
          "numeric check and the agreement with --parent_elf's tokens are reported only");
ABSL_FLAG(bool, numeric_report_only, false,
          "an earlier stage of the chain changed numerics (e.g. quantize_weights): the numeric "
          "check (a bf16-rounding tolerance against the bf16 reference) is reported only; the top-5 "
          "gate and the agreement with --parent_elf's tokens still decide");
ABSL_FLAG(std::string, goldens, "", "HF goldens (tools/hf_reference)");
ABSL_FLAG(std::string, weights, "synthetic", "checkpoint dir, .gguf, or synthetic[:SEED]");
ABSL_FLAG(std::string, tokenizer, "", "optional: decode ids to text in the report");
ABSL_FLAG(int, prompts, 2, "how many golden prompts (the first N)");
ABSL_FLAG(bool, validate, true, "check the BO protocol while running");
ABSL_FLAG(bool, numeric, true, "also run the numeric check (a teacher-forced run)");
ABSL_FLAG(bool, greedy, true,
          "run the greedy decode for the top-5 gate; false: the gate reads the teacher-forced run "
          "(the same verdict, one run instead of two; no --parent_elf)");
ABSL_FLAG(std::string, kld_reference_elf, "",
          "the stage's bf16 ancestor (the last stage of its chain before quantize_weights): the stage's mean KL "
          "divergence from it over --kld_text must stay within verify/kld_bounds.cc's bound for --kld_scheme");
ABSL_FLAG(std::string, kld_text, "", "the KLD gate's text (@english_text//:text.txt)");
ABSL_FLAG(std::string, kld_scheme, "", "the stage's weight scheme (quantize_weights' scheme: q8_0, q4_0, gguf)");
ABSL_FLAG(int, kld_window, 256, "tokens per window of the KLD gate");
ABSL_FLAG(int, kld_windows, 1, "windows of the KLD gate (the first of the text)");
ABSL_FLAG(std::string, write_tokens, "",
          "run --elf's greedy decode over the first --prompts golden prompts, write it to this file "
          "(verify/greedy_tokens.h) and stop: no gate (verify_chain's build action)");
ABSL_FLAG(std::string, tokens, "",
          "--elf's greedy run, read from this file (made by --write_tokens) instead of running it; refused "
          "unless it was made from --elf's bytes, these weights and these prompts");
ABSL_FLAG(std::string, parent_tokens, "",
          "--parent_elf's greedy run, read from this file (made by --write_tokens) instead of running "
          "--parent_elf; refused unless it was made from --parent_elf's bytes, these weights and these prompts");
ABSL_FLAG(std::string, test_mutation, "",
          "TEST ONLY (tests/mutations): break the candidate on purpose after the digest check, "
          "see verify/mutations.h");

namespace {

// What the gate runs on, loaded from the flags.
struct Inputs {
  dk::elf::Program program;
  dk::verify::Goldens goldens;
  std::unique_ptr<dk::tokenizer::Tokenizer> tokenizer;  // null without --tokenizer
  dk::verify::GateSetup setup;
  dk::tools::RuntimeOptions runtime;  // from the runtime flags
};

// Ids as "[1 2 3]", or as text through the tokenizer when there is one.
dk::verify::DecodeFn MakeDecode(const dk::tokenizer::Tokenizer* tok) {
  if (tok == nullptr) {
    return [](const std::vector<uint32_t>& ids) { return absl::StrCat("[", absl::StrJoin(ids, " "), "]"); };
  }
  return [tok](const std::vector<uint32_t>& ids) {
    auto text = tok->Decode(std::vector<int32_t>(ids.begin(), ids.end()));
    return text.ok() ? *text : std::string("<undecodable>");
  };
}

// --elf, --weights and --tokenizer, or what --model chose.
struct Sources {
  std::string elf, weights, tokenizer;
  std::optional<dk::tools::ModelChoice> model;
};

// The prompts of the baseline reference (--model without --goldens).
constexpr const char* kBaselinePrompts[] = {
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
};
constexpr int kBaselineTokens = 16;

// --model without --goldens: the reference is the chain's own baseline stage, run now
// over kBaselinePrompts (its greedy tokens, top-5 and logits as the goldens' steps).
// Not HF: the report says so.
absl::Status BaselineGoldens(const Sources& src, Inputs& in) {
  if (in.tokenizer == nullptr) {
    return absl::InvalidArgumentError("verify --model without --goldens needs a tokenizer (--tokenizer)");
  }
  const dk::chain::BuiltStage& baseline = src.model->elfs.stages[0];
  in.goldens.model = src.model->elfs.shape.name();
  in.goldens.weights_digest = in.setup.weights_digest;
  in.goldens.transformers_version = absl::StrCat("none: decodekit baseline stage ", baseline.name);
  in.goldens.torch_version = "none";
  in.goldens.reference = absl::StrCat("decodekit baseline stage ", baseline.name, " (no --goldens; not HF transformers)");
  in.goldens.new_tokens = kBaselineTokens;
  for (const char* text : kBaselinePrompts) {
    dk::verify::GoldenPrompt prompt;
    prompt.text = text;
    prompt.sequence.prompt = text;
    DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, in.tokenizer->Encode(text));
    prompt.prompt_ids.assign(ids.begin(), ids.end());
    in.goldens.prompts.push_back(std::move(prompt));
  }
  in.setup.goldens = &in.goldens;
  in.setup.prompts = static_cast<int>(in.goldens.prompts.size());
  DK_ASSIGN_OR_RETURN(const dk::elf::Program program, dk::elf::ReadElfFile(baseline.elf_path));
  DK_ASSIGN_OR_RETURN(const std::vector<dk::verify::Sequence> runs,
                      dk::verify::RunGoldenPrompts(in.setup, program, baseline.elf_path));
  for (size_t i = 0; i < runs.size(); ++i) {
    in.goldens.prompts[i].sequence = runs[i];
    in.goldens.prompts[i].sequence.prompt = in.goldens.prompts[i].text;
  }
  in.setup.goldens_name = absl::StrCat("the baseline stage ", baseline.name, " (no --goldens: not HF transformers)");
  return absl::OkStatus();
}

absl::Status Load(const Sources& src, Inputs& in) {
  const bool baseline_reference = src.model && absl::GetFlag(FLAGS_goldens).empty();
  if (!baseline_reference) {
    DK_ASSIGN_OR_RETURN(in.goldens, dk::verify::LoadGoldens(absl::GetFlag(FLAGS_goldens)));
  }
  DK_ASSIGN_OR_RETURN(in.program, dk::elf::ReadElfFile(src.elf));
  DK_ASSIGN_OR_RETURN(in.setup.weights, dk::runtime::LoadWeightsSpec(src.weights, in.program.model(), &dk::SharedThreadPool()));
  if (!src.tokenizer.empty()) {
    DK_ASSIGN_OR_RETURN(in.tokenizer, dk::tokenizer::Tokenizer::Load(src.tokenizer));
    DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerFitsModel(*in.tokenizer, in.program.model().vocab(),
                                                              src.tokenizer, absl::StrCat("ELF ", src.elf)));
    DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerMatchesWeights(*in.tokenizer, src.tokenizer, src.weights));
  }
  in.setup.weights_digest = in.setup.weights->Digest();
  in.setup.goldens = &in.goldens;
  in.setup.goldens_name = absl::GetFlag(FLAGS_goldens);
  in.setup.prompts = absl::GetFlag(FLAGS_prompts);
  in.setup.validate = absl::GetFlag(FLAGS_validate);
  in.setup.decode = MakeDecode(in.tokenizer.get());
  in.setup.numeric = absl::GetFlag(FLAGS_numeric);
  in.setup.greedy = absl::GetFlag(FLAGS_greedy);
  if (baseline_reference) DK_RETURN_IF_ERROR(BaselineGoldens(src, in));
  DK_RETURN_IF_ERROR(dk::verify::CheckGoldens(in.setup));
  if (const std::string m = absl::GetFlag(FLAGS_test_mutation); !m.empty()) {
    // After the digest check: the goldens stay HF's, the candidate is broken.
    std::printf("verify: TEST MUTATION %s applied to the candidate\n", m.c_str());
    DK_RETURN_IF_ERROR(dk::verify::ApplyMutation(
        m, &in.program, const_cast<dk::weights::Weights*>(in.setup.weights.get()),
        &in.setup.wrap_host));
  }
  return absl::OkStatus();
}

// Prints one stage's reports and its one line per check, by name ("gate: PASS",
// "numeric: ...", "same tokens as PARENT: ..."; tests/mutations reads them); returns
// whether the stage holds. `report_only`: the stage changes numerics (quantize_weights),
// its top-5 gate decides; `numeric_report_only`: an earlier stage did, its numeric check
// is reported, its gate and its parent's tokens decide.
bool ReportStage(const dk::verify::StageGate& stage, bool report_only, bool numeric_report_only,
                 const std::string& parent_label) {
  numeric_report_only = numeric_report_only || report_only;
  std::printf("%s\n", dk::verify::FormatGateReport(stage.gate).c_str());
  if (stage.numeric) std::printf("%s\n", dk::verify::FormatNumericReport(*stage.numeric).c_str());
  if (stage.exact) std::printf("%s\n", dk::verify::FormatExactReport(*stage.exact).c_str());
  const char* reported = report_only ? " (reported, not gated: this stage changes numerics)" : "";
  const char* numeric_reported =
      report_only ? reported
                  : numeric_report_only ? " (reported, not gated: an earlier stage of the chain changes numerics)" : "";
  std::printf("gate: %s\n", stage.gate_passed() ? "PASS" : "FAIL");
  std::printf("numeric: %s%s\n", !stage.numeric ? "SKIPPED" : dk::verify::NumericSummary(*stage.numeric).c_str(),
              stage.numeric ? numeric_reported : "");
  if (stage.exact) {
    std::printf("same tokens as %s: %s%s\n", parent_label.c_str(), stage.exact->same ? "PASS" : "FAIL", reported);
  }
  return report_only ? stage.gate_passed()
                     : stage.gate_passed() && (numeric_report_only || stage.numeric_passed()) && stage.same_as_parent();
}

// --model: every stage of the chain (or --stage's), each against the goldens and its
// parent's tokens; *passed says whether every stage holds.
absl::Status VerifyChain(const Sources& src, const Inputs& in, bool* passed) {
  const dk::tools::ModelChoice& m = *src.model;
  const std::vector<dk::chain::Stage> chain = dk::chain::StandardChain(m.elfs.gguf);
  const bool one = !absl::GetFlag(FLAGS_stage).empty();
  std::printf("verify: %s (%s) against %s, %d prompts, weights %s\nverify: runtime %s\n", src.model->model.c_str(),
              in.program.model().name().c_str(), in.setup.goldens_name.c_str(), in.setup.prompts,
              in.setup.weights->source().c_str(), in.runtime.Describe().c_str());
  if (absl::GetFlag(FLAGS_goldens).empty()) {
    std::printf("verify: reference: this chain's own baseline stage (no --goldens), not HF transformers: each "
                "stage is checked against the baseline's tokens, top-5 and logits\n");
  } else {
    // Which reference the goldens came from (HF transformers, or the reference decoder).
    std::printf("verify: reference %s\n", in.goldens.Reference().c_str());
  }
  *passed = true;
  bool after_numerics_change = false;  // an earlier stage of the chain changed numerics
  std::optional<dk::verify::StageGate> parent;
  std::vector<std::string> summary;
  for (size_t i = 0; i < m.elfs.stages.size(); ++i) {
    const dk::chain::BuiltStage& built = m.elfs.stages[i];
    if (one && static_cast<int>(i) != m.stage && static_cast<int>(i) + 1 != m.stage) continue;
    DK_ASSIGN_OR_RETURN(const dk::elf::Program program, dk::elf::ReadElfFile(built.elf_path));
    DK_ASSIGN_OR_RETURN(dk::verify::StageGate stage,
                        dk::verify::RunStageGate(in.setup, program, built.elf_path, built.name,
                                                 parent ? &*parent : nullptr));
    // quantize_weights changes numerics: its top-5 gate decides (as verify_chain does).
    const bool report_only = chain[i].pass == "quantize_weights";
    // After it, a stage's logits are that stage's: its numeric check is reported, the
    // gate and its parent's tokens decide (verify_chain's --numeric_report_only).
    const bool numeric_report_only = after_numerics_change;
    after_numerics_change = after_numerics_change || report_only;
    if (!one || static_cast<int>(i) == m.stage) {
      std::printf("\n== stage %s (%s)\n", built.name.c_str(), built.elf_path.c_str());
      const bool ok = ReportStage(stage, report_only, numeric_report_only, parent ? parent->name : "");
      summary.push_back(absl::StrCat("stage ", built.name, ": ", ok ? "PASS" : "FAIL"));
      *passed = *passed && ok;
    }
    parent = std::move(stage);
  }
  std::printf("\n");
  for (const std::string& line : summary) std::printf("%s\n", line.c_str());
  std::printf("verify: %s\n", *passed ? "PASS" : "FAIL");
  return absl::OkStatus();
}

// The gate, and with --parent_elf the parent's tokens; *passed says whether both hold.
absl::StatusOr<bool> KldGate(const Sources& src, const Inputs& in);

// A tokens file refused: say how to decode instead (a verify test run with other
// --weights or --goldens after `--` no longer matches the build's file).
absl::StatusOr<std::vector<dk::verify::Sequence>> WithDecodeHint(
    absl::StatusOr<std::vector<dk::verify::Sequence>> read, const char* flag) {
  if (read.ok()) return read;
  return absl::Status(read.status().code(),
                      absl::StrCat(read.status().message(), " (--", flag, "= decodes instead of reading a file)"));
}

absl::Status Verify(const Inputs& in, bool* passed, const Sources* kld) {
  const std::string elf = absl::GetFlag(FLAGS_elf);
  const std::string parent_elf = absl::GetFlag(FLAGS_parent_elf);
  std::printf("verify: %s (%s) against %s, %d prompts, weights %s\nverify: runtime %s\n", elf.c_str(),
              in.program.model().name().c_str(), in.setup.goldens_name.c_str(), in.setup.prompts,
              in.setup.weights->source().c_str(), in.runtime.Describe().c_str());
  // Which reference the goldens came from (HF transformers, or the reference decoder).
  std::printf("verify: reference %s\n", in.goldens.Reference().c_str());
  // Greedy runs the build already made (verify_chain's <suite>_tokens_<stage>): read,
  // after checking that they are these ELFs' over these weights and prompts.
  const std::string tokens = absl::GetFlag(FLAGS_tokens);
  const std::string parent_tokens = absl::GetFlag(FLAGS_parent_tokens);
  std::optional<std::vector<dk::verify::Sequence>> recorded;
  if (!tokens.empty()) {
    DK_ASSIGN_OR_RETURN(recorded, WithDecodeHint(dk::verify::ReadGreedyTokens(tokens, elf, in.setup), "tokens"));
    std::printf("verify: the greedy tokens of %s were read from %s (made by the build: verify --write_tokens)\n",
                elf.c_str(), tokens.c_str());
  }
  std::optional<dk::verify::StageGate> parent;
  if (!parent_elf.empty()) {
    if (!in.setup.greedy) return absl::InvalidArgumentError("--parent_elf needs the greedy run (--greedy)");
    parent.emplace();
    parent->name = parent_elf;
    if (!parent_tokens.empty()) {
      DK_ASSIGN_OR_RETURN(parent->sequences, WithDecodeHint(dk::verify::ReadGreedyTokens(parent_tokens, parent_elf,
                                                                                         in.setup),
                                                            "parent_tokens"));
      std::printf("verify: the greedy tokens of %s were read from %s (made by the build: verify --write_tokens)\n",
                  parent_elf.c_str(), parent_tokens.c_str());
    } else {
      DK_ASSIGN_OR_RETURN(const dk::elf::Program parent_program, dk::elf::ReadElfFile(parent_elf));
      DK_ASSIGN_OR_RETURN(parent->sequences, dk::verify::RunGoldenPrompts(in.setup, parent_program, parent_elf));
    }
  }
  DK_ASSIGN_OR_RETURN(const dk::verify::StageGate stage,
                      dk::verify::RunStageGate(in.setup, in.program, elf, elf, parent ? &*parent : nullptr,
                                               recorded ? &*recorded : nullptr));
  // A stage that changes numerics (--parent_report_only, e.g. quantize_weights): the
  // top-5 gate decides; the numeric check (a bf16-rounding tolerance) and the parent's
  // tokens are reported, not gated. A stage after one that changes numerics
  // (--numeric_report_only): its logits are its quantized ancestor's, which the bf16
  // tolerance does not describe (that ancestor's own test reports the same figure, not
  // gated); its tokens must still be its parent's.
  *passed = ReportStage(stage, absl::GetFlag(FLAGS_parent_report_only), absl::GetFlag(FLAGS_numeric_report_only),
                        "parent");
  if (kld) {
    DK_ASSIGN_OR_RETURN(const bool kld_ok, KldGate(*kld, in));
    *passed = *passed && kld_ok;
  }
  std::printf("verify: %s\n", *passed ? "PASS" : "FAIL");
  return absl::OkStatus();
}

// The KLD gate (--kld_reference_elf): the candidate (as run above, a test mutation
// included) against its bf16 ancestor on weights loaded afresh, over the first
// --kld_windows windows of --kld_text; prints "kld: PASS|FAIL (...)" and returns whether
// the mean KL divergence is within the scheme's bound.
absl::StatusOr<bool> KldGate(const Sources& src, const Inputs& in) {
  const std::string ref_elf = absl::GetFlag(FLAGS_kld_reference_elf);
  DK_ASSIGN_OR_RETURN(const dk::verify::KldBound bound, dk::verify::KldBoundFor(absl::GetFlag(FLAGS_kld_scheme)));
  if (in.tokenizer == nullptr) return absl::InvalidArgumentError("the KLD gate needs --tokenizer (it encodes --kld_text)");
  DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(absl::GetFlag(FLAGS_kld_text), "--kld_text"));
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, in.tokenizer->Encode(text));
  dk::perplexity::WindowOptions wo;
  wo.window = std::min<int>(absl::GetFlag(FLAGS_kld_window), in.program.model().max_context());
  wo.max_windows = absl::GetFlag(FLAGS_kld_windows);
  if (!ids.empty() && in.tokenizer->bos_id() && ids[0] == *in.tokenizer->bos_id()) wo.bos = in.tokenizer->bos_id();
  DK_ASSIGN_OR_RETURN(const auto windows, dk::perplexity::MakeWindows(ids, wo));
  DK_ASSIGN_OR_RETURN(const dk::elf::Program ref_program, dk::elf::ReadElfFile(ref_elf));
  dk::runtime::SessionOptions options;
  options.pool = in.setup.pool;
  options.cpu = in.setup.cpu;
  options.prefill_rows = in.setup.prefill_rows;
  options.max_context = wo.window;
  options.score_rows = static_cast<int>(std::min<int64_t>(
      wo.window - 1, std::max<int64_t>(1, (int64_t{256} << 20) / (in.program.model().vocab() * 8))));
  // The reference's own weights, never the (possibly mutated) candidate's.
  DK_ASSIGN_OR_RETURN(dk::weights::Weights ref_weights, dk::runtime::ReadWeightsSpec(src.weights, ref_program, wo.window, &dk::SharedThreadPool()));
  DK_ASSIGN_OR_RETURN(auto ref, dk::runtime::CpuSession::OpenOwning(ref_program, ref_elf, std::move(ref_weights), options));
  options.wrap_host = in.setup.wrap_host;
  DK_ASSIGN_OR_RETURN(auto stage, dk::runtime::CpuSession::Open(in.program, src.elf, in.setup.weights, options));
  DK_ASSIGN_OR_RETURN(const dk::perplexity::Summary s,
                      dk::perplexity::CompareStages(stage->decoder(), ref->decoder(), windows,
                                                    dk::perplexity::ScoreFrom(wo)));
  const bool ok = s.mean_kld <= bound.max_mean_kld;
  std::printf("kld: %s (mean KLD %.6f, bound %.3g for weight scheme %s; p99 %.4f, top-1 %.2f%%, PPL ratio %.4f; "
              "%lld positions of %s against %s)\n",
              ok ? "PASS" : "FAIL", s.mean_kld, bound.max_mean_kld, bound.scheme, s.p99_kld, 100 * s.top1,
              s.ppl_ratio, static_cast<long long>(s.positions), absl::GetFlag(FLAGS_kld_text).c_str(), ref_elf.c_str());
  return ok;
}

// --write_tokens: --elf's greedy run over the prompts, to the file; no gate.
absl::Status WriteTokens(const Inputs& in) {
  const std::string elf = absl::GetFlag(FLAGS_elf);
  const std::string out = absl::GetFlag(FLAGS_write_tokens);
  DK_ASSIGN_OR_RETURN(const std::vector<dk::verify::Sequence> run,
                      dk::verify::RunGoldenPrompts(in.setup, in.program, elf));
  DK_RETURN_IF_ERROR(dk::verify::WriteGreedyTokens(out, elf, in.setup, run));
  std::printf("verify: wrote the greedy tokens of %s over %d prompts of %s (weights %s) to %s\n", elf.c_str(),
              in.setup.prompts, in.setup.goldens_name.c_str(), in.setup.weights->source().c_str(), out.c_str());
  return absl::OkStatus();
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("verify", s, code); }

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "verify (--model FILE.gguf|CHECKPOINT_DIR|config.json [--stage S] | --elf DECODE.elf) --goldens GOLDENS.json "
      "[--weights DIR|FILE.gguf|synthetic] "
      "[--parent_elf PARENT.elf [--parent_report_only]] [--tokenizer FILE] [--prompts N]");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  const bool model = !absl::GetFlag(FLAGS_model).empty();
  if (model && !absl::GetFlag(FLAGS_parent_elf).empty()) {
    return Fail(absl::InvalidArgumentError("--parent_elf goes with --elf (--model checks each stage against its parent)"),
                dk::kExitUsage);
  }
  // What a recorded greedy run cannot stand for: a mutated candidate (the file holds the
  // unbroken ELF's run), a gate without the greedy run, --model's chain.
  const bool write = !absl::GetFlag(FLAGS_write_tokens).empty();
  const bool read = !absl::GetFlag(FLAGS_tokens).empty() || !absl::GetFlag(FLAGS_parent_tokens).empty();
  if (write || read) {
    const char* flag = write ? "--write_tokens" : "--tokens / --parent_tokens";
    const char* clash = model                                                 ? "--model"
                        : !absl::GetFlag(FLAGS_test_mutation).empty()         ? "--test_mutation"
                        : !absl::GetFlag(FLAGS_greedy)                        ? "--nogreedy"
                        : write && read                                       ? "--tokens / --parent_tokens"
                        : write && !absl::GetFlag(FLAGS_parent_elf).empty()   ? "--parent_elf"
                        : write && !absl::GetFlag(FLAGS_kld_reference_elf).empty() ? "--kld_reference_elf"
                                                                              : nullptr;
    if (clash != nullptr) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(flag, " does not go with ", clash)), dk::kExitUsage);
    }
    if (!absl::GetFlag(FLAGS_parent_tokens).empty() && absl::GetFlag(FLAGS_parent_elf).empty()) {
      return Fail(absl::InvalidArgumentError("--parent_tokens needs --parent_elf (the ELF they must come from)"),
                  dk::kExitUsage);
    }
  }
  for (const absl::Status& s : {model ? absl::OkStatus() : dk::cli::RequireFlag("elf", absl::GetFlag(FLAGS_elf)),
                                model ? absl::OkStatus() : dk::cli::RequireFlag("goldens", absl::GetFlag(FLAGS_goldens)),
                                dk::cli::RequireRange("prompts", absl::GetFlag(FLAGS_prompts), 1, 1 << 20)}) {
    if (!s.ok()) return Fail(s, dk::kExitUsage);
  }
  for (const absl::Status& s : {model ? absl::OkStatus() : dk::cli::RequireFile("elf", absl::GetFlag(FLAGS_elf)),
                                model && absl::GetFlag(FLAGS_goldens).empty()
                                    ? absl::OkStatus()
                                    : dk::cli::RequireFile("goldens", absl::GetFlag(FLAGS_goldens))}) {
    if (!s.ok()) return Fail(s);
  }
  Sources src{absl::GetFlag(FLAGS_elf), absl::GetFlag(FLAGS_weights), absl::GetFlag(FLAGS_tokenizer), std::nullopt};
  absl::StatusOr<std::optional<dk::tools::ModelChoice>> chosen = dk::tools::ModelFromFlags(
      "verify", absl::GetFlag(FLAGS_elf), absl::GetFlag(FLAGS_weights), absl::GetFlag(FLAGS_tokenizer));
  if (!chosen.ok()) {
    return Fail(chosen.status(), absl::IsInvalidArgument(chosen.status()) ? dk::kExitUsage : dk::kExitFailure);
  }
  if (*chosen) {
    src.model = **chosen;
    src.elf = src.model->elf;
    src.weights = src.model->weights;
    src.tokenizer = src.model->tokenizer;
  }
  Inputs in;
  absl::StatusOr<dk::tools::RuntimeOptions> runtime = dk::tools::ApplyRuntimeFlags();
  if (!runtime.ok()) return Fail(runtime.status(), dk::kExitUsage);
  in.runtime = *runtime;
  in.setup.cpu = runtime->cpu;
  in.setup.pool = &dk::SharedThreadPool();  // the pool --threads set up
  in.setup.prefill_rows = runtime->prefill_rows;
  if (absl::Status s = Load(src, in); !s.ok()) return Fail(s);
  if (write) {
    absl::Status s = WriteTokens(in);
    return s.ok() ? dk::kExitOk : Fail(s);
  }
  bool passed = false;
  if (absl::Status s = src.model ? VerifyChain(src, in, &passed)
                                         : Verify(in, &passed, absl::GetFlag(FLAGS_kld_reference_elf).empty() ? nullptr : &src); !s.ok()) return Fail(s);
  return passed ? dk::kExitOk : dk::kExitFailure;
}
