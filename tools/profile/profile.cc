// The phase-5 profile of a decode chain (DESIGN.md s.7), run by
//   ./bazelw run //models/llama32_1b:profile [-- --new_tokens 32 --json]
// For every stage, on the same prompt and the same weights (loaded once): ms/token
// over steady-state decode tokens, the per-step split, runs and BO bytes per token,
// the ratio to the memory-bandwidth floor; then the verify gate (validation on). A
// stage that fails the gate is reported as reverted with the BUILD edit that removes
// it. Writes <package>/docs/development_progress/phase5_decode.{md,html} into the
// source tree (BUILD_WORKSPACE_DIRECTORY, which bazel run sets) or --out_dir.
//
// Exit status: 0 every stage passed and the final stage is strictly faster than the
// baseline; 3 a stage was reverted; 4 the final stage is not faster; 1 an error.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "util/user_path.h"
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
#include "tokenizer/tokenizer.h"
#include "tools/profile/record.h"
#include "tools/profile/render.h"
#include "util/thread_pool.h"
#include "verify/gate.h"
#include "verify/goldens.h"
#include "verify/runner.h"

ABSL_FLAG(std::string, manifest, "", "the chain (written by the decode_profile rule)");
ABSL_FLAG(std::string, prompt, "What is the capital of France?", "the canonical prompt");
ABSL_FLAG(int, new_tokens, 32, "measured decode tokens per stage (after the warm-up)");
ABSL_FLAG(int, warmup, 4, "decode tokens run before measuring");
ABSL_FLAG(int, gate_prompts, 2, "verify-gate prompts per stage (the goldens' first N); 0: no gate");
ABSL_FLAG(std::string, goldens, "", "the goldens of the verify gate (default: the target's)");
ABSL_FLAG(std::string, weights, "",
          "checkpoint dir, .gguf, or synthetic[:SEED] (default: the target's)");
ABSL_FLAG(std::string, tokenizer, "", "a .gguf, tokenizer.json or checkpoint dir (default: the target's)");
// Set by the decode_profile rule: runfiles paths, relative to the working directory.
ABSL_FLAG(std::string, default_goldens, "", "set by the BUILD target");
ABSL_FLAG(std::string, default_weights, "synthetic", "set by the BUILD target");
ABSL_FLAG(std::string, default_tokenizer, "", "set by the BUILD target");
ABSL_FLAG(std::string, out_dir, "",
          "where to write phase5_decode.{md,html} (default: <workspace>/<package>/docs/"
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
ABSL_FLAG(bool, screenshot, true,
          "also write phase5_decode.png, a screenshot of the HTML report by headless Chromium "
          "(skipped, with a note, when chromium is not installed)");

namespace {

using Clock = std::chrono::steady_clock;
namespace profile = dk::profile;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

using dk::UserPath;  // paths the user types are relative to where `bazel run` was called

// A user's flag (relative to where bazel run was called) or the target's default.
std::string PathFlag(const absl::Flag<std::string>& user, const absl::Flag<std::string>& fallback) {
  const std::string v = absl::GetFlag(user);
  return v.empty() ? absl::GetFlag(fallback) : UserPath(v);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out << text;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  const std::string cmd = absl::StrCat("mkdir -p '", dir, "'");
  if (std::system(cmd.c_str()) != 0) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir));
  return absl::OkStatus();
}

class Progress {
 public:
  Progress() : tty_(isatty(2)) {}
  void Line(const std::string& s) {
    End();
    std::fprintf(stderr, "[profile] %s\n", s.c_str());
  }
  // Rewrites one line on a terminal; else prints every quarter.
  void Tick(const std::string& what, int done, int total) {
    if (tty_) {
      std::fprintf(stderr, "\r[profile] %s: token %d/%d", what.c_str(), done, total);
      open_ = true;
    } else if (done == total || (total >= 4 && done % (total / 4) == 0)) {
      std::fprintf(stderr, "[profile] %s: token %d/%d\n", what.c_str(), done, total);
    }
    std::fflush(stderr);
  }
  void End() {
    if (open_) std::fprintf(stderr, "\n");
    open_ = false;
  }

 private:
  bool tty_;
  bool open_ = false;
};

// Headless Chromium's screenshot of the report (no network: a local file).
absl::Status Screenshot(const std::string& html, const std::string& png) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    return absl::NotFoundError("chromium is not installed (./bazelw installs it); no screenshot");
  }
  char tmpl[] = "/tmp/dk_profile_chromium.XXXXXX";
  const char* profile_dir = mkdtemp(tmpl);
  if (profile_dir == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string cmd = absl::StrCat(
      "timeout 120 chromium --headless ", geteuid() == 0 ? "--no-sandbox " : "",
      "--disable-gpu --disable-dev-shm-usage --no-first-run --hide-scrollbars --user-data-dir='",
      profile_dir, "' --window-size=1200,1800 --screenshot='", png, "' 'file://", html,
      "' >/dev/null 2>&1; rc=$?; rm -rf '", profile_dir, "'; exit $rc");
  if (std::system(cmd.c_str()) != 0) return absl::InternalError(absl::StrCat("chromium failed on ", html));
  return absl::OkStatus();
}

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct StageInput {
  std::string elf;
};

// Timing run: the prompt one token at a time, then warm-up + measured greedy tokens.
absl::Status Measure(const dk::elf::Program& program, const std::string& elf,
                     std::shared_ptr<const dk::weights::Weights> weights, const std::vector<uint32_t>& prompt,
                     int warmup, int new_tokens, profile::StageRecord& s, std::string* device, Progress& progress) {
  dk::runtime::SessionOptions options;
  options.validate = false;
  auto session = dk::runtime::CpuSession::Open(program, elf, weights, options);
  if (!session.ok()) return session.status();
  *device = (*session)->device().description();
  dk::runtime::Decoder& decoder = (*session)->decoder();
  const profile::StepMap map = profile::MapSteps(program);
  profile::BreakdownAccumulator acc(map);
  decoder.Reset();
  absl::StatusOr<dk::runtime::StepResult> step;
  for (uint32_t id : prompt) {
    step = decoder.Step(id);
    if (!step.ok()) return step.status();
  }
  const int total = warmup + new_tokens;
  const std::string what = absl::StrCat(":", s.name, " timing");
  uint32_t next = step->token;
  for (int t = 0; t < total; ++t) {
    const auto t0 = Clock::now();
    const absl::Status st = decoder.Advance(next);
    const double ms = Ms(Clock::now() - t0);
    if (!st.ok()) return st;
    next = decoder.last().token;
    s.token_ms.push_back(ms);
    if (t >= warmup) acc.Add(decoder.timings());
    progress.Tick(what, t + 1, total);
  }
  progress.End();
  s.warmup = warmup;
  s.components = acc.Components();
  s.bytes_written_per_token = acc.BytesWrittenPerToken();
  s.bytes_read_per_token = acc.BytesReadPerToken();
  s.device_runs_per_token = map.device_runs;
  s.weight_bytes_per_token = map.weight_bytes;
  return absl::OkStatus();
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "profile: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "bazel run //models/<model>:profile [-- --new_tokens N --warmup N --prompt TEXT --json "
      "--json_out FILE --out_dir DIR]");
  absl::ParseCommandLine(argc, argv);
  Progress progress;
  const auto t_start = Clock::now();

  // The chain.
  auto manifest_text = ReadFile(absl::GetFlag(FLAGS_manifest));
  if (!manifest_text.ok()) return Fail(manifest_text.status());
  nlohmann::json manifest = nlohmann::json::parse(*manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.contains("stages") || manifest["stages"].empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_manifest), ": not a profile manifest")));
  }
  profile::ProfileRecord record;
  record.model = manifest.value("model", "");
  record.package = manifest.value("package", "");
  record.profile_label = manifest.value("label", "");
  record.prompt = absl::GetFlag(FLAGS_prompt);
  record.warmup = absl::GetFlag(FLAGS_warmup);
  record.new_tokens = absl::GetFlag(FLAGS_new_tokens);
  record.goldens = PathFlag(FLAGS_goldens, FLAGS_default_goldens);
  if (record.new_tokens < 1 || record.warmup < 0) {
    return Fail(absl::InvalidArgumentError("--new_tokens must be >= 1 and --warmup >= 0"));
  }
  std::vector<std::string> elfs;
  for (const auto& st : manifest["stages"]) {
    profile::StageRecord s;
    s.name = st.value("name", "");
    s.label = st.value("label", "");
    s.kind = st.value("kind", "");
    s.src = st.value("src", "");
    s.lineage = st.value("lineage", std::vector<std::string>{});
    elfs.push_back(st.value("elf", ""));
    record.stages.push_back(std::move(s));
  }
  std::vector<dk::elf::Program> programs;
  for (size_t i = 0; i < elfs.size(); ++i) {
    auto p = dk::elf::ReadElfFile(elfs[i]);
    if (!p.ok()) return Fail(p.status());
    if (p->lineage_size() > 0) {
      const auto& last = p->lineage(p->lineage_size() - 1);
      record.stages[i].pass = last.pass();
      record.stages[i].target = last.target();
      record.stages[i].pass_applied = last.applied();
      record.stages[i].pass_reason = last.reason();
    }
    programs.push_back(*std::move(p));
  }
  const dk::elf::ModelShape& model = programs[0].model();
  if (record.model.empty()) record.model = model.name();
  std::fprintf(stderr, "[profile] %s: %zu stages (%s)\n", record.model.c_str(), record.stages.size(),
               absl::StrJoin(record.stages, " -> ", [](std::string* out, const profile::StageRecord& s) {
                 absl::StrAppend(out, ":", s.name);
               }).c_str());

  // Weights, once, shared by every stage.
  const std::string weights_spec = PathFlag(FLAGS_weights, FLAGS_default_weights);
  progress.Line(absl::StrCat("loading weights (", weights_spec, ") ..."));
  auto t = Clock::now();
  auto weights = dk::runtime::LoadWeightsSpec(weights_spec, model);
  if (!weights.ok()) return Fail(weights.status());
  record.weights_source = (*weights)->source();
  record.weights_digest = (*weights)->Digest();
  progress.Line(absl::StrFormat("weights %s (%s) loaded in %.1f s: %s", record.weights_source,
                                profile::HumanBytes((*weights)->total_bytes()), Since(t), record.weights_digest));

  // The gate's goldens, and the prompt.
  const int gate_n = absl::GetFlag(FLAGS_gate_prompts);
  dk::verify::Goldens goldens;
  if (gate_n > 0) {
    auto g = dk::verify::LoadGoldens(record.goldens);
    if (!g.ok()) return Fail(g.status());
    goldens = *std::move(g);
    if (goldens.weights_digest != record.weights_digest) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "the goldens ", record.goldens, " were recorded with weights ", goldens.weights_digest,
          " but this run uses ", record.weights_source, " = ", record.weights_digest,
          "; the gate would be meaningless (run with the weights the goldens were made from)")));
    }
    if (gate_n > static_cast<int>(goldens.prompts.size())) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--gate_prompts=", gate_n, " but the goldens have ",
                                                          goldens.prompts.size())));
    }
  }
  record.gate_prompts = gate_n;
  record.gate_tokens = goldens.new_tokens;
  auto tok = dk::tokenizer::Tokenizer::Load(PathFlag(FLAGS_tokenizer, FLAGS_default_tokenizer));
  if (!tok.ok()) return Fail(tok.status());
  auto ids = (*tok)->Encode(record.prompt);
  if (!ids.ok()) return Fail(ids.status());
  if (ids->empty()) return Fail(absl::InvalidArgumentError("the prompt encodes to no tokens"));
  const std::vector<uint32_t> prompt(ids->begin(), ids->end());
  record.prompt_tokens = static_cast<int>(prompt.size());
  if (record.prompt_tokens + record.warmup + record.new_tokens > model.max_context()) {
    return Fail(absl::OutOfRangeError(absl::StrCat("prompt + warm-up + new tokens exceed the context of ",
                                                   model.max_context())));
  }
  dk::verify::DecodeFn decode = [&tok](const std::vector<uint32_t>& v) {
    auto text = (*tok)->Decode(std::vector<int32_t>(v.begin(), v.end()));
    return text.ok() ? *text : std::string("<undecodable>");
  };

  // The machine's floor, measured now, with the decode threads.
  dk::ThreadPool& pool = dk::SharedThreadPool();
  record.threads = pool.num_threads();
  progress.Line(absl::StrFormat("measuring read bandwidth (%d MiB, %d threads) ...", absl::GetFlag(FLAGS_bandwidth_mib),
                                record.threads));
  dk::kernels::BandwidthOptions bw;
  bw.bytes = static_cast<size_t>(absl::GetFlag(FLAGS_bandwidth_mib)) << 20;
  // Weight BOs sit on huge pages, so the bandwidth buffer does too.
  bw.page_mode = dk::PageMode::kHugePages;
  record.bandwidth_gbps = dk::kernels::MeasureReadBandwidth(&pool, bw);
  progress.Line(absl::StrFormat("read bandwidth %.2f GB/s", record.bandwidth_gbps));

  // Every stage: timing, then the gate.
  const std::vector<dk::verify::GoldenPrompt> gate_prompts(goldens.prompts.begin(),
                                                           goldens.prompts.begin() + std::max(gate_n, 0));
  std::vector<std::vector<dk::verify::Sequence>> sequences(record.stages.size());
  for (size_t i = 0; i < record.stages.size(); ++i) {
    profile::StageRecord& s = record.stages[i];
    const std::string head = absl::StrFormat("stage %zu/%zu :%s (%s)", i + 1, record.stages.size(), s.name, s.kind);
    s.bandwidth_gbps = dk::kernels::MeasureReadBandwidth(&pool, bw);
    progress.Line(absl::StrFormat("%s: read bandwidth now %.2f GB/s; timing %d warm-up + %d tokens ...", head,
                                  s.bandwidth_gbps, record.warmup, record.new_tokens));
    t = Clock::now();
    absl::Status st = Measure(programs[i], elfs[i], *weights, prompt, record.warmup, record.new_tokens, s,
                              &record.device, progress);
    if (!st.ok()) {
      s.error = std::string(st.message());
      progress.Line(absl::StrCat(head, ": ERROR ", s.error));
      continue;
    }
    std::vector<double> steady = s.steady_ms();
    progress.Line(absl::StrFormat("%s: %.2f ms/token (median of %zu), %.1f s", head, profile::Median(steady),
                                  steady.size(), Since(t)));
    if (gate_n <= 0) continue;
    progress.Line(absl::StrFormat("%s: verify gate, %d prompts x %d tokens, BO validation on ...", head, gate_n,
                                  goldens.new_tokens));
    t = Clock::now();
    dk::runtime::SessionOptions options;
    options.validate = true;
    auto session = dk::runtime::CpuSession::Open(programs[i], elfs[i], *weights, options);
    absl::StatusOr<std::vector<dk::verify::Sequence>> run =
        session.ok() ? dk::verify::RunGreedy((*session)->decoder(), gate_prompts, goldens.new_tokens)
                     : absl::StatusOr<std::vector<dk::verify::Sequence>>(session.status());
    if (!run.ok()) {
      s.error = std::string(run.status().message());
      progress.Line(absl::StrCat(head, ": gate ERROR ", s.error));
      continue;
    }
    sequences[i] = *run;
    dk::verify::GateOptions gate_options;
    gate_options.num_tokens = goldens.new_tokens;
    auto report = dk::verify::CheckLogprobsClose(goldens.Sequences(gate_n), *run, decode, gate_options);
    if (!report.ok()) {
      s.error = std::string(report.status().message());
      continue;
    }
    s.gate_ran = true;
    s.gate_passed = report->passed;
    s.gate_report = dk::verify::FormatGateReport(*report);
    // The parent is the stage this one was derived from (its src).
    for (size_t p = 0; p < i; ++p) {
      const profile::StageRecord& ps = record.stages[p];
      if ((s.src == ":" + ps.name || s.src == ps.label) && !sequences[p].empty()) {
        auto exact = dk::verify::CompareExact(sequences[p], *run, decode, goldens.new_tokens, ps.name, s.name);
        if (exact.ok()) {
          s.same_as_parent = exact->same;
          absl::StrAppend(&s.gate_report, dk::verify::FormatExactReport(*exact));
        }
      }
    }
    progress.Line(absl::StrFormat("%s: verify gate %s%s (%.1f s)", head, s.gate_passed ? "PASS" : "FAIL",
                                  s.same_as_parent ? "" : ", tokens differ from the parent", Since(t)));
  }

  // Context scaling on the final stage.
  const std::vector<std::string> context_flags = absl::GetFlag(FLAGS_context);
  if (!context_flags.empty()) {
    std::vector<int> contexts;
    for (const std::string& c : context_flags) {
      int v = 0;
      if (!absl::SimpleAtoi(c, &v) || v <= 0 || v > model.max_context()) {
        return Fail(absl::InvalidArgumentError(absl::StrCat("--context ", c, " is not in [1, ",
                                                            model.max_context(), "]")));
      }
      contexts.push_back(v);
    }
    std::sort(contexts.begin(), contexts.end());
    int final_stage = -1;
    for (size_t i = 0; i < record.stages.size(); ++i) {
      if (record.stages[i].passed() || (gate_n <= 0 && record.stages[i].error.empty())) final_stage = static_cast<int>(i);
    }
    if (final_stage < 0) return Fail(absl::FailedPreconditionError("no stage to time at longer contexts"));
    const int n = absl::GetFlag(FLAGS_context_tokens);
    if (n < 1 || contexts.front() < record.prompt_tokens + n) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("every --context must be at least the prompt (",
                                                          record.prompt_tokens, ") + --context_tokens (", n, ")")));
    }
    dk::runtime::SessionOptions options;
    auto session = dk::runtime::CpuSession::Open(programs[final_stage], elfs[final_stage], *weights, options);
    if (!session.ok()) return Fail(session.status());
    dk::runtime::Decoder& decoder = (*session)->decoder();
    const auto& steps = programs[final_stage].steps();
    absl::StatusOr<dk::runtime::StepResult> step;
    for (uint32_t id : prompt) {
      step = decoder.Step(id);
      if (!step.ok()) return Fail(step.status());
    }
    const int64_t weight_bytes = record.stages[final_stage].weight_bytes_per_token;
    for (int c : contexts) {
      const std::string what = absl::StrCat(":", record.stages[final_stage].name, " filling the context to ", c);
      const int fill_from = decoder.position();
      while (decoder.position() < c - n) {
        step = decoder.Step(step->token);
        if (!step.ok()) return Fail(step.status());
        progress.Tick(what, decoder.position() - fill_from, c - n - fill_from);
      }
      progress.End();
      profile::ContextPoint point;
      point.context = c;
      point.tokens = n;
      point.bandwidth_gbps = dk::kernels::MeasureReadBandwidth(&pool, bw);
      std::vector<double> ms;
      double attention_ns = 0;
      while (decoder.position() < c) {
        const auto t0 = Clock::now();
        step = decoder.Step(step->token);
        ms.push_back(Ms(Clock::now() - t0));
        if (!step.ok()) return Fail(step.status());
        for (size_t k = 0; k < decoder.timings().size(); ++k) {
          const auto& st = steps[static_cast<int>(k)];
          if (st.has_host() && st.host().kind() == "attention") attention_ns += decoder.timings()[k].run_ns;
        }
      }
      point.median_ms = profile::Median(ms);
      point.attention_ms = attention_ns * 1e-6 / ms.size();
      point.x_floor = point.median_ms / (weight_bytes / (point.bandwidth_gbps * 1e9) * 1e3);
      progress.Line(absl::StrFormat("context %d: %.2f ms/token, attention %.2f ms (%.1f%%), %.2fx the floor", c,
                                    point.median_ms, point.attention_ms, 100 * point.attention_share(),
                                    point.x_floor));
      record.contexts.push_back(point);
    }
  }

  // The record.
  std::string build_path = absl::GetFlag(FLAGS_build_file);
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (build_path.empty() && workspace != nullptr) build_path = absl::StrCat(workspace, "/", record.package, "/BUILD");
  std::string build_text;
  if (!build_path.empty()) {
    auto text = ReadFile(UserPath(build_path));
    if (text.ok()) build_text = *text;
  }
  record.date = UtcNow();
  profile::Finalize(record, build_text);

  std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  if (out_dir.empty()) {
    if (workspace == nullptr) {
      return Fail(absl::FailedPreconditionError(
          "BUILD_WORKSPACE_DIRECTORY is not set (not under bazel run): pass --out_dir"));
    }
    out_dir = absl::StrCat(workspace, "/", record.package, "/docs/development_progress");
  } else {
    out_dir = UserPath(out_dir);
  }
  const std::string command = absl::StrCat("./bazelw run ", record.profile_label);
  const std::string table = profile::FormatTable(record);
  std::fprintf(absl::GetFlag(FLAGS_json) ? stderr : stdout, "\n%s", table.c_str());
  if (auto st = MakeDirs(out_dir); !st.ok()) return Fail(st);
  const std::string md = absl::StrCat(out_dir, "/phase5_decode.md");
  const std::string html = absl::StrCat(out_dir, "/phase5_decode.html");
  if (auto st = WriteFile(md, profile::Markdown(record, command)); !st.ok()) return Fail(st);
  if (auto st = WriteFile(html, profile::Html(record, command)); !st.ok()) return Fail(st);
  const std::string json = profile::ToJson(record);
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    if (auto st = WriteFile(UserPath(absl::GetFlag(FLAGS_json_out)), json + "\n"); !st.ok()) return Fail(st);
  }
  if (absl::GetFlag(FLAGS_json)) std::printf("%s\n", json.c_str());
  std::fprintf(stderr, "[profile] wrote %s and %s (%.0f s of measuring)\n", md.c_str(), html.c_str(), Since(t_start));
  if (absl::GetFlag(FLAGS_screenshot)) {
    const std::string png = absl::StrCat(out_dir, "/phase5_decode.png");
    const absl::Status st = Screenshot(html, png);
    std::fprintf(stderr, "[profile] %s\n", st.ok() ? absl::StrCat("wrote ", png).c_str()
                                                   : std::string(st.message()).c_str());
  }
  if (!record.reverted.empty()) return 3;
  if (!record.final_faster) return 4;
  return 0;
}
