// Batched decode's throughput: aggregate generated tokens/s and per-sequence ms/token
// when N sequences step together (Decoder::StepBatch, one run of the program per step
// for all N rows) against one sequence stepped alone, on one stage.
//
//   ./bazelw run --config=opt //tools/bench:batch_bench -- \
//       --elf $PWD/bazel-bin/models/smollm2_135m/decode_gguf.elf --weights /path/to/model.gguf
//
// Each sequence is fed --prompt_tokens tokens, then every measurement times --steps
// decode steps from there (the positions go back after each, so every measurement
// attends over the same lengths). One round measures N = 1 and each N of --batches
// in turn (the order reversed every other round), after a read-bandwidth sample: the
// host's bandwidth swings between two modes minute to minute, so each round's ratio
// (N sequences' aggregate tokens/s over one sequence's, in that round) is reported
// with the round's bandwidth and mode (bandwidth_modes.h), and the medians over
// --rounds rounds. N = 1 runs through StepBatch too (one row; the same kernels as
// Decoder::Advance).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "kernels/bandwidth/bandwidth.h"
#include "runtime/cpu/session.h"
#include "tools/bench/bandwidth_modes.h"
#include "tools/flags/runtime_flags.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/thread_pool.h"

ABSL_FLAG(std::string, elf, "", "the decode ELF of the stage");
ABSL_FLAG(std::string, weights, "synthetic", "its weights: a .gguf, a checkpoint directory or synthetic[:SEED]");
ABSL_FLAG(std::vector<std::string>, batches, std::vector<std::string>({"2", "4", "8"}),
          "the batch sizes N measured against 1 (comma-separated, each 2..64)");
ABSL_FLAG(int, prompt_tokens, 64, "tokens fed to each sequence before the timed steps");
ABSL_FLAG(int, steps, 32, "timed decode steps per measurement");
ABSL_FLAG(int, rounds, 6, "rounds (each: N = 1 and every N of --batches, interleaved)");

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("batch_bench", s, code); }

// `steps` decode steps of sequences 0..n-1 from position `from`; the ms they took.
absl::StatusOr<double> Measure(dk::runtime::Decoder& d, int n, int from, int steps) {
  std::vector<dk::runtime::BatchRow> rows(n);
  std::vector<uint32_t> next(n, 1);
  const double t0 = NowMs();
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < n; ++i) rows[i] = {next[i], i, from + step};
    DK_RETURN_IF_ERROR(d.StepBatch(rows));
    dk::runtime::StepResult r;
    for (int i = 0; i < n; ++i) {
      DK_RETURN_IF_ERROR(d.ReadRow(i, &r));
      next[i] = r.token;
    }
  }
  return NowMs() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("batch_bench --elf DECODE.elf --weights W [--batches 2,4,8] [--rounds 6]");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  std::vector<int> batches;
  for (const std::string& b : absl::GetFlag(FLAGS_batches)) {
    int n = 0;
    if (!absl::SimpleAtoi(b, &n) || n < 2 || n > 64) {
      return Fail(absl::InvalidArgumentError("--batches: each N must be an integer in [2, 64], not \"" + b + "\""),
                  dk::kExitUsage);
    }
    batches.push_back(n);
  }
  const int prompt = absl::GetFlag(FLAGS_prompt_tokens), steps = absl::GetFlag(FLAGS_steps);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  for (const absl::Status& s :
       {dk::cli::RequireFlag("elf", absl::GetFlag(FLAGS_elf)), dk::cli::RequireRange("prompt_tokens", prompt, 1, 4096),
        dk::cli::RequireRange("steps", steps, 1, 4096), dk::cli::RequireRange("rounds", rounds, 1, 1000)}) {
    if (!s.ok()) return Fail(s, dk::kExitUsage);
  }
  if (batches.empty()) return Fail(absl::InvalidArgumentError("--batches is empty"), dk::kExitUsage);
  absl::StatusOr<dk::tools::RuntimeOptions> runtime = dk::tools::ApplyRuntimeFlags();
  if (!runtime.ok()) return Fail(runtime.status(), dk::kExitUsage);
  absl::StatusOr<dk::elf::Program> program = dk::elf::ReadElfFile(absl::GetFlag(FLAGS_elf));
  if (!program.ok()) return Fail(program.status());
  const int most = *std::max_element(batches.begin(), batches.end());
  const int context = prompt + steps + 1;
  std::fprintf(stderr, "[batch_bench] loading %s ...\n", absl::GetFlag(FLAGS_elf).c_str());
  absl::StatusOr<dk::weights::Weights> weights =
      dk::runtime::ReadWeightsSpec(absl::GetFlag(FLAGS_weights), *program, context, &dk::SharedThreadPool());
  if (!weights.ok()) return Fail(weights.status());
  dk::runtime::SessionOptions options = runtime->Session();
  options.max_context = context;
  options.sequences = most;
  options.batch_rows = std::max(most, 16);
  absl::StatusOr<std::unique_ptr<dk::runtime::CpuSession>> session =
      dk::runtime::CpuSession::OpenOwning(*program, absl::GetFlag(FLAGS_elf), *std::move(weights), options);
  if (!session.ok()) return Fail(session.status());
  dk::runtime::Decoder& d = (*session)->decoder();

  // Every sequence's prompt, 16 rows a step (each sequence a different text).
  for (int seq = 0; seq < most; ++seq) {
    for (int p = 0; p < prompt; p += 16) {
      std::vector<dk::runtime::BatchRow> rows;
      for (int i = p; i < std::min(prompt, p + 16); ++i) {
        rows.push_back({static_cast<uint32_t>((i * 7919 + seq * 104729 + 17) % program->model().vocab()), seq, i});
      }
      if (absl::Status s = d.StepBatch(rows); !s.ok()) return Fail(s);
    }
  }
  dk::kernels::BandwidthOptions bw;
  bw.page_mode = dk::PageMode::kHugePages;
  bw.bytes = size_t{256} << 20;
  bw.passes = 1;
  dk::kernels::MeasureReadBandwidth(&dk::SharedThreadPool(), bw);  // allocate and touch
  if (absl::StatusOr<double> warm = Measure(d, most, prompt, steps); !warm.ok()) return Fail(warm.status());

  std::vector<double> round_gbs;
  std::map<int, std::vector<double>> ms;  // N -> per-round ms of the steps
  for (int r = 0; r < rounds; ++r) {
    round_gbs.push_back(dk::kernels::MeasureReadBandwidth(&dk::SharedThreadPool(), bw));
    std::vector<int> order = {1};
    order.insert(order.end(), batches.begin(), batches.end());
    if (r % 2) std::reverse(order.begin(), order.end());
    for (int n : order) {
      absl::StatusOr<double> t = Measure(d, n, prompt, steps);
      if (!t.ok()) return Fail(t.status());
      ms[n].push_back(*t);
    }
  }
  const double split = dk::bench::ModeSplit(round_gbs);
  std::printf("batch_bench: %s, %s; %d prompt tokens, %d steps a measurement, %d rounds; runtime: %s\n",
              program->model().name().c_str(), absl::GetFlag(FLAGS_elf).c_str(), prompt, steps, rounds,
              runtime->Describe().c_str());
  std::printf("round  bandwidth_GB/s  mode  1: tok/s");
  for (int n : batches) std::printf("  %d: tok/s (x 1's)", n);
  std::printf("\n");
  std::map<int, std::vector<double>> ratios;
  for (int r = 0; r < rounds; ++r) {
    const double one = steps / (ms[1][r] * 1e-3);
    std::printf("%5d  %14.1f  %4s  %8.1f", r, round_gbs[r], split == 0 ? "one" : round_gbs[r] >= split ? "fast" : "slow",
                one);
    for (int n : batches) {
      const double agg = n * steps / (ms[n][r] * 1e-3);
      ratios[n].push_back(agg / one);
      std::printf("  %8.1f (%.2fx)", agg, agg / one);
    }
    std::printf("\n");
  }
  std::printf("median: 1 sequence %.1f tok/s, %.2f ms/token\n", Median([&] {
                std::vector<double> v;
                for (double t : ms[1]) v.push_back(steps / (t * 1e-3));
                return v;
              }()),
              Median(ms[1]) / steps);
  for (int n : batches) {
    std::vector<double> agg;
    for (double t : ms[n]) agg.push_back(n * steps / (t * 1e-3));
    std::printf("median: %d sequences %.1f tok/s aggregate (%.2fx one sequence's, median of the rounds' ratios), "
                "%.2f ms/token per sequence\n",
                n, Median(agg), Median(ratios[n]), Median(ms[n]) / steps);
  }
  std::printf("mode split: %s\n", split == 0 ? "none (one mode)" : absl::StrCat(split, " GB/s").c_str());
  return dk::kExitOk;
}
