// A decode session on the CPU backend: a decode ELF loaded with its weights on a
// CPU device, ready to Step. Used by the generate, verify and profile tools.
// Thread-safety: one thread drives a session; weights may be shared read-only.
#ifndef DK_RUNTIME_CPU_SESSION_H_
#define DK_RUNTIME_CPU_SESSION_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/decoder.h"
#include "runtime/runtime.h"
#include "util/thread_pool.h"
#include "weights/weights.h"

namespace dk::runtime {

// "synthetic" or "synthetic:SEED" for synthetic weights of the ELF's model shape;
// else a checkpoint directory or a .gguf file.
absl::StatusOr<weights::Weights> ReadWeightsSpec(const std::string& spec,
                                                const elf::ModelShape& model);
// ReadWeightsSpec's weights, to share read-only between sessions (Open).
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
  // The most prompt tokens one run processes (Decoder::Options::prefill_rows; 0:
  // kDefaultPrefillRows or the context).
  int prefill_rows = 0;
  ThreadPool* pool = nullptr;  // kernels' threads (nullptr: SharedThreadPool())
  CpuDeviceOptions cpu;        // how the device runs its launch groups
  HostOpsWrapper wrap_host;    // test only, see above
};

class CpuSession {
 public:
  static absl::StatusOr<std::unique_ptr<CpuSession>> Open(
      const elf::Program& program, const std::string& elf_name,
      std::shared_ptr<const weights::Weights> weights, const SessionOptions& options = {});
  // As Open, but the session owns `weights` and frees each tensor's bf16 data as soon
  // as the tensor is in its BOs (Decoder::Options::weight_placed), keeping only what
  // the decode still reads: the embedding table and the tensors WRITE BOs are
  // rewritten from. The weights are then held once (in the BOs), not twice.
  static absl::StatusOr<std::unique_ptr<CpuSession>> OpenOwning(
      const elf::Program& program, const std::string& elf_name, weights::Weights weights,
      const SessionOptions& options = {});

  // Bytes of tensor data OpenOwning freed (0 after Open). With tied embeddings in
  // bf16 BOs the embedding table goes too: the host reads its rows from the LM head's
  // BOs (EmbeddingRows::UseBos).
  int64_t released_bytes() const { return released_bytes_; }
  bool embedding_reads_bos() const { return embedding_->reads_bos(); }

  Decoder& decoder() { return *decoder_; }
  Device& device() { return *device_; }

 private:
  // `releasable`: the same object as *weights when the session owns it (OpenOwning).
  static absl::StatusOr<std::unique_ptr<CpuSession>> OpenImpl(
      const elf::Program& program, const std::string& elf_name,
      std::shared_ptr<const weights::Weights> weights, weights::Weights* releasable,
      const SessionOptions& options);

  int64_t released_bytes_ = 0;
  std::shared_ptr<const weights::Weights> weights_;
  std::unique_ptr<EmbeddingRows> embedding_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<HostOps> host_;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace dk::runtime

#endif  // DK_RUNTIME_CPU_SESSION_H_
