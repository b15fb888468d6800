// A decode session on the CPU backend: a decode ELF loaded with its weights on a
// CPU device, ready to Step. Used by the generate, verify and profile tools.
// Thread-safety: one thread drives a session; weights may be shared read-only.
#ifndef DK_RUNTIME_CPU_SESSION_H_
#define DK_RUNTIME_CPU_SESSION_H_

#include <algorithm>
#include <cstdint>
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
// else a checkpoint directory or a .gguf file. Loaded on `pool` (null: on the
// caller alone; weights/weights.h).
absl::StatusOr<weights::Weights> ReadWeightsSpec(const std::string& spec,
                                                const elf::ModelShape& model, ThreadPool* pool = nullptr);
// As ReadWeightsSpec, for a session of `program`: a GGUF's tensors that `program`
// reads only as the file's own blocks (GgufBlocksOnly) are loaded as blocks only,
// and the load is refused (ResourceExhausted, with the figures) before anything is
// allocated when EstimateSessionMemory exceeds the host's MemAvailable (`max_context`:
// SessionOptions::max_context, 0 the model's).
absl::StatusOr<weights::Weights> ReadWeightsSpec(const std::string& spec, const elf::Program& program,
                                                int max_context = 0, ThreadPool* pool = nullptr);

// The tensors every weight BO of `program` reads as the file's own blocks
// (blocks_as_stored), and in such a GGUF stage the embedding, unless a BO reads its
// bf16 (the host then dequantizes each row it embeds from the file's blocks).
weights::BlocksOnly GgufBlocksOnly(const elf::Program& program);

// What an OpenOwning session of `program` holds at its peak, by part: the weights as
// loaded (bf16, 2 bytes an element, but those `blocks_only` names), the weight BOs,
// the other BOs, and the KV cache (bf16 K and V for `max_context` positions, 0: the
// model's). Where every weight BO is STATIC the loaded values are freed tensor by
// tensor as the BOs fill (the larger of the two counts); else (a WRITE weight BO is
// rewritten from them every run) both are held.
struct SessionMemory {
  int64_t loaded_weights = 0, weight_bos = 0, other_bos = 0, kv_cache = 0;
  bool released = true;  // every weight BO STATIC
  int64_t total() const {
    return (released ? std::max(loaded_weights, weight_bos) : loaded_weights + weight_bos) + other_bos + kv_cache;
  }
};
SessionMemory EstimateSessionMemory(const elf::Program& program, const weights::BlocksOnly& blocks_only,
                                    int max_context = 0);
// ResourceExhausted naming the figures when `need` exceeds `available` bytes
// (`what`: the ELF, for the message).
absl::Status CheckSessionMemory(const SessionMemory& need, int64_t available, const std::string& what);
// /proc/meminfo's MemAvailable in bytes; -1 when it cannot be read.
int64_t MemAvailableBytes();

// ReadWeightsSpec's weights, to share read-only between sessions (Open).
absl::StatusOr<std::shared_ptr<const weights::Weights>> LoadWeightsSpec(
    const std::string& spec, const elf::ModelShape& model, ThreadPool* pool = nullptr);

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
  // The most tokens one Score takes, the LM head on each (Decoder::Options::score_rows;
  // 0: the program's draft check).
  int score_rows = 0;
  // The kernels' threads, device and host steps alike; must outlive the session and
  // serve no other session while this one runs. nullptr: the session makes a pool of
  // its own (ThreadPoolOptions' defaults), so that sessions share no threads.
  ThreadPool* pool = nullptr;
  CpuDeviceOptions cpu;        // how the device runs its launch groups
  // Batched decode (Decoder::StepBatch): KV caches for this many sequences, and the
  // most token rows one batched run takes (Decoder::Options::sequences, batch_rows).
  int sequences = 1;
  int batch_rows = 1;
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
  // With SessionOptions::pool null: the pool the device and host ops run on (declared
  // first, so that it outlives them).
  std::unique_ptr<ThreadPool> own_pool_;
  std::shared_ptr<const weights::Weights> weights_;
  std::unique_ptr<EmbeddingRows> embedding_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<HostOps> host_;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace dk::runtime

#endif  // DK_RUNTIME_CPU_SESSION_H_
