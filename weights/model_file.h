// The model's shape from the model file itself: a GGUF's metadata or an HF
// checkpoint's config.json. Everything that builds a decode ELF for a user's file
// (elfc --model, the decodekit_model macro's shape action, the tools' and the API's
// --model path) takes the shape from here, so no hand-written config can disagree
// with the file.
#ifndef DK_WEIGHTS_MODEL_FILE_H_
#define DK_WEIGHTS_MODEL_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"

namespace dk::weights {

// The context a decode ELF is built for when the caller names none: the model's own
// maximum, capped here. At this cap the KV cache of a Llama-3.1-8B-shaped model
// (32 layers x 8 KV heads x 128 x 2 (K and V) x bf16) is 4 GiB, beside its ~4.9 GB
// Q4_K_M file: what fits a 24 GB machine with room for the tools.
inline constexpr int32_t kDefaultMaxContext = 32768;

struct ModelFileOptions {
  // ModelShape.name; "": the file's own (a GGUF's general.basename and size label,
  // else the file stem; a checkpoint directory's name).
  std::string name;
  // The most positions the ELF holds: min(the model's own maximum, max_context);
  // 0: kDefaultMaxContext.
  int64_t max_context = 0;
};

// The shape of the model at `path`: a GGUF file (by its magic, whatever its name),
// an HF checkpoint directory (its config.json), or a config.json file alone (the
// shape of a checkpoint whose weights are not here: synthetic weights).
// Unimplemented naming the key for an architecture or feature the graph cannot
// run; InvalidArgument for a malformed file or a bad option; NotFound for no file.
absl::StatusOr<elf::ModelShape> ShapeFromModelFile(const std::string& path,
                                                   const ModelFileOptions& options = {});

}  // namespace dk::weights

#endif  // DK_WEIGHTS_MODEL_FILE_H_
