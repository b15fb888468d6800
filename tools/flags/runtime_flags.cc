#include "tools/flags/runtime_flags.h"

#include <cstdlib>
#include <limits>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/cli.h"

ABSL_FLAG(int, threads, 0, "kernel threads, counting the caller (0: one per hardware thread)");
ABSL_FLAG(bool, pool_adaptive, true,
          "let the thread pool run kernels on the caller alone while the host is contended");
ABSL_FLAG(int, pool_spin, 1 << 14, "iterations a pool worker spins for the next job before it sleeps");
ABSL_FLAG(int, pool_join_spin, 1 << 10,
          "iterations the caller spins for other threads' tasks before it sleeps");
ABSL_FLAG(int, host_spin, -1,
          "iterations the host spins for a run to finish before it blocks (-1: 20000 when the pool "
          "leaves a hardware thread free, else 0)");
ABSL_FLAG(bool, device_thread, false, "run launch groups on a device-side thread (XRT's shape)");
ABSL_FLAG(bool, team_runs, true, "run a launch group as one team run of the pool where it can");
ABSL_FLAG(bool, kernel_times, false, "time each kernel symbol's launches (decode_bench prints them)");
ABSL_FLAG(bool, gemv_bf16dot, true,
          "bf16 GEMVs use vdpbf16ps where the CPU has AVX512_BF16 (false: the widening loop, other bits)");
ABSL_FLAG(bool, gemv_vnni, true,
          "quantized GEMVs use vpdpbusd where the CPU has AVX512-VNNI or AVX-VNNI (false: Highway int8, other "
          "bits)");
ABSL_FLAG(std::string, prefill_chunk, "auto",
          "prompt tokens one run of the decode program processes (the batched prefill): a number from 1 "
          "(one at a time) to the model's context, or auto (512, fewer when the context is shorter or a "
          "chunk's activation buffers would pass 256 MiB). Changes speed and memory, never the tokens");
ABSL_FLAG(std::string, gemv_prefetch, "auto",
          "software prefetch in the packed bf16 GEMVs: auto (on for Intel CPUs), on or off");
ABSL_FLAG(bool, gemv_tune, true,
          "time each GEMV weight shape's kernel variants that compute the same bits (software prefetch on / "
          "off) when a program loads and run the fastest (about a second for a 1B model, nothing when "
          "cached; never changes a token); --gemv_prefetch=on/off then forces it. false: the variants exactly "
          "as the flags say");
ABSL_FLAG(std::string, gemv_tune_cache, "",
          "directory of the GEMV tuning cache (default: $XDG_CACHE_HOME/decodekit/gemv_tune or "
          "~/.cache/decodekit/gemv_tune; none: no cache)");

namespace dk::tools {

runtime::SessionOptions RuntimeOptions::Session() const {
  runtime::SessionOptions s;
  s.pool = &SharedThreadPool();
  s.cpu = cpu;
  s.prefill_rows = prefill_rows;
  return s;
}

std::string RuntimeOptions::Describe() const {
  return absl::StrCat(pool.Describe(), " ", cpu.Describe(), " prefill_chunk=",
                      prefill_rows > 0 ? absl::StrCat(prefill_rows) : std::string("auto"));
}

absl::StatusOr<RuntimeOptions> RuntimeOptionsFromFlags() {
  RuntimeOptions o;
  o.pool.num_threads = absl::GetFlag(FLAGS_threads);
  o.pool.worker_spin = absl::GetFlag(FLAGS_pool_spin);
  o.pool.join_spin = absl::GetFlag(FLAGS_pool_join_spin);
  o.pool.contention.enabled = absl::GetFlag(FLAGS_pool_adaptive);
  o.cpu.host_spin = absl::GetFlag(FLAGS_host_spin);
  o.cpu.device_thread = absl::GetFlag(FLAGS_device_thread);
  o.cpu.team_runs = absl::GetFlag(FLAGS_team_runs);
  o.cpu.kernel_times = absl::GetFlag(FLAGS_kernel_times);
  o.cpu.gemv_bf16dot = absl::GetFlag(FLAGS_gemv_bf16dot);
  o.cpu.gemv_vnni = absl::GetFlag(FLAGS_gemv_vnni);
  o.cpu.gemv_tune = absl::GetFlag(FLAGS_gemv_tune);
  o.cpu.gemv_tune_cache = absl::GetFlag(FLAGS_gemv_tune_cache);
  if (o.cpu.gemv_tune_cache.empty()) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg != nullptr && xdg[0] == '/') {
      o.cpu.gemv_tune_cache = absl::StrCat(xdg, "/decodekit/gemv_tune");
    } else if (home != nullptr && home[0] != '\0') {
      o.cpu.gemv_tune_cache = absl::StrCat(home, "/.cache/decodekit/gemv_tune");
    }
  } else if (o.cpu.gemv_tune_cache == "none") {
    o.cpu.gemv_tune_cache.clear();
  }
  const std::string chunk = absl::GetFlag(FLAGS_prefill_chunk);
  if (chunk != "auto" && (!absl::SimpleAtoi(chunk, &o.prefill_rows) || o.prefill_rows < 1 || o.prefill_rows > 65536)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefill_chunk=", chunk, ": expected auto or a number of prompt tokens in [1, 65536]"));
  }
  const std::string prefetch = absl::GetFlag(FLAGS_gemv_prefetch);
  constexpr int kMax = std::numeric_limits<int>::max();
  for (const absl::Status& s : {cli::RequireRange("threads", o.pool.num_threads, 0, 1024),
                                cli::RequireRange("pool_spin", o.pool.worker_spin, 0, kMax),
                                cli::RequireRange("pool_join_spin", o.pool.join_spin, 0, kMax),
                                cli::RequireRange("host_spin", o.cpu.host_spin, -1, kMax)}) {
    if (!s.ok()) return s;
  }
  using Prefetch = runtime::CpuDeviceOptions::Prefetch;
  if (prefetch == "auto") {
    o.cpu.gemv_prefetch = Prefetch::kAuto;
  } else if (prefetch == "on" || prefetch == "off") {
    o.cpu.gemv_prefetch = prefetch == "on" ? Prefetch::kOn : Prefetch::kOff;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--gemv_prefetch=", prefetch, ": expected auto, on or off"));
  }
  return o;
}

absl::Status ApplyRuntimeOptions(const RuntimeOptions& options) {
  if (!ConfigureSharedThreadPool(options.pool)) {
    return absl::FailedPreconditionError(absl::StrCat("the shared thread pool already runs with ",
                                                      SharedThreadPool().options().Describe(), ", not ",
                                                      options.pool.Describe()));
  }
  return absl::OkStatus();
}

absl::StatusOr<RuntimeOptions> ApplyRuntimeFlags() {
  absl::StatusOr<RuntimeOptions> options = RuntimeOptionsFromFlags();
  if (!options.ok()) return options.status();
  if (absl::Status s = ApplyRuntimeOptions(*options); !s.ok()) return s;
  return options;
}

}  // namespace dk::tools
