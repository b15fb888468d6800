// For the repository's own tools (generate): what their shared runtime flags set
// beyond the public EngineOptions (the shared thread pool, the CPU device's options,
// BO-protocol validation). Not part of the public API.
#ifndef DECODEKIT_API_ENGINE_INTERNAL_H_
#define DECODEKIT_API_ENGINE_INTERNAL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/cpu/cpu_device.h"
#include "util/thread_pool.h"

namespace decodekit {
class Engine;
struct EngineOptions;
}  // namespace decodekit

namespace decodekit::internal {

struct ToolOptions {
  dk::ThreadPool* pool = nullptr;  // kernels' threads (nullptr: the engine's own, EngineOptions::threads)
  dk::runtime::CpuDeviceOptions cpu;
  bool validate = false;           // check the BO protocol while running
};

struct EngineAccess {
  static absl::StatusOr<std::unique_ptr<Engine>> Open(const EngineOptions& options, const ToolOptions& tool);
};

}  // namespace decodekit::internal

#endif  // DECODEKIT_API_ENGINE_INTERNAL_H_
