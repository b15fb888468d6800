// A model file alone -> the decode ELFs of its standard chain, built in process
// with the pass table the rules use, kept in a cache keyed by the digest of their
// inputs. What `--model FILE` means for the tools and decodekit::EngineOptions::model.
//
//   chain::ModelElfOptions options;          // cache under ~/.cache/decodekit/elf
//   auto built = chain::BuildModelElfs("SmolLM2-135M.Q4_1.gguf", options);
//   built->stages[built->best].elf_path      // decode_gguf: the file's own blocks
//
// The chain is StandardChain(): the same stages, passes and options as the
// decodekit_model macro writes, so an ELF built here is byte-identical to the
// one the rules build for the same shape (//tests/chain:model_elf_test checks it
// against the rules' smollm2_135m chain).
// Thread-safety: BuildModelElfs may run on several threads and processes at once;
// a cache entry is written to a temporary file and renamed into place.
#ifndef DK_CHAIN_MODEL_ELF_H_
#define DK_CHAIN_MODEL_ELF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"

namespace dk::chain {

// One stage of the standard chain: `pass` over the stage before it with `options`
// ("key=value", as elf_opt takes them). The first stage is the baseline (no pass).
struct Stage {
  std::string name;                  // "decode", "decode_aligned", ...
  std::string pass;                  // "" for the baseline
  std::vector<std::string> options;  // e.g. {"scheme=q8_0"}
  bool allow_noop = false;           // fuse_kernels: nothing to fuse in Gemma's graph
  bool stored_from_gguf = false;     // quantize_weights scheme=gguf: option `stored` from the file
  std::string src;                   // the stage it transforms ("" for the baseline)
};

// The standard chain: decode, decode_aligned, decode_bo, decode_opt, decode_fused,
// decode_x12, decode_q8, then for a GGUF decode_gguf (the file's own blocks), and
// decode_spec (speculative decoding over the last of those).
//
// One exception, for a GGUF whose blocks the fused launches cannot read (llama.cpp's
// Q4_K_M keeps attn_v and ffn_down in Q6_K in some layers, q and k in Q4_K, and a
// fused q/k/v launch reads one format): when quantize_weights(gguf) over decode_q8
// fails, BuildModelElfs makes decode_gguf as quantize_weights(gguf) over decode_opt,
// then fuse_kernels (which leaves mixed-format launches unfused), and says so. The
// rules' chain (decodekit_model) fails the build on such a file, naming the launch.
std::vector<Stage> StandardChain(bool gguf);

// The stage a model file runs by default: the best its weights allow. decode_gguf
// for a GGUF (its quantized blocks as stored); decode_x12 otherwise (bf16, bit-identical
// to the baseline).
std::string BestStage(bool gguf);

struct ModelElfOptions {
  std::string name;         // ModelShape.name; "": the file's own (weights/model_file.h)
  int64_t max_context = 0;  // cap on the model's own context; 0: the default cap
  // Where the ELFs are kept ("<cache_dir>/<name>-<stage>-<key>.elf"); "": the
  // default, DefaultCacheDir().
  std::string cache_dir;
  // Build and keep only the stages up to this one ("": up to the last). Unknown
  // names are InvalidArgument, naming the chain's stages.
  std::string up_to;
};

struct BuiltStage {
  std::string name;
  std::string elf_path;
  std::string key;       // the cache key: sha256 of every input of this ELF
  bool from_cache = false;
  bool rebuilt_corrupt = false;  // a cache entry was there but failed its checks
  // How it was made, for Describe ("quantize_weights scheme=gguf over decode_q8").
  std::string how;
};

struct ModelElfs {
  elf::ModelShape shape;
  bool gguf = false;
  // False for a config.json alone: the file holds no weights (run synthetic ones of
  // its shape) and no tokenizer.
  bool holds_weights = false;
  std::vector<BuiltStage> stages;  // in chain order, up to options.up_to
  int best = 0;                    // index of BestStage() in `stages` (or the last built)
};

// $XDG_CACHE_HOME/decodekit/elf, else $HOME/.cache/decodekit/elf; "" when neither
// variable is set (the caller must then name a directory).
std::string DefaultCacheDir();

// Reads the shape from `model_path` (a .gguf, an HF checkpoint directory or its
// config.json), builds each stage of StandardChain() in process (or takes it from
// the cache when an entry with the same key passes its checks: its digest and a
// full parse), and returns where each ELF is. Errors: the shape's
// (weights/model_file.h: Unimplemented naming the key for what the graph cannot
// run); FailedPrecondition naming the directory when the cache cannot be created
// or written.
absl::StatusOr<ModelElfs> BuildModelElfs(const std::string& model_path, const ModelElfOptions& options);

// The stage's index in `elfs` by name ("" = elfs.best); NotFound naming the stages.
absl::StatusOr<int> FindStage(const ModelElfs& elfs, const std::string& name);

// One line for the tools: "model FILE: stage decode_gguf (quantize_weights over
// decode_q8), ELF PATH (cached)".
std::string Describe(const std::string& model_path, const ModelElfs& elfs, int stage);

}  // namespace dk::chain

#endif  // DK_CHAIN_MODEL_ELF_H_
