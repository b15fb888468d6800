// The phase-5 profile of a decode chain (docs/architecture.md s.7), run by
//   ./bazelw run //models/llama32_1b:profile [-- --new_tokens 32 --json]
// For every stage, on the same prompt and the same weights (loaded once): ms/token
// over steady-state decode tokens, the per-step split, runs and BO bytes per token,
// the ratio to the memory-bandwidth floor; then the verify gate (verify/stage_gate.h,
// validation on). A stage that fails the gate is reported as reverted with the BUILD
// edit that removes it. Writes <package>/docs/development_progress/phase5_decode.{md,html,svg,png}
// into the source tree (BUILD_WORKSPACE_DIRECTORY, which bazel run sets) or --out_dir.
// The BUILD target passes the chain's --manifest, --weights, --tokenizer and --goldens
// before the user's flags; a flag given again overrides (the last one counts).
//
// Exit status (util/exit_codes.h): 0 every stage passed and the final stage is
// strictly faster than the baseline; 3 a stage was reverted; 4 the final stage is not
// faster; 1 an error; 2 a usage error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "kernels/bandwidth/bandwidth.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tokenizer/model_special_ids.h"
#include "tokenizer/tokenizer.h"
#include "tools/profile/io.h"
#include "tools/profile/prefill.h"
#include "tools/profile/record.h"
#include "tools/profile/render.h"
#include "tools/flags/model_flags.h"
#include "tools/flags/runtime_flags.h"
#include "tools/perplexity/run.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/read_file.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "util/user_path.h"
#include "verify/gate.h"
#include "verify/goldens.h"
#include "verify/stage_gate.h"

ABSL_FLAG(std::string, manifest, "", "the chain (written by the decode_profile rule)");
ABSL_FLAG(std::string, prompt, "What is the capital of France?", "the canonical prompt");
ABSL_FLAG(int, new_tokens, 32, "measured decode tokens per stage (after the warm-up)");
ABSL_FLAG(int, warmup, 4, "decode tokens run before measuring");
ABSL_FLAG(int, rounds, 4,
          "split each stage's measured tokens into this many rounds, interleaved across the stages "
          "(every stage, then every stage again; each round reopens the stage and runs the prompt and "
          "the warm-up first), so a swing of the host's bandwidth reaches every stage alike; 1: each "
          "stage in one go. At most --new_tokens rounds are run");
ABSL_FLAG(int, gate_prompts, 2, "verify-gate prompts per stage (the goldens' first N); 0: no gate");
ABSL_FLAG(std::string, goldens, "", "the goldens of the verify gate (the BUILD target passes its own)");
ABSL_FLAG(std::string, weights, "synthetic",
          "checkpoint dir, .gguf, or synthetic[:SEED] (the BUILD target passes its own)");
ABSL_FLAG(std::string, tokenizer, "",
          "a .gguf, tokenizer.json or checkpoint dir (the BUILD target passes its own)");
ABSL_FLAG(std::string, out_dir, "",
          "where to write phase5_decode.{md,html,svg,png} (default: <workspace>/<package>/docs/"
          "development_progress, from BUILD_WORKSPACE_DIRECTORY)");
ABSL_FLAG(std::string, build_file, "",
          "the chain's BUILD file, for exact revert edits (default: <workspace>/<package>/BUILD)");
ABSL_FLAG(bool, json, false, "print the record as JSON on stdout (the table goes to stderr)");
ABSL_FLAG(std::string, json_out, "", "also write the record as JSON to this file");
ABSL_FLAG(int, bandwidth_mib, 1024, "buffer of the read-bandwidth measurement, MiB");
ABSL_FLAG(std::vector<std::string>, context, {},
          "also time the final stage at these contexts, e.g. 128,512,2048 (the KV cache is "
          "filled by real decode steps up to each one)");
ABSL_FLAG(int, context_tokens, 16, "tokens measured per --context point");
ABSL_FLAG(std::vector<std::string>, prefill_prompts, std::vector<std::string>({"128", "512", "2048"}),
          "the phase-4 record: time every stage's prompt processing at these prompt lengths (those past "
          "the model's context are left out); empty: no phase-4 record");
ABSL_FLAG(int, prefill_reps, 2, "timed prompts per stage and length (after one untimed)");
ABSL_FLAG(bool, png, true,
          "also write the report's three charts as phase5_decode.svg and, drawn from it by librsvg's "
          "rsvg-convert, phase5_decode.png (the PNG skipped, with a note, when rsvg-convert is not "
          "installed)");

ABSL_FLAG(std::string, kld_text, "",
          "a UTF-8 text: every stage's KL divergence, top-1 agreement and perplexity against the baseline "
          "over it (tools/perplexity; the rule passes @english_text//:text.txt); \"\": none");
ABSL_FLAG(int, kld_window, 512, "tokens per window of the KLD run (llama-perplexity's -c), at most the context");
ABSL_FLAG(int, kld_max_windows, 0, "windows of the KLD run (0: the whole text)");

namespace {

using Clock = std::chrono::steady_clock;
namespace profile = dk::profile;
using dk::ShownPath;
using dk::UserPath;  // paths the user types are relative to where `bazel run` was called

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Where the chain, the weights and the tokenizer come from: the rule's manifest and
// flags, or --model's choice (main fills it).
struct Sources {
  std::optional<dk::tools::ModelChoice> model;
  std::string weights;    // a weights spec, as --weights
  std::string tokenizer;  // as --tokenizer
};
Sources g_src;

// Everything one profile run holds, filled step by step.
struct Profile {
  profile::ProfileRecord record;
  dk::tools::RuntimeOptions runtime;  // from the runtime flags
  std::vector<std::string> elfs;  // per stage, as the manifest names them
  std::vector<dk::elf::Program> programs;
  std::shared_ptr<const dk::weights::Weights> weights;
  dk::verify::Goldens goldens;
  dk::verify::GateSetup gate;  // record.gate_prompts == 0: no gate
  std::unique_ptr<dk::tokenizer::Tokenizer> tokenizer;
  std::vector<uint32_t> prompt;
  std::vector<int> contexts;  // --context, sorted
  profile::PrefillRecord prefill;  // sizes empty: no phase-4 record
  dk::kernels::BandwidthOptions bandwidth;
  profile::Progress progress;
  const dk::elf::ModelShape& model() const { return programs[0].model(); }
};

// The flags that need no input file to be checked.
absl::Status CheckFlags(Profile& p) {
  const bool model = !absl::GetFlag(FLAGS_model).empty();
  if (model && !absl::GetFlag(FLAGS_manifest).empty()) {
    return absl::InvalidArgumentError("--model builds the chain: give --model or --manifest, not both");
  }
  if (!model) {
    DK_RETURN_IF_ERROR(dk::cli::RequireFlag("manifest", absl::GetFlag(FLAGS_manifest)));
    DK_RETURN_IF_ERROR(dk::cli::RequireFlag("tokenizer", absl::GetFlag(FLAGS_tokenizer)));
  }
  if (absl::GetFlag(FLAGS_gate_prompts) > 0 && absl::GetFlag(FLAGS_goldens).empty()) {
    if (!model) return absl::InvalidArgumentError("--goldens is required unless --gate_prompts=0");
    // A model file nobody recorded goldens for: the stages are timed, not gated.
    std::fprintf(stderr, "[profile] no --goldens: the stages are timed without the verify gate\n");
    absl::SetFlag(&FLAGS_gate_prompts, 0);
  }
  if (absl::GetFlag(FLAGS_new_tokens) < 1 || absl::GetFlag(FLAGS_warmup) < 0) {
    return absl::InvalidArgumentError("--new_tokens must be >= 1 and --warmup >= 0");
  }
  if (absl::GetFlag(FLAGS_rounds) < 1) {
    return absl::InvalidArgumentError("--rounds must be >= 1");
  }
  if (!model && absl::GetFlag(FLAGS_out_dir).empty() && std::getenv("BUILD_WORKSPACE_DIRECTORY") == nullptr) {
    return absl::FailedPreconditionError("BUILD_WORKSPACE_DIRECTORY is not set (not under bazel run): pass --out_dir");
  }
  for (const std::string& c : absl::GetFlag(FLAGS_context)) {
    int v = 0;
    if (!absl::SimpleAtoi(c, &v) || v <= 0) return absl::InvalidArgumentError(absl::StrCat("--context ", c, " is not a positive number"));
    p.contexts.push_back(v);
  }
  std::sort(p.contexts.begin(), p.contexts.end());
  for (const std::string& c : absl::GetFlag(FLAGS_prefill_prompts)) {
    int v = 0;
    if (!absl::SimpleAtoi(c, &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--prefill_prompts ", c, " is not a positive number"));
    }
    p.prefill.sizes.push_back(v);
  }
  std::sort(p.prefill.sizes.begin(), p.prefill.sizes.end());
  p.prefill.reps = absl::GetFlag(FLAGS_prefill_reps);
  if (p.prefill.reps < 1) return absl::InvalidArgumentError("--prefill_reps must be >= 1");
  if (!p.contexts.empty() && absl::GetFlag(FLAGS_context_tokens) < 1) {
    return absl::InvalidArgumentError("--context_tokens must be >= 1");
  }
  return absl::OkStatus();
}

absl::Status ReadStages(Profile& p, const nlohmann::json& manifest);

// --model's chain: every stage built (or cached) for the file.
absl::Status LoadModelChain(Profile& p) {
  const dk::tools::ModelChoice& m = *g_src.model;
  profile::ProfileRecord& record = p.record;
  record.model = m.elfs.shape.name();
  record.profile_label = absl::StrCat("//tools/profile -- --model ", absl::GetFlag(FLAGS_model));
  const std::vector<dk::chain::Stage> chain = dk::chain::StandardChain(m.elfs.gguf);
  std::vector<std::string> lineage;
  for (size_t i = 0; i < m.elfs.stages.size(); ++i) {
    profile::StageRecord s;
    s.name = m.elfs.stages[i].name;
    s.label = s.name;
    s.kind = chain[i].pass.empty() ? "decode_elf" : chain[i].pass;
    s.src = chain[i].src.empty() ? "" : ":" + chain[i].src;
    lineage.push_back(chain[i].pass.empty() ? "baseline" : chain[i].pass);
    s.lineage = lineage;
    s.changes_numerics = chain[i].pass == "quantize_weights";
    p.elfs.push_back(m.elfs.stages[i].elf_path);
    record.stages.push_back(std::move(s));
  }
  return absl::OkStatus();
}

// The manifest's stages and their ELFs.
absl::Status LoadChain(Profile& p) {
  if (g_src.model) {
    DK_RETURN_IF_ERROR(LoadModelChain(p));
    return ReadStages(p, nlohmann::json());
  }
  DK_ASSIGN_OR_RETURN(const std::string manifest_text, profile::ReadFile(absl::GetFlag(FLAGS_manifest)));
  nlohmann::json manifest = nlohmann::json::parse(manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.contains("stages") || manifest["stages"].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_manifest), ": not a profile manifest"));
  }
  profile::ProfileRecord& record = p.record;
  record.model = manifest.value("model", "");
  record.package = manifest.value("package", "");
  record.profile_label = manifest.value("label", "");
  for (const auto& st : manifest["stages"]) {
    profile::StageRecord s;
    s.name = st.value("name", "");
    s.label = st.value("label", "");
    s.kind = st.value("kind", "");
    s.src = st.value("src", "");
    s.lineage = st.value("lineage", std::vector<std::string>{});
    s.changes_numerics = st.value("changes_numerics", false);
    p.elfs.push_back(st.value("elf", ""));
    record.stages.push_back(std::move(s));
  }
  return ReadStages(p, manifest);
}

// Each stage's program (its last lineage entry into the record), and the plans.
absl::Status ReadStages(Profile& p, const nlohmann::json& manifest) {
  profile::ProfileRecord& record = p.record;
  for (size_t i = 0; i < p.elfs.size(); ++i) {
    DK_ASSIGN_OR_RETURN(dk::elf::Program program, dk::elf::ReadElfFile(p.elfs[i]));
    if (program.lineage_size() > 0) {
      const auto& last = program.lineage(program.lineage_size() - 1);
      record.stages[i].pass = last.pass();
      record.stages[i].target = last.target();
      record.stages[i].pass_applied = last.applied();
      record.stages[i].pass_reason = last.reason();
    }
    p.programs.push_back(std::move(program));
  }
  if (record.model.empty()) record.model = p.model().name();
  if (manifest.is_object() && manifest.contains("plans")) {
    for (const auto& pl : manifest["plans"]) {
      profile::PlanRecord plan;
      plan.name = pl.value("name", "");
      plan.label = pl.value("label", "");
      DK_ASSIGN_OR_RETURN(const dk::elf::Program program, dk::elf::ReadElfFile(pl.value("elf", "")));
      plan.runs = dk::elf::RunsPerLayer(program);
      for (const auto& l : program.lineage()) {
        if (l.pass() != "merge_multi_launch") continue;
        plan.target = l.target();
        plan.merge_reason = absl::StrCat(l.applied() ? "applied: " : "skipped: ", l.reason());
      }
      record.plans.push_back(std::move(plan));
    }
  }
  std::fprintf(stderr, "[profile] %s: %zu stages (%s)\n", record.model.c_str(), record.stages.size(),
               absl::StrJoin(record.stages, " -> ", [](std::string* out, const profile::StageRecord& s) {
                 absl::StrAppend(out, ":", s.name);
               }).c_str());
  return absl::OkStatus();
}

// The weights, once, shared by every stage.
absl::Status LoadWeights(Profile& p) {
  const std::string spec = g_src.weights;
  p.progress.Line(absl::StrCat("loading weights (", ShownPath(spec), ") ..."));
  const auto t = Clock::now();
  DK_ASSIGN_OR_RETURN(p.weights, dk::runtime::LoadWeightsSpec(spec, p.model(), &dk::SharedThreadPool()));
  p.record.weights_source = ShownPath(p.weights->source());
  p.record.weights_digest = p.weights->Digest();
  p.progress.Line(absl::StrFormat("weights %s (%s) loaded in %.1f s: %s", p.record.weights_source,
                                  profile::HumanBytes(p.weights->total_bytes()), Since(t), p.record.weights_digest));
  return absl::OkStatus();
}

// The gate's goldens, checked against the weights before anything is measured.
absl::Status LoadGate(Profile& p) {
  const std::string path = UserPath(absl::GetFlag(FLAGS_goldens));
  p.record.goldens = ShownPath(path);
  p.record.gate_prompts = absl::GetFlag(FLAGS_gate_prompts);
  if (p.record.gate_prompts <= 0) return absl::OkStatus();
  DK_ASSIGN_OR_RETURN(p.goldens, dk::verify::LoadGoldens(path));
  p.record.gate_tokens = p.goldens.new_tokens;
  p.record.goldens_reference = p.goldens.Reference();
  std::fprintf(stderr, "[profile] gate goldens %s, reference %s\n", p.record.goldens.c_str(),
               p.record.goldens_reference.c_str());
  p.gate.weights = p.weights;
  p.gate.weights_digest = p.record.weights_digest;
  p.gate.goldens = &p.goldens;
  p.gate.goldens_name = p.record.goldens;
  p.gate.prompts = p.record.gate_prompts;
  p.gate.validate = true;
  p.gate.cpu = p.runtime.cpu;
  p.gate.pool = &dk::SharedThreadPool();  // the pool --threads set up
  p.gate.prefill_rows = p.runtime.prefill_rows;
  const dk::tokenizer::Tokenizer* tok = p.tokenizer.get();
  p.gate.decode = [tok](const std::vector<uint32_t>& v) {
    auto text = tok->Decode(std::vector<int32_t>(v.begin(), v.end()));
    return text.ok() ? *text : std::string("<undecodable>");
  };
  return dk::verify::CheckGoldens(p.gate);
}

// The tokenizer and the prompt's ids, checked to fit the context.
absl::Status LoadPrompt(Profile& p) {
  profile::ProfileRecord& record = p.record;
  record.prompt = absl::GetFlag(FLAGS_prompt);
  record.warmup = absl::GetFlag(FLAGS_warmup);
  record.new_tokens = absl::GetFlag(FLAGS_new_tokens);
  record.rounds = std::min(absl::GetFlag(FLAGS_rounds), record.new_tokens);
  if (g_src.tokenizer.empty()) return absl::InvalidArgumentError("--tokenizer is required for a config.json alone");
  DK_ASSIGN_OR_RETURN(p.tokenizer, dk::tokenizer::Tokenizer::Load(g_src.tokenizer));
  DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerFitsModel(*p.tokenizer, p.model().vocab(),
                                                            ShownPath(g_src.tokenizer),
                                                            absl::StrCat("ELF ", p.elfs[0])));
  DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerMatchesWeights(*p.tokenizer, ShownPath(g_src.tokenizer),
                                                                 g_src.weights));
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, p.tokenizer->Encode(record.prompt));
  if (ids.empty()) return absl::InvalidArgumentError("the prompt encodes to no tokens");
  p.prompt.assign(ids.begin(), ids.end());
  record.prompt_tokens = static_cast<int>(p.prompt.size());
  if (record.prompt_tokens + record.warmup + record.new_tokens > p.model().max_context()) {
    return absl::OutOfRangeError(absl::StrCat("prompt + warm-up + new tokens exceed the context of ",
                                              p.model().max_context()));
  }
  return absl::OkStatus();
}

// --context against the model and the prompt.
absl::Status CheckContexts(const Profile& p) {
  if (p.contexts.empty()) return absl::OkStatus();
  const int n = absl::GetFlag(FLAGS_context_tokens);
  if (p.contexts.back() > p.model().max_context()) {
    return absl::InvalidArgumentError(absl::StrCat("--context ", p.contexts.back(), " is not in [1, ",
                                                   p.model().max_context(), "]"));
  }
  if (p.contexts.front() < p.record.prompt_tokens + n) {
    return absl::InvalidArgumentError(absl::StrCat("every --context must be at least the prompt (",
                                                   p.record.prompt_tokens, ") + --context_tokens (", n, ")"));
  }
  return absl::OkStatus();
}

// The machine's floor, measured now, with the decode threads.
void MeasureBandwidth(Profile& p) {
  dk::ThreadPool& pool = dk::SharedThreadPool();
  p.record.threads = pool.num_threads();
  p.progress.Line(absl::StrFormat("measuring read bandwidth (%d MiB, %d threads) ...",
                                  absl::GetFlag(FLAGS_bandwidth_mib), p.record.threads));
  p.bandwidth.bytes = static_cast<size_t>(absl::GetFlag(FLAGS_bandwidth_mib)) << 20;
  // Weight BOs sit on huge pages, so the bandwidth buffer does too.
  p.bandwidth.page_mode = dk::PageMode::kHugePages;
  p.record.bandwidth_gbps = dk::kernels::MeasureReadBandwidth(&pool, p.bandwidth);
  p.progress.Line(absl::StrFormat("read bandwidth %.2f GB/s", p.record.bandwidth_gbps));
}

// One streaming pass over the bandwidth buffer, GB/s: the pair of passes around a
// measured token tells the bandwidth that token ran at.
double ReadPass(Profile& p) {
  dk::kernels::BandwidthOptions one = p.bandwidth;
  one.passes = 1;
  return dk::kernels::MeasureReadBandwidth(&dk::SharedThreadPool(), one);
}

// One timing round of stage i: the stage opened afresh, the prompt one token at a
// time, then warm-up + `tokens` greedy tokens (runtime/greedy.h), validation off.
// The measured tokens go to the stage's token_ms and `acc`; the warm-up's only in
// the first round (`first`).
absl::Status Measure(Profile& p, size_t i, int tokens, int round, profile::BreakdownAccumulator& acc) {
  const bool first = round == 0;
  profile::StageRecord& s = p.record.stages[i];
  dk::runtime::SessionOptions options = p.runtime.Session();
  options.validate = false;
  DK_ASSIGN_OR_RETURN(auto session, dk::runtime::CpuSession::Open(p.programs[i], p.elfs[i], p.weights, options));
  p.record.device = session->device().description();
  dk::runtime::Decoder& decoder = session->decoder();
  const int warmup = p.record.warmup, total = warmup + tokens;
  const std::string what = absl::StrCat(":", s.name, " timing");
  dk::runtime::GreedyOptions greedy;
  greedy.max_new_tokens = total + 1;  // token 0 is the prompt's; each later one is a timed step
  std::vector<double> floor_gbps;     // read passes: before measured token k is floor_gbps[k]
  DK_ASSIGN_OR_RETURN(dk::runtime::GreedyRun run,
                      dk::runtime::GenerateGreedy(decoder, p.prompt, greedy,
                                                  [&](int index, const dk::runtime::StepResult&) {
                                                    if (index > warmup) acc.Add(decoder.timings());
                                                    // After the last warm-up step and after every
                                                    // measured one: a read pass between the tokens.
                                                    if (index >= warmup) floor_gbps.push_back(ReadPass(p));
                                                    if (index > 0) p.progress.Tick(what, index, total);
                                                    return absl::OkStatus();
                                                  }));
  p.progress.End();
  if (floor_gbps.size() != static_cast<size_t>(tokens) + 1 || run.token_ms.size() != static_cast<size_t>(total)) {
    return absl::InternalError(absl::StrCat(what, ": ", run.token_ms.size(), " tokens and ", floor_gbps.size(),
                                            " bandwidth reads for ", total, " tokens"));
  }
  s.spec_checks += run.checks;
  s.spec_drafted += run.drafted;
  s.spec_accepted += run.accepted;
  const size_t skip = first ? 0 : static_cast<size_t>(warmup);
  s.token_ms.insert(s.token_ms.end(), run.token_ms.begin() + skip, run.token_ms.end());
  for (int k = static_cast<int>(skip); k < total; ++k) {
    if (k < warmup) {
      s.token_gbps.push_back(0);
      s.token_round.push_back(-1);
      continue;
    }
    // The token's floor: the mean read time of a fixed byte count before and after it.
    const double before = floor_gbps[k - warmup], after = floor_gbps[k - warmup + 1];
    s.token_gbps.push_back(before > 0 && after > 0 ? 2 / (1 / before + 1 / after) : 0);
    s.token_round.push_back(round);
  }
  if (first) s.warmup = warmup;
  s.components = acc.Components();
  s.bytes_written_per_token = acc.BytesWrittenPerToken();
  s.bytes_read_per_token = acc.BytesReadPerToken();
  return absl::OkStatus();
}

// The verify gate of stage i against the goldens and its parent's tokens (gates[j]:
// stage j's gate, when it ran).
void Gate(Profile& p, size_t i, const std::string& head, std::vector<std::optional<dk::verify::StageGate>>& gates) {
  profile::StageRecord& s = p.record.stages[i];
  p.progress.Line(absl::StrFormat("%s: verify gate, %d prompts x %d tokens, BO validation on ...", head,
                                  p.record.gate_prompts, p.goldens.new_tokens));
  const auto t = Clock::now();
  const dk::verify::StageGate* parent = nullptr;  // the stage this one was derived from (its src)
  for (size_t j = 0; j < i; ++j) {
    const profile::StageRecord& ps = p.record.stages[j];
    if ((s.src == ":" + ps.name || s.src == ps.label) && gates[j]) parent = &*gates[j];
  }
  absl::StatusOr<dk::verify::StageGate> gate = dk::verify::RunStageGate(p.gate, p.programs[i], p.elfs[i], s.name, parent);
  if (!gate.ok()) {
    s.error = std::string(gate.status().message());
    p.progress.Line(absl::StrCat(head, ": gate ERROR ", s.error));
    return;
  }
  s.gate_ran = true;
  s.gate_passed = gate->gate.passed;
  s.gate_report = dk::verify::FormatGateReport(gate->gate);
  if (gate->numeric) {
    s.numeric_ran = true;
    s.numeric_passed = gate->numeric->passed;
    s.numeric_max_abs_diff = gate->numeric->max_abs_diff;
    s.numeric_pct_of_tol = 100 * gate->numeric->max_ratio;
    absl::StrAppend(&s.gate_report, dk::verify::FormatNumericReport(*gate->numeric));
  }
  if (gate->exact) {
    s.same_as_parent = gate->exact->same;
    absl::StrAppend(&s.gate_report, dk::verify::FormatExactReport(*gate->exact));
  }
  p.progress.Line(absl::StrFormat("%s: verify gate %s%s, numeric %s (%.1f s)", head,
                                  s.gate_passed ? "PASS" : "FAIL",
                                  s.same_as_parent     ? ""
                                  : s.changes_numerics ? ", tokens differ from the parent (reported: the stage changes numerics)"
                                                       : ", tokens differ from the parent",
                                  !gate->numeric ? "-" : dk::verify::NumericSummary(*gate->numeric), Since(t)));
  gates[i] = *std::move(gate);
}

// Every stage: its timing rounds, interleaved across the stages (round r of every
// stage before round r + 1 of any), and its gate after its first round. A stage that
// fails records its error and is not timed again.
void ProfileStages(Profile& p) {
  const size_t n = p.record.stages.size();
  const int rounds = p.record.rounds;
  std::vector<std::optional<dk::verify::StageGate>> gates(n);
  std::vector<profile::StepMap> maps;
  std::vector<profile::BreakdownAccumulator> accs;
  std::vector<std::vector<double>> bandwidth(n);
  maps.reserve(n);  // accs hold references into maps
  accs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    maps.push_back(profile::MapSteps(p.programs[i]));
    accs.emplace_back(maps[i]);
    p.record.stages[i].device_runs_per_token = maps[i].device_runs;
    p.record.stages[i].weight_bytes_per_token = maps[i].weight_bytes;
  }
  for (int round = 0; round < rounds; ++round) {
    // Round r's share of the measured tokens (the first rounds take the remainder).
    const int tokens = p.record.new_tokens / rounds + (round < p.record.new_tokens % rounds ? 1 : 0);
    for (size_t i = 0; i < n; ++i) {
      profile::StageRecord& s = p.record.stages[i];
      if (!s.error.empty()) continue;
      const std::string head = absl::StrFormat("stage %zu/%zu :%s (%s)%s", i + 1, n, s.name, s.kind,
                                               rounds > 1 ? absl::StrFormat(", round %d/%d", round + 1, rounds) : "");
      p.progress.Line(absl::StrFormat("%s: timing %d warm-up + %d tokens, each between two read passes ...", head,
                                      p.record.warmup, tokens));
      const auto t = Clock::now();
      const size_t from = s.token_ms.size();
      if (absl::Status st = Measure(p, i, tokens, round, accs[i]); !st.ok()) {
        s.error = std::string(st.message());
        p.progress.Line(absl::StrCat(head, ": ERROR ", s.error));
        continue;
      }
      std::vector<double> round_ms, round_gbps;
      for (size_t k = from; k < s.token_ms.size(); ++k) {
        if (s.token_round[k] != round) continue;
        round_ms.push_back(s.token_ms[k]);
        round_gbps.push_back(s.token_gbps[k]);
        bandwidth[i].push_back(s.token_gbps[k]);
      }
      s.bandwidth_gbps = profile::Median(bandwidth[i]);
      const double gbps = profile::Median(round_gbps);
      p.progress.Line(absl::StrFormat("%s: %.2f ms/token this round at %.1f GB/s, %.1f s", head,
                                      profile::Median(round_ms), gbps, Since(t)));
      if (round == 0 && p.record.gate_prompts > 0) Gate(p, i, head, gates);
      if (round == 0 && p.record.gate_prompts <= 0) s.gate_skipped = true;
    }
  }
}

// One --context point: decode steps fill the KV cache to context - tokens, then
// `tokens` timed steps.
absl::StatusOr<profile::ContextPoint> MeasureContext(Profile& p, dk::runtime::Decoder& decoder, int stage, int context) {
  const int n = absl::GetFlag(FLAGS_context_tokens);
  const std::string what = absl::StrCat(":", p.record.stages[stage].name, " filling the context to ", context);
  const int fill_from = decoder.position();
  while (decoder.position() < context - n) {
    DK_RETURN_IF_ERROR(decoder.Advance(decoder.last().token));
    p.progress.Tick(what, decoder.position() - fill_from, context - n - fill_from);
  }
  p.progress.End();
  profile::ContextPoint point;
  point.context = context;
  point.tokens = n;
  point.bandwidth_gbps = dk::kernels::MeasureReadBandwidth(&dk::SharedThreadPool(), p.bandwidth);
  std::vector<double> ms;
  double attention_ns = 0;
  const auto& steps = p.programs[stage].steps();
  while (decoder.position() < context) {
    const auto t0 = Clock::now();
    const absl::Status st = decoder.Advance(decoder.last().token);
    ms.push_back(Ms(Clock::now() - t0));
    DK_RETURN_IF_ERROR(st);
    for (size_t k = 0; k < decoder.timings().size(); ++k) {
      const auto& step = steps[static_cast<int>(k)];
      if (step.has_host() && step.host().kind() == dk::elf::HostStep::ATTENTION) attention_ns += decoder.timings()[k].run_ns;
    }
  }
  const int64_t weight_bytes = p.record.stages[stage].weight_bytes_per_token;
  point.median_ms = profile::Median(ms);
  point.attention_ms = attention_ns * 1e-6 / ms.size();
  point.x_floor = point.median_ms / (weight_bytes / (point.bandwidth_gbps * 1e9) * 1e3);
  p.progress.Line(absl::StrFormat("context %d: %.2f ms/token, attention %.2f ms (%.1f%%), %.2fx the floor", context,
                                  point.median_ms, point.attention_ms, 100 * point.attention_share(), point.x_floor));
  return point;
}

// Context scaling on the final stage (the last that passed; without a gate, the
// last that ran).
absl::Status MeasureContexts(Profile& p) {
  if (p.contexts.empty()) return absl::OkStatus();
  int final_stage = -1;
  for (size_t i = 0; i < p.record.stages.size(); ++i) {
    const profile::StageRecord& s = p.record.stages[i];
    if (s.passed() || (p.record.gate_prompts <= 0 && s.error.empty())) final_stage = static_cast<int>(i);
  }
  if (final_stage < 0) return absl::FailedPreconditionError("no stage to time at longer contexts");
  dk::runtime::SessionOptions options = p.runtime.Session();
  DK_ASSIGN_OR_RETURN(auto session, dk::runtime::CpuSession::Open(p.programs[final_stage], p.elfs[final_stage],
                                                                  p.weights, options));
  DK_RETURN_IF_ERROR(dk::runtime::FeedPrompt(session->decoder(), p.prompt));
  for (int c : p.contexts) {
    DK_ASSIGN_OR_RETURN(profile::ContextPoint point, MeasureContext(p, session->decoder(), final_stage, c));
    p.record.contexts.push_back(point);
  }
  return absl::OkStatus();
}

// The phase-4 measurements: every stage's prompt processing at each size that fits
// its context, on a fresh session (validation off). A stage that fails to run keeps
// its error in the record.
void MeasurePrefillAll(Profile& p) {
  std::vector<int>& sizes = p.prefill.sizes;
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](int n) { return n > p.model().max_context(); }),
              sizes.end());
  if (sizes.empty()) return;
  for (size_t i = 0; i < p.record.stages.size(); ++i) {
    profile::StagePrefill stage;
    const std::string what = absl::StrCat(":", p.record.stages[i].name, " prompt processing");
    dk::runtime::SessionOptions options = p.runtime.Session();
    absl::StatusOr<std::vector<profile::PrefillPoint>> points = [&]() -> decltype(points) {
      DK_ASSIGN_OR_RETURN(auto session, dk::runtime::CpuSession::Open(p.programs[i], p.elfs[i], p.weights, options));
      p.prefill.chunk = session->decoder().prefill_rows();
      return profile::MeasurePrefill(session->decoder(), sizes, p.prefill.reps,
                                     [&](int done, int total) { p.progress.Tick(what, done, total); });
    }();
    p.progress.End();
    if (points.ok()) {
      stage.points = *std::move(points);
      std::string line = absl::StrCat(what, ":");
      for (const auto& pt : stage.points) {
        absl::StrAppend(&line, absl::StrFormat(" pp%d %.1f tokens/s (TTFT %.0f ms)", pt.prompt_tokens,
                                               pt.tokens_per_s, pt.ttft_ms));
      }
      p.progress.Line(line);
    } else {
      stage.error = std::string(points.status().message());
      p.progress.Line(absl::StrCat(what, ": ERROR ", stage.error));
    }
    p.prefill.stages.push_back(std::move(stage));
  }
}

// Every stage against the baseline (stage 0, bf16) over --kld_text, in step: each
// chunk of a window through the baseline once, then through every stage of a group
// (tools/perplexity/run.h). A stage that cannot be opened keeps its error; the others
// are still compared.
absl::Status MeasureKld(Profile& p) {
  profile::ProfileRecord& r = p.record;
  const std::string path = UserPath(absl::GetFlag(FLAGS_kld_text));
  if (absl::GetFlag(FLAGS_kld_text).empty()) return absl::OkStatus();
  DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(path, "--kld_text", uint64_t{1} << 30));
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, p.tokenizer->Encode(text));
  dk::perplexity::WindowOptions wo;
  wo.window = std::min<int>(absl::GetFlag(FLAGS_kld_window), p.model().max_context());
  wo.max_windows = absl::GetFlag(FLAGS_kld_max_windows);
  if (!ids.empty() && p.tokenizer->bos_id() && ids[0] == *p.tokenizer->bos_id()) wo.bos = p.tokenizer->bos_id();
  DK_ASSIGN_OR_RETURN(const auto windows, dk::perplexity::MakeWindows(ids, wo));
  r.kld_text = ShownPath(path);
  r.kld_reference = r.stages[0].name;
  r.kld_text_tokens = static_cast<int>(ids.size());
  r.kld_window = wo.window;
  r.kld_windows = static_cast<int>(windows.size());
  r.kld_score_from = dk::perplexity::ScoreFrom(wo);
  dk::runtime::SessionOptions options = p.runtime.Session();
  options.max_context = wo.window;
  // Every row of a window at once, unless the logits of a run (BO and host value, f32)
  // would pass 256 MiB per stage.
  options.score_rows = static_cast<int>(
      std::min<int64_t>(wo.window - 1, std::max<int64_t>(1, (int64_t{256} << 20) / (p.model().vocab() * 8))));
  absl::StatusOr<std::unique_ptr<dk::runtime::CpuSession>> baseline =
      dk::runtime::CpuSession::Open(p.programs[0], p.elfs[0], p.weights, options);
  if (!baseline.ok()) {
    for (profile::StageRecord& s : r.stages) s.kld_error = std::string(baseline.status().message());
    return absl::OkStatus();
  }
  // The stages run in groups that fit half the host's available memory (every session's
  // BOs at once: a 1B model's chain would not fit whole), each group in step against the
  // baseline, which runs once per group.
  const int64_t budget = std::max<int64_t>(dk::runtime::MemAvailableBytes() / 2, int64_t{1} << 30);
  const auto t = Clock::now();
  size_t next = 1;
  while (next < r.stages.size()) {
    std::vector<std::unique_ptr<dk::runtime::CpuSession>> sessions;
    std::vector<dk::runtime::Decoder*> decoders;
    std::vector<size_t> index;  // stage of each decoder
    int64_t used = 0;
    for (; next < r.stages.size(); ++next) {
      const int64_t need =
          dk::runtime::EstimateSessionMemory(p.programs[next], dk::runtime::GgufBlocksOnly(p.programs[next]),
                                             wo.window)
              .total();
      if (!sessions.empty() && used + need > budget) break;
      absl::StatusOr<std::unique_ptr<dk::runtime::CpuSession>> s =
          dk::runtime::CpuSession::Open(p.programs[next], p.elfs[next], p.weights, options);
      if (!s.ok()) {
        r.stages[next].kld_error = std::string(s.status().message());
        continue;
      }
      used += need;
      sessions.push_back(*std::move(s));
      decoders.push_back(&sessions.back()->decoder());
      index.push_back(next);
    }
    if (decoders.empty()) continue;
    const std::string what = absl::StrFormat("KLD of stages %zu..%zu vs :%s over %d windows of %d tokens", index[0],
                                             index.back(), r.kld_reference, r.kld_windows, r.kld_window);
    absl::StatusOr<std::vector<dk::perplexity::Summary>> got = dk::perplexity::CompareStages(
        decoders, (*baseline)->decoder(), windows, r.kld_score_from,
        [&](int done, int total) { p.progress.Tick(what, done, total); });
    p.progress.End();
    if (!got.ok()) {
      for (size_t i : index) r.stages[i].kld_error = std::string(got.status().message());
      p.progress.Line(absl::StrCat(what, ": ERROR ", got.status().message()));
      continue;
    }
    for (size_t k = 0; k < index.size(); ++k) {
      profile::StageRecord& s = r.stages[index[k]];
      const dk::perplexity::Summary& m = (*got)[k];
      s.kld_ran = true;
      s.kld_mean = m.mean_kld;
      s.kld_p99 = m.p99_kld;
      s.kld_top1 = m.top1;
      s.kld_ppl = m.ppl;
      s.kld_ppl_ratio = m.ppl_ratio;
      r.kld_positions = m.positions;
      r.kld_reference_ppl = m.ref_ppl;
      p.progress.Line(absl::StrCat(":", s.name, " vs :", r.kld_reference, ": ", m.Describe()));
    }
  }
  const std::string what = absl::StrFormat("KLD of %zu stages vs :%s", r.stages.size() - 1, r.kld_reference);
  // The baseline against itself: KLD 0, top-1 1, ratio 1 by definition.
  profile::StageRecord& b = r.stages[0];
  b.kld_ran = true;
  b.kld_top1 = 1;
  b.kld_ppl = r.kld_reference_ppl;
  b.kld_ppl_ratio = 1;
  p.progress.Line(absl::StrFormat("%s: %.1f s", what, Since(t)));
  return absl::OkStatus();
}

// The record: the table on stdout (stderr with --json), phase5_decode.{md,html}, the
// JSON, the charts (phase5_decode.{svg,png}).
absl::Status WriteOutputs(Profile& p, Clock::time_point t_start) {
  profile::ProfileRecord& record = p.record;
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  std::string build_path = absl::GetFlag(FLAGS_build_file);
  if (build_path.empty() && workspace != nullptr && !g_src.model) build_path = absl::StrCat(workspace, "/", record.package, "/BUILD");
  std::string build_text;
  if (!build_path.empty()) build_text = profile::ReadFile(UserPath(build_path)).value_or("");
  record.date = profile::UtcNow();
  profile::Finalize(record, build_text);

  // --model without --out_dir: <model name>_profile where the user ran the tool.
  const std::string out_dir = !absl::GetFlag(FLAGS_out_dir).empty() ? UserPath(absl::GetFlag(FLAGS_out_dir))
                              : g_src.model ? UserPath(absl::StrCat(record.model, "_profile"))
                                            : absl::StrCat(workspace, "/", record.package, "/docs/development_progress");
  const std::string command = absl::StrCat("./bazelw run ", record.profile_label);
  const std::string table = profile::FormatTable(record);
  std::fprintf(absl::GetFlag(FLAGS_json) ? stderr : stdout, "\n%s", table.c_str());
  DK_RETURN_IF_ERROR(profile::MakeDirs(out_dir));
  const std::string md = absl::StrCat(out_dir, "/phase5_decode.md");
  const std::string html = absl::StrCat(out_dir, "/phase5_decode.html");
  DK_RETURN_IF_ERROR(profile::WriteFile(md, profile::Markdown(record, command)));
  DK_RETURN_IF_ERROR(profile::WriteFile(html, profile::Html(record, command)));
  if (!p.prefill.stages.empty()) {
    const std::string phase4 = absl::StrCat(out_dir, "/phase4_prefill.md");
    DK_RETURN_IF_ERROR(profile::WriteFile(phase4, profile::PrefillMarkdown(record, p.prefill, command)));
    std::fprintf(stderr, "[profile] wrote %s\n", phase4.c_str());
  }
  const std::string json = profile::ToJson(record);
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    DK_RETURN_IF_ERROR(profile::WriteFile(UserPath(absl::GetFlag(FLAGS_json_out)), json + "\n"));
  }
  if (absl::GetFlag(FLAGS_json)) std::printf("%s\n", json.c_str());
  std::fprintf(stderr, "[profile] wrote %s and %s (%.0f s of measuring)\n", md.c_str(), html.c_str(), Since(t_start));
  if (absl::GetFlag(FLAGS_png)) {
    const std::string svg = absl::StrCat(out_dir, "/phase5_decode.svg");
    const std::string png = absl::StrCat(out_dir, "/phase5_decode.png");
    DK_RETURN_IF_ERROR(profile::WriteFile(svg, profile::ChartSvg(record)));
    const absl::Status st = profile::RenderPng(svg, png);
    std::fprintf(stderr, "[profile] %s\n",
                 st.ok() ? absl::StrCat("wrote ", svg, " and ", png).c_str() : std::string(st.message()).c_str());
  }
  return absl::OkStatus();
}

int ExitStatus(const profile::ProfileRecord& record) {
  if (!record.reverted.empty()) return dk::kExitReverted;
  if (!record.final_faster) return dk::kExitNotFaster;
  return dk::kExitOk;
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("profile", s, code); }

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "bazel run //models/<model>:profile [-- --new_tokens N --warmup N --prompt TEXT --json "
      "--json_out FILE --out_dir DIR]\n"
      "bazel run //tools/profile -- --model FILE.gguf|CHECKPOINT_DIR [--goldens G.json] [--out_dir DIR] [...]");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  const auto t_start = Clock::now();
  Profile p;
  if (absl::Status s = CheckFlags(p); !s.ok()) return Fail(s, dk::kExitUsage);
  absl::StatusOr<std::optional<dk::tools::ModelChoice>> chosen =
      dk::tools::ModelFromFlags("profile", "", absl::GetFlag(FLAGS_weights), absl::GetFlag(FLAGS_tokenizer));
  if (!chosen.ok()) return Fail(chosen.status(), absl::IsInvalidArgument(chosen.status()) ? dk::kExitUsage : dk::kExitFailure);
  g_src.model = *chosen;
  g_src.weights = g_src.model ? g_src.model->weights : UserPath(absl::GetFlag(FLAGS_weights));
  g_src.tokenizer = g_src.model ? g_src.model->tokenizer : UserPath(absl::GetFlag(FLAGS_tokenizer));
  absl::StatusOr<dk::tools::RuntimeOptions> runtime = dk::tools::ApplyRuntimeFlags();
  if (!runtime.ok()) return Fail(runtime.status(), dk::kExitUsage);
  p.runtime = *runtime;
  p.record.runtime_options = runtime->Describe();
  for (auto step : {LoadChain, LoadWeights, LoadPrompt, LoadGate}) {
    if (absl::Status s = step(p); !s.ok()) return Fail(s);
  }
  if (absl::Status s = CheckContexts(p); !s.ok()) return Fail(s, dk::kExitUsage);
  MeasureBandwidth(p);
  ProfileStages(p);
  if (absl::Status s = MeasureContexts(p); !s.ok()) return Fail(s);
  MeasurePrefillAll(p);
  if (absl::Status s = MeasureKld(p); !s.ok()) return Fail(s);
  if (absl::Status s = WriteOutputs(p, t_start); !s.ok()) return Fail(s);
  return ExitStatus(p.record);
}
