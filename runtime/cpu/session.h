// A decode session on the CPU backend: a decode ELF loaded with its weights on a
// CPU device, ready to Step. Used by the generate, verify and profile tools.
// Thread-safety: one thread drives a session; weights may be shared read-only.
#ifndef DK_RUNTIME_CPU_SESSION_H_
#define DK_RUNTIME_CPU_SESSION_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/decoder.h"
#include "runtime/runtime.h"
#include "util/thread_pool.h"
#include "weights/weights.h"

namespace dk::runtime {

// "synthetic" or "synthetic:SEED" for synthetic weights of the ELF's model shape;
// else a checkpoint directory or a .gguf file.
absl::StatusOr<std::shared_ptr<const weights::Weights>> LoadWeightsSpec(
    const std::string& spec, const elf::ModelShape& model);

// Test only (tests/mutations): given the CPU host ops a session built and the
// program's model, returns the host ops the session uses instead (a wrapper that
// breaks them on purpose). Null: the CPU host ops as built.
using HostOpsWrapper =
    std::function<std::unique_ptr<HostOps>(std::unique_ptr<HostOps>, const elf::ModelShape&)>;

struct SessionOptions {
  bool validate = false;       // check the BO protocol
  int max_context = 0;         // 0: the model's
  ThreadPool* pool = nullptr;  // kernels' threads (nullptr: SharedThreadPool())
  HostOpsWrapper wrap_host;    // test only, see above
};

class CpuSession {
 public:
  static absl::StatusOr<std::unique_ptr<CpuSession>> Open(
      const elf::Program& program, const std::string& elf_name,
      std::shared_ptr<const weights::Weights> weights, const SessionOptions& options = {});

  Decoder& decoder() { return *decoder_; }
  Device& device() { return *device_; }

 private:
  std::shared_ptr<const weights::Weights> weights_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<HostOps> host_;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace dk::runtime

#endif  // DK_RUNTIME_CPU_SESSION_H_
