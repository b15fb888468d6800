// For the repository's own tools (generate): what their shared runtime flags set
// beyond the public EngineOptions (the shared thread pool, the CPU device's options,
// BO-protocol validation). Not part of the public API.
#ifndef DECODEKIT_API_ENGINE_INTERNAL_H_
#define DECODEKIT_API_ENGINE_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cpu/cpu_device.h"
#include "util/thread_pool.h"

namespace decodekit {
class Engine;
class BatchEngine;
struct BatchOptions;
struct EngineOptions;
struct SamplingOptions;
}  // namespace decodekit

namespace dk::runtime {
class Decoder;
struct SamplingOptions;
}  // namespace dk::runtime

namespace dk::tokenizer {
class Tokenizer;
}  // namespace dk::tokenizer

namespace decodekit::internal {

struct ToolOptions {
  dk::ThreadPool* pool = nullptr;  // kernels' threads (nullptr: the engine's own, EngineOptions::threads)
  dk::runtime::CpuDeviceOptions cpu;
  bool validate = false;           // check the BO protocol while running
  // Batched decode (BatchEngine): KV caches for this many sequences, and the most token
  // rows one batched run takes (runtime::SessionOptions::sequences, batch_rows).
  int sequences = 1;
  int batch_rows = 1;
};

struct EngineAccess {
  static absl::StatusOr<std::unique_ptr<Engine>> Open(const EngineOptions& options, const ToolOptions& tool);
  // BatchEngine::Open with the tools' options (tool.sequences and batch_rows are set
  // from `batch`).
  static absl::StatusOr<std::unique_ptr<BatchEngine>> OpenBatch(const EngineOptions& options,
                                                                const BatchOptions& batch, ToolOptions tool);

  // The pieces of an Engine that BatchEngine's loop (api/batch.cc) calls, so that it
  // generates as Engine::Generate does: its decoder, its tokenizer, the stop ids Chat
  // adds (the chat format's end of turn), Generate's test for its greedy path and its
  // sampler's options.
  static dk::runtime::Decoder& Decoder(Engine& engine);
  static const dk::tokenizer::Tokenizer& Tokenizer(const Engine& engine);
  static absl::StatusOr<std::vector<uint32_t>> ChatStops(const Engine& engine);
  static bool IsGreedy(const SamplingOptions& sampling);
  static dk::runtime::SamplingOptions RuntimeSampling(const SamplingOptions& sampling);
};

}  // namespace decodekit::internal

#endif  // DECODEKIT_API_ENGINE_INTERNAL_H_
