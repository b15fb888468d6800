// Model weights in memory: bf16 tensors under their HuggingFace names
// ("model.layers.3.self_attn.q_proj.weight", shape [out, in] as in PyTorch), from
// an HF checkpoint directory, a GGUF file, or deterministic synthetic values.
//
// Every loader converts to bf16 exactly as PyTorch would (f32 -> bf16 round to
// nearest even; quantized GGUF blocks dequantized to f32 first) and maps GGUF names
// and layouts to HF ones (including undoing the Q/K row permutation GGUF applies
// for interleaved RoPE), so the runtime and the HF reference see identical values.
// Errors name the tensor and the file.
//
// Thread-safety: a Weights object is immutable once loaded; concurrent reads are safe.
#ifndef DK_WEIGHTS_WEIGHTS_H_
#define DK_WEIGHTS_WEIGHTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "elf/program.pb.h"
#include "util/aligned_buffer.h"
#include "util/thread_pool.h"
#include "util/bf16.h"

namespace dk::weights {

// A 2-D tensor's own blocks in the weights file, when the file stores it in one of
// the block formats the GEMV kernels read (a GGUF's Q8_0, Q4_0 and Q4_1 tensors):
// what quantize_weights' "gguf" scheme reads instead of quantizing the bf16 values
// again (elf BufferObject.blocks_as_stored). The bf16 data is these blocks
// dequantized, so both describe the same values.
struct StoredBlocks {
  elf::BlockFormat format = elf::BLOCK_FORMAT_NONE;  // NONE: stored as plain elements
  const uint8_t* data = nullptr;  // rows x row_bytes in the file's row order (the mapped file)
  size_t row_bytes = 0;
  int64_t qk_heads = 0;  // > 0: the file's rows are GGUF's Q/K permutation over this many heads
};

struct Tensor {
  std::vector<int64_t> shape;  // PyTorch order, e.g. [out_features, in_features]
  AlignedBuffer<bf16> data;    // row-major, numel() elements
  StoredBlocks stored;         // valid while the Weights holding this tensor lives
  int64_t numel() const;
  bool rows_released = false;  // Weights::ReleaseRows dropped some of `data`'s pages
  // False once Weights::ReleaseData or ReleaseRows dropped (some of) `data` (the
  // shape and `stored` stay).
  bool has_data() const { return !rows_released && static_cast<int64_t>(data.size()) == numel(); }
};

// Copies HF rows [begin, end) of `t`'s stored blocks, in HF row order, to `out`
// ((end - begin) * t.stored.row_bytes bytes). FailedPrecondition when `t` has none,
// OutOfRange for rows outside the tensor.
absl::Status CopyStoredRows(const Tensor& t, int64_t begin, int64_t end, uint8_t* out);

class Weights {
 public:
  // Where the weights came from, for messages ("synthetic(seed=1)", a path).
  const std::string& source() const { return source_; }
  void set_source(std::string s) { source_ = std::move(s); }

  // The model shape the weights describe (from config.json, GGUF metadata, or the
  // shape the synthetic weights were made for).
  const elf::ModelShape& shape() const { return shape_; }
  void set_shape(elf::ModelShape s) { shape_ = std::move(s); }

  void Add(std::string name, Tensor tensor);
  const Tensor* Find(absl::string_view name) const;
  // The tensor, checked against `expected_shape`: NotFound / InvalidArgument
  // naming the tensor, both shapes and source() otherwise.
  absl::StatusOr<const Tensor*> Get(absl::string_view name,
                                    const std::vector<int64_t>& expected_shape) const;
  // Names in sorted order.
  std::vector<std::string> Names() const;
  size_t size() const { return tensors_.size(); }
  int64_t total_bytes() const;

  // "sha256:<hex>" over every tensor in sorted name order: the name's bytes, a NUL,
  // the rank as u32 LE, each dim as i64 LE, then the bf16 data (LE). The HF
  // reference tooling computes the same over the state dict it runs, so goldens and
  // runs can prove they use the same weights. Every tensor must have its data
  // (checked: a digest without it would not describe the weights).
  std::string Digest() const;

  // Frees tensor `name`'s bf16 data (its shape and stored blocks stay), for a
  // caller that has copied it where it is used (a decode session's weight BOs) and
  // owns these weights alone; returns the bytes freed (0 for an unknown name or one
  // already released). Digest() and anything reading `data` must not run after.
  int64_t ReleaseData(absl::string_view name);
  // As ReleaseData, for the whole memory pages inside rows [begin, end) of a 2-D
  // tensor only (they read as zeros afterwards): for a tensor copied out part by
  // part, so that it is never held twice in full. Returns the bytes given back.
  int64_t ReleaseRows(absl::string_view name, int64_t begin, int64_t end);

  // Keeps `backing` (the mapped file that StoredBlocks point into) alive as long as
  // these weights.
  void Retain(std::shared_ptr<const void> backing) { backing_.push_back(std::move(backing)); }

 private:
  std::vector<std::shared_ptr<const void>> backing_;
  std::string source_;
  elf::ModelShape shape_;
  std::map<std::string, Tensor> tensors_;
};

// The tensors a model of `shape` needs in its HF family's names, with their shapes
// (lm_head.weight only when embeddings are not tied; the q/k/v biases only with
// attention_bias).
std::vector<std::pair<std::string, std::vector<int64_t>>> ExpectedTensors(
    const elf::ModelShape& shape);

// OK if `w` has every expected tensor of `shape` with the expected shape; else an
// error naming the first missing or mis-shaped tensor.
absl::Status CheckWeights(const Weights& w, const elf::ModelShape& shape);

// The model shape an HF config.json (`json_text`, read from `file`, used in messages)
// describes; `name` becomes ModelShape.name. Reads hidden_size, intermediate_size,
// num_attention_heads, num_hidden_layers, num_key_value_heads, head_dim, vocab_size,
// rms_norm_eps, rope_theta, rope_scaling (llama3 only; also inside transformers 5's
// rope_parameters), tie_word_embeddings, max_position_embeddings.
absl::StatusOr<elf::ModelShape> ShapeFromHfConfig(absl::string_view json_text,
                                                  const std::string& name,
                                                  const std::string& file);

// config.json text for `shape`'s HF family (LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM, Gemma3ForCausalLM) in bfloat16 (what WriteHfCheckpoint writes).
std::string HfConfigJson(const elf::ModelShape& shape);

// HF checkpoint directory: config.json + model.safetensors, or sharded
// model-0000x-of-0000y.safetensors with model.safetensors.index.json; tensors in
// BF16, F16 or F32. Only the tensors ExpectedTensors() lists are loaded (others, and
// lm_head.weight when tie_word_embeddings is true, are ignored, as transformers does),
// so the digest matches the state dict transformers builds.
absl::StatusOr<Weights> LoadHfCheckpoint(const std::string& dir, ThreadPool* pool = nullptr);

// GGUF (general.architecture llama, qwen2, qwen3 or gemma3; gguf_arch.h holds what
// each converter writes): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the
// K-quants Q2_K ... Q6_K (weights/dequant.h; any other type is refused naming the
// tensor and its type), renamed to HF
// names, llama's Q/K rows un-permuted, Gemma's norms stored as 1 + w returned as HF's
// w; Q8_0, Q4_0 and Q4_1 tensors also keep their StoredBlocks (the file stays mapped,
// its pages released after loading); tied unless the file has output.weight. The
// shape's name is general.basename + "_" + general.size_label in lower case (else
// the file stem); max_context is <arch>.context_length. Llama 3's RoPE scaling comes
// from the rope_freqs.weight tensor llama.cpp's converter stores it as (its parameters
// recovered by matching the table; a table of no Llama 3 scaling is refused);
// rope.scaling.type metadata other than "none" is refused.
// Loaders and MakeSyntheticWeights convert on the `pool` they are given (null, the
// default: on the calling thread alone), never from inside one of its tasks. A pool
// runs one job at a time: two loads at once on two threads need a pool each (an
// Engine passes its own).
absl::StatusOr<Weights> LoadGguf(const std::string& path);

// Which tensors a loader may leave without bf16 values: those a decode ELF reads
// only as the file's own blocks (quantize_weights scheme=gguf). A tensor it names is
// loaded as its shape and StoredBlocks alone (no `data`: has_data() is false, as
// after ReleaseData) where the file stores it in blocks the kernels read; any other
// tensor is dequantized as usual. Null: every tensor dequantized.
using BlocksOnly = std::function<bool(absl::string_view hf_name)>;

// As LoadGguf, the tensors `blocks_only` names kept as blocks only: a Q4_K_M 8B then
// needs its file's bytes, not 2 bytes per parameter of bf16 besides.
absl::StatusOr<Weights> LoadGguf(const std::string& path, const BlocksOnly& blocks_only,
                                 ThreadPool* pool = nullptr);

// As LoadGguf, only the tensors whose HF name `select` accepts (all when it is
// empty), without checking that the model is complete: a few tensors of a big file,
// or of one whose other tensors' types cannot be dequantized.
absl::StatusOr<Weights> LoadGgufTensors(const std::string& path,
                                        const std::function<bool(absl::string_view)>& select,
                                        const BlocksOnly& blocks_only = nullptr,
                                        ThreadPool* pool = nullptr);

// The model shape a GGUF's metadata describes, as LoadGguf reads it; reads only the
// header and rope_freqs.weight (no weight is dequantized, whatever its type).
absl::StatusOr<elf::ModelShape> GgufShape(const std::string& path);

// How a GGUF stores each tensor LoadGguf loads, by HF name: the ggml type's name
// ("Q4_1", "Q8_0", "F32", ...). Reads only the header.
absl::StatusOr<std::map<std::string, std::string>> GgufStoredTypes(const std::string& path);

// A directory is an HF checkpoint, a file starting with the GGUF magic is GGUF
// (whatever its name); NotFound when `path` does not exist, InvalidArgument otherwise.
absl::StatusOr<Weights> LoadWeights(const std::string& path);
// As LoadWeights; a GGUF's tensors `blocks_only` names kept as blocks only (LoadGguf).
absl::StatusOr<Weights> LoadWeights(const std::string& path, const BlocksOnly& blocks_only,
                                    ThreadPool* pool = nullptr);

// Deterministic synthetic weights for `shape`: the same seed gives the same bytes on
// every machine. Linear and embedding weights ~ uniform with std 0.02 (HF's
// initializer_range), norm weights 1 + u with u ~ uniform of std 0.3 (u alone with
// norm_plus_one: a scale of 1 + u either way). Element i of tensor `name` is a pure
// function of (seed, FNV-1a-64(name), i) (splitmix64 mixing), so any slice can be
// generated independently and in parallel. ResourceExhausted when a tensor cannot
// be allocated (a valid but huge shape), never an abort.
absl::StatusOr<Weights> MakeSyntheticWeights(const elf::ModelShape& shape, uint64_t seed = 1,
                                             ThreadPool* pool = nullptr);

// Writes `w` as an HF checkpoint directory (config.json of its family in bfloat16,
// model.safetensors) that transformers loads. Writes the tensors
// ExpectedTensors(w.shape()) lists (CheckWeights must pass); creates `dir` if needed.
// shards > 1: as HF shards big checkpoints, model-0000i-of-0000N.safetensors (tensors
// in name order, split near equal bytes) and model.safetensors.index.json.
absl::Status WriteHfCheckpoint(const Weights& w, const std::string& dir, int shards = 1);

}  // namespace dk::weights

#endif  // DK_WEIGHTS_WEIGHTS_H_
