// The CPU backend: BOs are separate device allocations (a host-side copy and a
// device-side copy each, as XRT BOs), a started launch group runs to completion
// on the host thread inside Start (Wait then returns its status; with
// CpuDeviceOptions::device_thread it runs on a device-side thread while the host
// waits, as XRT's asynchronous runs do), and kernels use the thread pool it is given.
// The rooms: cpu_bo.h (BO memory and the protocol checks), cpu_kernels.h (the kernel
// table), this device (load, start, wait), host_ops.cc (the host steps).
// In validation mode every BO access is checked against the BO protocol and the
// first violation is reported with the ELF, group, launch and BO names:
//  * a launch reads a BO the host wrote but never synced to the device;
//  * a launch reads an INTERMEDIATE BO no launch has written yet;
//  * a launch reads a BO nobody ever wrote;
//  * the host rewrites a STATIC BO after a launch used it;
//  * the host writes, reads or syncs an INTERMEDIATE BO;
//  * the host reads a BO back without syncing it from the device after a launch
//    wrote it.
// Thread-safety: one host thread drives a CpuDevice.
#ifndef DK_RUNTIME_CPU_CPU_DEVICE_H_
#define DK_RUNTIME_CPU_CPU_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "kernels/gemv/gemv_variants.h"

#include "runtime/runtime.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::runtime {

// How the CPU device runs launch groups; tools set it from their flags
// (//tools/flags:runtime_flags) and print Describe() in their records.
struct CpuDeviceOptions {
  // Iterations the waiting host (and the idle device thread) spin before blocking;
  // -1: 20000 when the pool leaves a hardware thread free, else 0 (a spinning thread
  // must not take a core the kernels need).
  int host_spin = -1;
  // Run groups on a device-side thread the host hands each run to (XRT's shape)
  // instead of inline in Start: the decoder waits for every run right after starting
  // it, so the thread only adds two hand-offs per run.
  bool device_thread = false;
  // Run a group as one team run of the pool where its kernels allow it (one job and
  // one barrier per launch instead of a job per launch).
  bool team_runs = true;
  // Time each kernel symbol's launches (CpuKernelTimes).
  bool kernel_times = false;
  // GEMV kernel variants (kernels/gemv/gemv_variants.h), this device's alone: its
  // launches pass them to the kernels, other devices in the process keep theirs.
  bool gemv_bf16dot = true;  // vdpbf16ps where the CPU has AVX512_BF16
  bool gemv_vnni = true;     // vpdpbusd where the CPU has AVX512-VNNI or AVX-VNNI
  enum class Prefetch { kAuto, kOn, kOff };
  Prefetch gemv_prefetch = Prefetch::kAuto;  // kAuto: on for Intel CPUs (kernels/gemv/gemv_variants.h)
  // Choose each GEMV weight shape's variants by timing them when a program loads
  // (runtime/cpu/gemv_tuner.h) instead of taking the fields above as they are. The
  // fields then say what is forced: gemv_bf16dot / gemv_vnni false and gemv_prefetch
  // kOn / kOff fix that variant, true and kAuto leave it to the measurement. Off by
  // default here, so that tests do not depend on wall time; tools turn it on
  // (--gemv_tune). Only variants that give the default's bits are timed (prefetch on /
  // off); gemv_bf16dot and gemv_vnni change bits and are taken as given.
  bool gemv_tune = false;
  std::string gemv_tune_cache;  // cache directory of the timings ("": none)
  std::function<int64_t()> gemv_tune_clock;  // the tuner's clock (null: steady_clock)
  // Tests: called after each pass the tuner times, with the shape's rows and cols and
  // the pass's variants (so that a fake clock can make one variant slow).
  std::function<void(int64_t rows, int64_t cols, const kernels::GemvVariants&)> gemv_tune_pass_done;

  // "host_spin=auto device_thread=0 team_runs=1 kernel_times=0 gemv_bf16dot=1
  // gemv_vnni=1 gemv_prefetch=auto(off) gemv_tune=0" (what auto resolved to on this
  // CPU; with gemv_tune=1 the device's description says what was measured).
  std::string Describe() const;
};

// `pool` runs the kernels' parallel loops; it must outlive the device, and only one
// device or host ops may run on it at a time (ThreadPool::Run has one caller at a
// time). nullptr: the device makes a pool of its own (ThreadPoolOptions' defaults),
// so that devices made on different threads share no threads and no state.
std::unique_ptr<Device> MakeCpuDevice(const DeviceOptions& options, ThreadPool* pool = nullptr,
                                      const CpuDeviceOptions& cpu = {});

// The device side of a BO this CPU device allocated (nullptr for any other BO): the
// bytes its launches read. For the host to read a STATIC BO after SyncToDevice only.
const uint8_t* CpuBoDeviceBytes(const BufferObject& bo);

// Time in each kernel symbol's launches on a CPU device made with
// CpuDeviceOptions::kernel_times (otherwise, or for another device, none):
// summed since the device was made or last reset, with the weight bytes those
// launches streamed (elf::X12StreamedBytes of their weight BOs). For profiling
// tools (decode_bench); read it between runs, never while one is in flight.
struct KernelTime {
  std::string symbol;
  int64_t calls = 0;
  int64_t ns = 0;
  int64_t weight_bytes = 0;
};
std::vector<KernelTime> CpuKernelTimes(const Device& device);
void ResetCpuKernelTimes(Device& device);

// The GEMV variants a CPU device runs its launches with when not tuned (for another
// device, the kernels' defaults).
kernels::GemvVariants CpuGemvVariants(const Device& device);

// With CpuDeviceOptions::gemv_tune, one line per GEMV weight shape of the programs the
// device loaded, saying which variants it runs and why ("q8_0 8192x2048: no-vnni,
// measured 1.210 ms vs vnni 2.050 ms (default vnni)"); none otherwise. The device's
// description() ends with them.
std::vector<std::string> CpuGemvChoices(const Device& device);
// The wall time that tuning took on this device, cache reads included (0 without gemv_tune).
double CpuGemvTuneSeconds(const Device& device);

// The variants of each GEMV launch of a loaded ELF, in launch order (a CPU device's ELF
// only; for tests and tools).
std::vector<kernels::GemvVariants> CpuLaunchGemvVariants(const LoadedElf& elf);

// Where the CPU host's embedding step reads a token's row: a row-major bf16 [vocab,
// hidden] table, or, once the weights are in their BOs, the BOs of this CPU device
// that hold the same rows (a tied LM head's weight BOs, row-major, packed_panel_v1
// or packed_panel_x12_v1), so that the table itself can be freed and the weights are held
// once. Thread-safety: set up before decoding; Read is then const.
class EmbeddingRows {
 public:
  EmbeddingRows(const bf16* table, int64_t vocab, int64_t hidden)
      : table_(table), vocab_(vocab), hidden_(hidden) {}
  // Rows made on demand by `rows` (row id, out: hidden elements), e.g. dequantized
  // from a GGUF's blocks, instead of a bf16 table.
  using RowFn = std::function<void(int64_t row, bf16* out)>;
  EmbeddingRows(RowFn rows, int64_t vocab, int64_t hidden)
      : table_(nullptr), vocab_(vocab), hidden_(hidden), row_fn_(std::move(rows)) {}

  // OK when the BOs of `program` that hold rows of weight tensor `tensor` are STATIC
  // bf16 BOs holding every row of the vocabulary exactly once, in layouts Read
  // reads; else FailedPrecondition saying why. Needs no BOs yet (decide before
  // placing the weights whether the table will be needed afterwards).
  absl::Status CanUseBos(const elf::Program& program, const std::string& tensor) const;
  // Reads the rows from those BOs (bos[i] is program.bos(i), already written and
  // synced, allocated by this CPU device) instead of the table; an error, and
  // nothing changes, where CanUseBos is not OK.
  absl::Status UseBos(const elf::Program& program, const std::vector<BufferObject*>& bos,
                      const std::string& tensor);
  bool reads_bos() const { return !parts_.empty(); }

  // out = row `id` (hidden elements); InvalidArgument for an id outside the vocabulary.
  absl::Status Read(uint32_t id, bf16* out) const;

 private:
  struct Part {
    int64_t begin = 0, end = 0;  // vocabulary rows [begin, end)
    const uint8_t* data = nullptr;
    bool packed = false;  // packed_panel_v1
    bool x12 = false;     // packed_panel_x12_v1; neither: row-major
  };
  // The parts CanUseBos / UseBos read (data only with `bos`).
  absl::StatusOr<std::vector<Part>> Parts(const elf::Program& program, const std::vector<BufferObject*>* bos,
                                          const std::string& tensor) const;
  const bf16* table_;
  int64_t vocab_, hidden_;
  RowFn row_fn_;             // set: rows from it, not from table_
  std::vector<Part> parts_;  // by begin
};

// Host steps and load-time weight packing for the CPU backend.
struct CpuHostOptions {
  int max_context = 0;  // 0: the model's max_context
  // The attention kernels' threads; required (InvalidArgument when null). A session
  // passes its device's pool: the device and the host steps run one after the other,
  // never at once.
  ThreadPool* pool = nullptr;
  int sequences = 1;    // KV caches held, one per sequence of a batched run (>= 1)
};
// InvalidArgument for a model whose RoPE table cannot be built; ResourceExhausted
// when the KV cache does not fit in memory.
// `embedding` must outlive the host ops.
absl::StatusOr<std::unique_ptr<HostOps>> MakeCpuHostOps(const elf::ModelShape& model,
                                                        const EmbeddingRows* embedding,
                                                        const CpuHostOptions& options);

}  // namespace dk::runtime

#endif  // DK_RUNTIME_CPU_CPU_DEVICE_H_
