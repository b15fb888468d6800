// The CPU backend: BOs are separate device allocations (a host-side copy and a
// device-side copy each, as XRT BOs), launch groups run on a device-side worker
// thread while the host waits, and kernels use the process's shared thread pool.
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

#include <memory>

#include "runtime/runtime.h"
#include "util/thread_pool.h"

namespace dk::runtime {

// `pool` runs the kernels' parallel loops (nullptr: SharedThreadPool()).
std::unique_ptr<Device> MakeCpuDevice(const DeviceOptions& options, ThreadPool* pool = nullptr);

// Host steps and load-time weight packing for the CPU backend.
struct CpuHostOptions {
  int max_context = 0;  // 0: the model's max_context
  ThreadPool* pool = nullptr;
};
// InvalidArgument for a model whose RoPE table cannot be built; ResourceExhausted
// when the KV cache does not fit in memory.
absl::StatusOr<std::unique_ptr<HostOps>> MakeCpuHostOps(const elf::ModelShape& model,
                                        const void* embedding_table,  // bf16 [vocab, hidden]
                                        const CpuHostOptions& options);

}  // namespace dk::runtime

#endif  // DK_RUNTIME_CPU_CPU_DEVICE_H_
