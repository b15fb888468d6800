// The flags every tool that runs a decode shares (generate, verify, profile,
// decode_bench, diagnose): the thread pool, how the CPU device runs its launch
// groups, and the GEMV kernel variants. They replace environment variables: a tool
// reads them once, applies them before any kernel runs, and prints Describe() in its
// output or record, so every figure says which paths produced it.
#ifndef DK_TOOLS_FLAGS_RUNTIME_FLAGS_H_
#define DK_TOOLS_FLAGS_RUNTIME_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/cpu/session.h"
#include "util/thread_pool.h"

namespace dk::tools {

struct RuntimeOptions {
  ThreadPoolOptions pool;          // the shared pool's
  runtime::CpuDeviceOptions cpu;   // the sessions' devices' (SessionOptions::cpu)
  int prefill_rows = 0;            // the prompt chunk (SessionOptions::prefill_rows; 0: auto)

  // One line: "threads=2 worker_spin=16384 join_spin=1024 adaptive=1 host_spin=auto
  // device_thread=0 team_runs=1 kernel_times=0 gemv_bf16dot=1 gemv_vnni=1
  // gemv_prefetch=auto(off) gemv_tune=1 prefill_chunk=auto" (what auto resolved to on this CPU;
  // the chunk's auto is 512, or the context when shorter).
  std::string Describe() const;

  // A session of the tool: on the shared pool (the one ApplyRuntimeOptions configured
  // from `pool`), with `cpu` and `prefill_rows`; every other field at its default.
  runtime::SessionOptions Session() const;
};

// The flags' values; InvalidArgument naming the flag for a value out of range.
absl::StatusOr<RuntimeOptions> RuntimeOptionsFromFlags();

// Configures the shared thread pool; FailedPrecondition when it already runs with
// other options (apply before any kernel runs). The device options take effect
// through the sessions a tool opens with them.
absl::Status ApplyRuntimeOptions(const RuntimeOptions& options);

// RuntimeOptionsFromFlags then ApplyRuntimeOptions.
absl::StatusOr<RuntimeOptions> ApplyRuntimeFlags();

}  // namespace dk::tools

#endif  // DK_TOOLS_FLAGS_RUNTIME_FLAGS_H_
