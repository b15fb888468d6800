// Decode ms/token of a decode ELF as a ratio to the memory-bandwidth floor, both
// measured in this process with the same threads and page size:
//   floor = bytes of weights read per token / read bandwidth (huge pages, as the
//           weight BOs use), measured right before the timed tokens.
//   ./bazelw run --config=opt //tools/bench:decode_bench_llama32_1b
// Each benchmark iteration is one decode token: --warmup untimed tokens from position 0,
// then --tokens timed ones; the context is reset every --context tokens (short context
// by default). tools/peer/ab.py runs it with --benchmark_format=json. x_floor is the median over tokens
// of (token time / floor at the bandwidth sampled just before it); floor_ms uses
// the median bandwidth sample. With --kernel_times it also prints, per kernel
// symbol, its share of the timed tokens and the GB/s of the weights it streams.
// With --paired_floor, each timed token also gets a floor of its own: a plain
// streaming read of as many bytes as the token's weights (same threads, huge pages)
// right before it and right after it; x_floor_paired is the median of token time /
// the mean of those two reads. A one-pass 256 MiB sample takes ~5 ms and the host's
// bandwidth state can change within one token, so the sampled floor can miss the
// state the token ran in; the paired floor brackets each token.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bandwidth_modes.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "benchmark/benchmark.h"
#include "elf/elf.h"
#include "kernels/bandwidth/bandwidth.h"
#include "elf/stats.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tools/flags/model_flags.h"
#include "tools/flags/runtime_flags.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/read_file.h"

ABSL_FLAG(std::string, elf, "", "decode ELF");
ABSL_FLAG(std::string, weights, "synthetic", "checkpoint dir, .gguf or synthetic[:SEED]");
ABSL_FLAG(int, context, 128, "positions before the KV cache is reset");
ABSL_FLAG(int, tokens, 128, "timed tokens (benchmark iterations) per thread count");
ABSL_FLAG(int, warmup, 8, "untimed tokens first, from position 0 (from --depth)");
ABSL_FLAG(int, depth, 0,
          "BM_Decode: prompt tokens fed first (Decoder::Feed, untimed; ids (1 + 7919 i) mod vocab, "
          "as --prompt_tokens), so that the warmup and timed tokens decode at positions depth.. "
          "(llama-bench -d); --context must cover depth + warmup + tokens");
ABSL_FLAG(int, bandwidth_every, 4,
          "sample the read bandwidth before every N-th timed token (untimed)");
ABSL_FLAG(int, prompt_tokens, 0,
          "> 0: time prompt processing instead of decode (BM_Prompt): each iteration starts a new "
          "sequence and feeds this many tokens in chunks of --prefill_chunk; reports tokens/s and the "
          "time to the first new token");
ABSL_FLAG(std::string, generate_prompt, "",
          "a file of prompt token ids (whitespace-separated): time generation instead of decode "
          "(BM_Generate): each iteration starts a new sequence, feeds the prompt and generates "
          "--generate_tokens greedy tokens (speculatively where the ELF says so); reports ms per "
          "generated token after the first and, for a speculative ELF, the drafts accepted");
ABSL_FLAG(int, generate_tokens, 64, "BM_Generate's new tokens per iteration");
ABSL_FLAG(int, prompts, 5, "BM_Prompt's timed prompts (iterations) per thread count, after one untimed");
ABSL_FLAG(bool, paired_floor, false,
          "also stream the token's weight bytes (a separate buffer) before every timed token and "
          "after the last (untimed): x_floor_paired, and split by that floor's bandwidth mode");

namespace {

struct Setup {
  std::unique_ptr<dk::ThreadPool> pool;
  std::unique_ptr<dk::runtime::CpuSession> session;
  int64_t weight_bytes = 0;
  double load_ms = 0;  // the weights read (by main for the first benchmark) + the session opened
};

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Loaded by main (bad weights fail before any benchmark); each benchmark's session
// takes them over (OpenOwning: the weights are then held once, in the BOs) and the
// next one loads them again.
std::optional<dk::weights::Weights> g_weights;
double g_weights_ms = 0;  // how long reading g_weights took
dk::elf::Program g_program;
std::string g_elf;           // --elf, or the stage --model built
std::string g_weights_spec;  // --weights, or the model file
dk::tools::RuntimeOptions g_runtime;  // the runtime flags; each benchmark sets its own thread count

// --kernel_times: each kernel symbol's share of the timed tokens and the read
// rate of the weights its launches stream (stderr; JSON output stays as it is).
void PrintKernelTimes(const std::vector<dk::runtime::KernelTime>& times, size_t tokens) {
  if (times.empty() || tokens == 0) return;
  int64_t total_ns = 0;
  for (const auto& t : times) total_ns += t.ns;
  std::fprintf(stderr, "%-40s %9s %10s %7s %12s %8s\n", "kernel symbol", "calls/tok", "ms/token", "share", "weights MB/tok",
               "GB/s");
  for (const auto& t : times) {
    const double ms = t.ns * 1e-6 / tokens;
    std::fprintf(stderr, "%-40s %9.1f %10.3f %6.1f%% %12.1f %8.1f\n", t.symbol.c_str(),
                 static_cast<double>(t.calls) / tokens, ms, total_ns ? 100.0 * t.ns / total_ns : 0.0,
                 t.weight_bytes / 1e6 / tokens, t.ns ? t.weight_bytes / static_cast<double>(t.ns) : 0.0);
  }
  std::fprintf(stderr, "%-40s %9s %10.3f (launches only: host steps, BO I/O and the hand-offs between runs are not in it)\n",
               "all launches", "", total_ns * 1e-6 / tokens);
}

// The session for one benchmark over `threads` threads, taking over the weights main
// loaded (or loading them again); null after SkipWithError.
std::unique_ptr<Setup> OpenSetup(benchmark::State& state, int threads) {
  auto s = std::make_unique<Setup>();
  dk::ThreadPoolOptions pool = g_runtime.pool;
  pool.num_threads = threads;
  s->pool = std::make_unique<dk::ThreadPool>(pool);
  dk::runtime::SessionOptions options;
  options.pool = s->pool.get();
  options.cpu = g_runtime.cpu;
  options.prefill_rows = g_runtime.prefill_rows;
  const auto t0 = std::chrono::steady_clock::now();
  if (!g_weights) {
    auto again = dk::runtime::ReadWeightsSpec(g_weights_spec, g_program, 0, &dk::SharedThreadPool());
    if (!again.ok()) {
      state.SkipWithError(std::string(again.status().message()).c_str());
      return nullptr;
    }
    g_weights = *std::move(again);
    g_weights_ms = MsSince(t0);
  }
  const auto t_open = std::chrono::steady_clock::now();
  auto session = dk::runtime::CpuSession::OpenOwning(g_program, g_elf, *std::move(g_weights), options);
  g_weights.reset();
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return nullptr;
  }
  s->session = *std::move(session);
  s->load_ms = g_weights_ms + MsSince(t_open);
  // Which GEMV variants each weight shape runs and why (--gemv_tune; the timing is in load_ms).
  const std::vector<std::string> choices = dk::runtime::CpuGemvChoices(s->session->device());
  if (!choices.empty()) {
    std::fprintf(stderr, "GEMV variants, %d threads: tuned in %.2f s when the session opened\n", threads,
                 dk::runtime::CpuGemvTuneSeconds(s->session->device()));
  }
  for (const std::string& line : choices) std::fprintf(stderr, "GEMV variant, %d threads: %s\n", threads, line.c_str());
  return s;
}

// What the timed tokens record: each token's time, the bandwidth samples (one before
// every --bandwidth_every tokens), the paired floors' read times (--paired_floor: the
// read of the token's weight bytes before token i, the last entry after the last
// token), and the decoder's step times summed over tokens.
struct TokenLog {
  std::vector<double> ms, bw_samples, stream_ms;
  double run_ms = 0, host_ms = 0, io_ms = 0;

  void AddStepTimes(const dk::runtime::Decoder& decoder) {
    const auto& steps = decoder.program().steps();
    for (size_t i = 0; i < decoder.timings().size(); ++i) {
      const auto& t = decoder.timings()[i];
      if (steps[static_cast<int>(i)].has_host()) {
        host_ms += t.run_ns * 1e-6;
      } else {
        run_ms += t.run_ns * 1e-6;
        io_ms += (t.write_ns + t.read_ns) * 1e-6;
      }
    }
  }
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --paired_floor's counters. Per token: its time over the mean read time of its bytes
// just before and just after it; "fast" and "slow" tokens split by the bandwidth modes
// of this run's own reads (bandwidth_modes.h; all "fast" when they form one mode,
// mode_split_GB/s 0).
void ReportPairedFloor(benchmark::State& state, const TokenLog& log, int64_t weight_bytes) {
  std::vector<double> all, ratios, pair_gbs;
  for (size_t i = 0; i < log.ms.size(); ++i) {
    const double floor = (log.stream_ms[i] + log.stream_ms[i + 1]) / 2;
    if (floor <= 0) continue;
    pair_gbs.push_back(weight_bytes / (floor * 1e-3) * 1e-9);
    ratios.push_back(log.ms[i] / floor);
  }
  const double split = dk::bench::ModeSplit(pair_gbs);
  std::vector<double> fast, slow;
  for (size_t i = 0; i < ratios.size(); ++i) (pair_gbs[i] >= split ? fast : slow).push_back(ratios[i]);
  state.counters["x_floor_paired"] = Median(ratios);
  state.counters["paired_bw_GB/s"] = Median(pair_gbs);
  state.counters["mode_split_GB/s"] = split;
  state.counters["x_floor_paired_fast"] = Median(fast);  // 0 when no token was fast
  state.counters["x_floor_paired_slow"] = Median(slow);  // 0 in a run of one mode
  state.counters["paired_fast_tokens"] = static_cast<double>(fast.size());
}

// The token times against the sampled floor, and their drift over the run.
void ReportFloor(benchmark::State& state, const TokenLog& log, int64_t weight_bytes, size_t every) {
  const std::vector<double>& ms = log.ms;
  // Each token against the bandwidth sample taken just before its block of `every`:
  // the ratio then follows the host's swings instead of averaging over them.
  std::vector<double> ratios;
  for (size_t i = 0; i < ms.size(); ++i) {
    ratios.push_back(ms[i] / (weight_bytes / (log.bw_samples[i / every] * 1e9) * 1e3));
  }
  std::sort(ratios.begin(), ratios.end());
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::vector<double> bw_samples = log.bw_samples;
  std::sort(bw_samples.begin(), bw_samples.end());
  const double gbs = bw_samples[bw_samples.size() / 2];
  const double floor_ms = weight_bytes / (gbs * 1e9) * 1e3;
  // Drift: median of the last quarter vs the first quarter of the tokens.
  auto quarter_median = [&](size_t begin) {
    std::vector<double> q(ms.begin() + begin, ms.begin() + begin + ms.size() / 4);
    std::sort(q.begin(), q.end());
    return q.empty() ? 0.0 : q[q.size() / 2];
  };
  const double first = quarter_median(0), last = quarter_median(ms.size() - ms.size() / 4);
  state.counters["ms_per_token"] = median;
  state.counters["floor_ms"] = floor_ms;
  state.counters["x_floor"] = ratios[ratios.size() / 2];  // median of per-token ratios
  state.counters["bw_GB/s"] = gbs;
  state.counters["bw_min"] = bw_samples.front();
  state.counters["bw_max"] = bw_samples.back();
  state.counters["weights_MB"] = weight_bytes / 1e6;
  state.counters["drift_pct"] = first > 0 ? 100.0 * (last - first) / first : 0.0;
  // The same drift after dividing out the bandwidth swings: x_floor of the last
  // quarter of the tokens vs the first quarter.
  auto quarter_ratio = [&](size_t begin) {
    std::vector<double> q;
    for (size_t i = begin; i < begin + ms.size() / 4; ++i) {
      q.push_back(ms[i] / (weight_bytes / (log.bw_samples[i / every] * 1e9) * 1e3));
    }
    std::sort(q.begin(), q.end());
    return q.empty() ? 0.0 : q[q.size() / 2];
  };
  const double r_first = quarter_ratio(0), r_last = quarter_ratio(ms.size() - ms.size() / 4);
  state.counters["x_floor_drift_pct"] = r_first > 0 ? 100.0 * (r_last - r_first) / r_first : 0.0;
}

void BM_Decode(benchmark::State& state) {
  std::unique_ptr<Setup> s = OpenSetup(state, static_cast<int>(state.range(0)));
  if (s == nullptr) return;
  dk::runtime::Decoder& decoder = s->session->decoder();
  const int context = absl::GetFlag(FLAGS_context);
  // --depth: the prompt first (its prefill time is reported, not timed as tokens).
  uint32_t token = 1;
  double depth_ms = 0;
  if (const int depth = absl::GetFlag(FLAGS_depth); depth > 0) {
    std::vector<uint32_t> prompt;
    const uint32_t vocab = static_cast<uint32_t>(g_program.model().vocab());
    for (int i = 0; i < depth; ++i) prompt.push_back((1 + 7919u * i) % vocab);
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status r = decoder.Feed(prompt); !r.ok()) {
      state.SkipWithError(std::string(r.message()).c_str());
      return;
    }
    depth_ms = MsSince(t0);
    token = decoder.last().token;
  }
  // Warm up: caches, page faults, the first positions. The first token's time after
  // the load (weights read + session open) is the load's "first token ready".
  double first_token_ms = 0;
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!decoder.Advance(token).ok()) break;
    if (i == 0) first_token_ms = MsSince(t0);
    token = decoder.last().token;
  }

  // Bandwidth swings from minute to minute on a shared host: sample it between
  // the timed tokens (one pass over 256 MiB, 8x the L3, every --bandwidth_every
  // tokens) and use the median sample.
  dk::kernels::BandwidthOptions bw;
  bw.page_mode = dk::PageMode::kHugePages;
  bw.bytes = size_t{256} << 20;
  bw.passes = 1;
  dk::kernels::MeasureReadBandwidth(s->pool.get(), bw);  // allocate and touch
  TokenLog log;
  const int64_t weight_bytes = dk::elf::WeightBytesPerToken(g_program);

  const size_t every = absl::GetFlag(FLAGS_bandwidth_every);
  const bool paired = absl::GetFlag(FLAGS_paired_floor);
  dk::kernels::BandwidthOptions pair_bw = bw;
  pair_bw.bytes = (static_cast<size_t>(weight_bytes) + (size_t{1} << 20) - 1) >> 20 << 20;
  auto stream = [&] {
    const double gbs = dk::kernels::MeasureReadBandwidth(s->pool.get(), pair_bw);
    log.stream_ms.push_back(gbs > 0 ? weight_bytes / (gbs * 1e9) * 1e3 : 0.0);
  };
  if (paired) dk::kernels::MeasureReadBandwidth(s->pool.get(), pair_bw);  // allocate and touch
  const dk::ThreadPool::Stats pool_before = s->pool->stats();
  dk::runtime::ResetCpuKernelTimes(s->session->device());  // the timed tokens only
  for (auto _ : state) {
    if (log.ms.size() % every == 0) {
      state.PauseTiming();
      log.bw_samples.push_back(dk::kernels::MeasureReadBandwidth(s->pool.get(), bw));
      state.ResumeTiming();
    }
    if (paired) {
      state.PauseTiming();
      stream();
      state.ResumeTiming();
    }
    if (decoder.position() >= context) decoder.Reset();
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status r = decoder.Advance(token);
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      state.SkipWithError(std::string(r.message()).c_str());
      return;
    }
    token = decoder.last().token;
    log.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    log.AddStepTimes(decoder);
  }
  PrintKernelTimes(dk::runtime::CpuKernelTimes(s->session->device()), log.ms.size());
  if (paired && !log.ms.empty()) {
    stream();  // after the last token
    ReportPairedFloor(state, log, weight_bytes);
  }
  ReportFloor(state, log, weight_bytes, every);
  const double tokens = static_cast<double>(log.ms.size());
  state.counters["device_runs_ms"] = log.run_ms / tokens;
  state.counters["host_steps_ms"] = log.host_ms / tokens;
  state.counters["bo_io_ms"] = log.io_ms / tokens;
  // The pool under contention (util/thread_pool.h): the share of its multi-task Runs
  // kept on the caller, and stalled Runs per token (both include the bandwidth samples).
  const dk::ThreadPool::Stats& pool_after = s->pool->stats();
  const double parallel = pool_after.parallel_runs - pool_before.parallel_runs;
  const double solo = pool_after.solo_runs - pool_before.solo_runs;
  state.counters["pool_solo_pct"] = parallel + solo > 0 ? 100.0 * solo / (parallel + solo) : 0.0;
  state.counters["pool_stalls_per_token"] = (pool_after.stalls - pool_before.stalls) / tokens;
  state.counters["load_ms"] = s->load_ms;
  state.counters["load_first_token_ms"] = s->load_ms + first_token_ms;  // without --depth's prefill
  state.counters["depth"] = absl::GetFlag(FLAGS_depth);
  state.counters["depth_prefill_ms"] = depth_ms;
  state.SetLabel(g_program.model().name());
}

// Prompt processing: each iteration is a new sequence fed --prompt_tokens tokens
// (Decoder::Feed, --prefill_chunk rows per run) up to the first new token's top-k.
void BM_Prompt(benchmark::State& state) {
  std::unique_ptr<Setup> s = OpenSetup(state, static_cast<int>(state.range(0)));
  if (s == nullptr) return;
  dk::runtime::Decoder& decoder = s->session->decoder();
  std::vector<uint32_t> prompt;
  const uint32_t vocab = static_cast<uint32_t>(g_program.model().vocab());
  for (int i = 0; i < absl::GetFlag(FLAGS_prompt_tokens); ++i) prompt.push_back((1 + 7919u * i) % vocab);
  auto feed = [&] {
    decoder.Reset();
    return decoder.Feed(prompt);
  };
  if (absl::Status r = feed(); !r.ok()) {  // untimed: page faults, first-touch of the row buffers
    state.SkipWithError(std::string(r.message()).c_str());
    return;
  }
  std::vector<double> ms;
  dk::runtime::ResetCpuKernelTimes(s->session->device());  // the timed prompts only
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status r = feed();
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      state.SkipWithError(std::string(r.message()).c_str());
      return;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  // --kernel_times: per prompt token.
  PrintKernelTimes(dk::runtime::CpuKernelTimes(s->session->device()), ms.size() * prompt.size());
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  state.counters["prompt_tokens"] = static_cast<double>(prompt.size());
  state.counters["ttft_ms"] = median;  // the prompt fed and the first new token chosen
  state.counters["tokens_per_s"] = prompt.size() / (median * 1e-3);
  state.counters["prefill_chunk"] = decoder.prefill_rows();
  state.SetLabel(g_program.model().name());
}

// Generation: a new sequence fed the --generate_prompt ids, then --generate_tokens
// greedy tokens through runtime::GenerateGreedy (draft checks for a speculative
// ELF); ms per generated token counts the tokens after the prompt's own choice.
void BM_Generate(benchmark::State& state) {
  std::unique_ptr<Setup> s = OpenSetup(state, static_cast<int>(state.range(0)));
  if (s == nullptr) return;
  dk::runtime::Decoder& decoder = s->session->decoder();
  std::vector<uint32_t> prompt;
  {
    absl::StatusOr<std::string> text =
        dk::ReadRegularFile(absl::GetFlag(FLAGS_generate_prompt), "--generate_prompt");
    if (!text.ok()) {
      state.SkipWithError(std::string(text.status().message()).c_str());
      return;
    }
    for (absl::string_view word : absl::StrSplit(*text, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
      uint32_t id = 0;
      if (!absl::SimpleAtoi(word, &id) || id >= decoder.program().model().vocab()) {
        state.SkipWithError(absl::StrCat("--generate_prompt: '", word,
                                         "' is not a token id of the model's vocabulary").c_str());
        return;
      }
      prompt.push_back(id);
    }
  }
  if (prompt.empty()) {
    state.SkipWithError("--generate_prompt: no token ids");
    return;
  }
  dk::runtime::GreedyOptions greedy;
  greedy.max_new_tokens = absl::GetFlag(FLAGS_generate_tokens);
  std::vector<double> ms_per_token;
  double checks = 0, drafted = 0, accepted = 0;
  if (auto warm = dk::runtime::GenerateGreedy(decoder, prompt, greedy, nullptr); !warm.ok()) {  // untimed
    state.SkipWithError(std::string(warm.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    auto run = dk::runtime::GenerateGreedy(decoder, prompt, greedy, nullptr);
    if (!run.ok()) {
      state.SkipWithError(std::string(run.status().message()).c_str());
      return;
    }
    double total = 0;
    for (double ms : run->token_ms) total += ms;
    ms_per_token.push_back(run->token_ms.empty() ? 0 : total / run->token_ms.size());
    checks += run->checks;
    drafted += run->drafted;
    accepted += run->accepted;
  }
  std::sort(ms_per_token.begin(), ms_per_token.end());
  state.counters["ms_per_token"] = ms_per_token[ms_per_token.size() / 2];
  state.counters["checks"] = checks;
  state.counters["acceptance"] = drafted > 0 ? accepted / drafted : 0;
  state.counters["tokens_per_check"] = checks > 0 ? (accepted + checks) / checks : 1;
  state.SetLabel(g_program.model().name());
}

int Fail(const absl::Status& s) { return dk::ExitWithError("decode_bench", s); }

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  // --model FILE: the model file alone; its chain's ELFs built (or cached), the stage
  // --stage names (default: the best its weights allow) benchmarked.
  auto model = dk::tools::ModelFromFlags("decode_bench", absl::GetFlag(FLAGS_elf), absl::GetFlag(FLAGS_weights), "");
  if (!model.ok()) return dk::ExitWithError("decode_bench", model.status(), dk::kExitUsage);
  g_elf = *model ? (*model)->elf : absl::GetFlag(FLAGS_elf);
  g_weights_spec = *model ? (*model)->weights : absl::GetFlag(FLAGS_weights);
  if (*model) benchmark::AddCustomContext("model", dk::chain::Describe((*model)->model, (*model)->elfs, (*model)->stage));
  for (const absl::Status& s :
       {dk::cli::RequireFlag("elf", g_elf),
        dk::cli::RequireRange("context", absl::GetFlag(FLAGS_context), 1, dk::elf::kMaxDimension),
        dk::cli::RequireRange("tokens", absl::GetFlag(FLAGS_tokens), 1, 1 << 20),
        dk::cli::RequireRange("warmup", absl::GetFlag(FLAGS_warmup), 0, 1 << 20),
        dk::cli::RequireRange("depth", absl::GetFlag(FLAGS_depth), 0, dk::elf::kMaxDimension),
        dk::cli::RequireRange("bandwidth_every", absl::GetFlag(FLAGS_bandwidth_every), 1, 1 << 20),
        dk::cli::RequireRange("prompt_tokens", absl::GetFlag(FLAGS_prompt_tokens), 0, dk::elf::kMaxDimension),
        dk::cli::RequireRange("prompts", absl::GetFlag(FLAGS_prompts), 1, 1 << 20)}) {
    if (!s.ok()) return dk::ExitWithError("decode_bench", s, dk::kExitUsage);
  }
  const std::string weights_spec = g_weights_spec;
  for (const absl::Status& s :
       {dk::cli::RequireFile("elf", g_elf),
        dk::cli::RequireWeightsSpec("weights", weights_spec)}) {
    if (!s.ok()) return Fail(s);
  }
  auto runtime = dk::tools::RuntimeOptionsFromFlags();
  if (!runtime.ok()) return dk::ExitWithError("decode_bench", runtime.status(), dk::kExitUsage);
  g_runtime = *runtime;
  // The pool options but the thread count, which each benchmark sets (its argument).
  benchmark::AddCustomContext("runtime_options", g_runtime.Describe());
  auto program = dk::elf::ReadElfFile(g_elf);
  if (!program.ok()) return Fail(program.status());
  g_program = *program;
  if (absl::GetFlag(FLAGS_prompt_tokens) > g_program.model().max_context()) {
    return dk::ExitWithError(
        "decode_bench",
        absl::InvalidArgumentError(absl::StrCat("--prompt_tokens ", absl::GetFlag(FLAGS_prompt_tokens),
                                                " exceeds the model's context of ",
                                                g_program.model().max_context(), " positions")),
        dk::kExitUsage);
  }
  if (absl::GetFlag(FLAGS_context) > g_program.model().max_context()) {
    return dk::ExitWithError(
        "decode_bench",
        absl::InvalidArgumentError(absl::StrCat("--context ", absl::GetFlag(FLAGS_context),
                                                " exceeds the model's KV cache of ",
                                                g_program.model().max_context(), " positions")),
        dk::kExitUsage);
  }
  if (const int depth = absl::GetFlag(FLAGS_depth);
      depth > 0 && static_cast<int64_t>(depth) + absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_tokens) >
                       absl::GetFlag(FLAGS_context)) {
    return dk::ExitWithError(
        "decode_bench",
        absl::InvalidArgumentError(absl::StrCat("--depth ", depth, " + --warmup + --tokens exceed --context ",
                                                absl::GetFlag(FLAGS_context),
                                                " (the timed tokens must decode after the depth, never reset)")),
        dk::kExitUsage);
  }
  const auto t_weights = std::chrono::steady_clock::now();
  auto weights = dk::runtime::ReadWeightsSpec(weights_spec, g_program, 0, &dk::SharedThreadPool());
  if (!weights.ok()) return Fail(weights.status());
  g_weights = *std::move(weights);
  g_weights_ms = MsSince(t_weights);
  // Registered here, not with BENCHMARK(), so that --tokens sets the iterations
  // (select one thread count with --benchmark_filter=BM_Decode/threads:2/).
  const bool prompt = absl::GetFlag(FLAGS_prompt_tokens) > 0;
  const bool generate = !absl::GetFlag(FLAGS_generate_prompt).empty();
  benchmark::RegisterBenchmark(generate ? "BM_Generate" : prompt ? "BM_Prompt" : "BM_Decode",
                               generate ? BM_Generate : prompt ? BM_Prompt : BM_Decode)
      ->ArgName("threads")
      ->Arg(1)
      ->Arg(2)
      ->Iterations(prompt || generate ? absl::GetFlag(FLAGS_prompts) : absl::GetFlag(FLAGS_tokens))
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return dk::kExitOk;
}
