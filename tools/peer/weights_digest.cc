// Prints decodekit's weights digest (weights/weights.h Weights::Digest) of each
// weights file given: the bf16 values decodekit would run, under HF names and layouts.
// tools/peer uses it to prove that both engines read the same weights:
//   - a model's own GGUF (SmolLM2's Q4_1, Gemma 3's Q4_K_M; dequantized by decodekit)
//     and the BF16 GGUF llama.cpp requantized from it must have the same digest;
//   - a synthetic model's (llama32_1b, qwen25_0_5b, qwen3_0_6b) BF16 GGUF written by
//     convert_synthetic.py must have the digest //tools/synthetic_weights printed for
//     the checkpoint it was converted from.
//   ./bazelw run //tools/peer:weights_digest -- A.gguf B.gguf [checkpoint_dir ...]
// Exits 1 when a file fails to load or, with --same, when the digests differ.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "util/thread_pool.h"
#include "util/user_path.h"
#include "weights/weights.h"

ABSL_FLAG(bool, same, false, "exit 1 unless every file has the same digest");

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: weights_digest [--same] FILE.gguf|CHECKPOINT_DIR ...\n");
    return 2;
  }
  std::vector<std::string> digests;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string path = dk::UserPath(args[i]);
    auto w = dk::weights::LoadWeights(path, nullptr, &dk::SharedThreadPool());
    if (!w.ok()) {
      std::fprintf(stderr, "weights_digest: %s\n", std::string(w.status().message()).c_str());
      return 1;
    }
    digests.push_back(w->Digest());
    std::printf("%s  %s  (%zu tensors, %.3f GB bf16)\n", digests.back().c_str(), args[i],
                w->size(), w->total_bytes() / 1e9);
  }
  if (absl::GetFlag(FLAGS_same)) {
    for (const std::string& d : digests) {
      if (d != digests.front()) {
        std::printf("DIFFERENT\n");
        return 1;
      }
    }
    std::printf("SAME\n");
  }
  return 0;
}
