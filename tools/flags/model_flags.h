// --model FILE_OR_DIR for the tools that run a decode (generate, verify, profile,
// decode_bench): the model file alone, no --elf. The standard chain's ELFs are built
// in process, or taken from the cache (chain/model_elf.h), and the tool runs the
// stage --stage names (default: the best the file's weights allow). A line on stderr
// says which stage runs and where its ELF is.
#ifndef DK_TOOLS_FLAGS_MODEL_FLAGS_H_
#define DK_TOOLS_FLAGS_MODEL_FLAGS_H_

#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "chain/model_elf.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, stage);
ABSL_DECLARE_FLAG(std::string, cache_dir);
ABSL_DECLARE_FLAG(int, max_context);

namespace dk::tools {

struct ModelChoice {
  std::string model;      // the --model path, as the user gave it, resolved (UserPath)
  chain::ModelElfs elfs;  // every stage built (or cached)
  int stage = 0;          // the chosen one (--stage, else elfs.best)
  std::string elf;        // elfs.stages[stage].elf_path
  // The weights to run: the model file itself, or "synthetic" for a config.json
  // alone (unless `weights_flag` named others).
  std::string weights;
  // The tokenizer: `tokenizer_flag` if given, else the model file (a GGUF or a
  // checkpoint directory); "" for a config.json alone.
  std::string tokenizer;
};

// The flag combinations --model allows: InvalidArgument for --elf beside it (`elf_flag`)
// or --stage without it. For a tool's up-front usage checks; ModelFromFlags makes it too.
absl::Status CheckModelFlags(const std::string& elf_flag);

// nullopt without --model. With it: InvalidArgument for --elf given too (`elf_flag`),
// for an unknown --stage; the chain's errors (an unsupported architecture is
// Unimplemented, naming the key). Prints chain::Describe on stderr, prefixed by `tool`.
// `weights_flag` / `tokenizer_flag`: the tool's --weights and --tokenizer as given
// ("synthetic" is --weights' default and means "the model's own" here).
absl::StatusOr<std::optional<ModelChoice>> ModelFromFlags(const char* tool, const std::string& elf_flag,
                                                          const std::string& weights_flag,
                                                          const std::string& tokenizer_flag);

}  // namespace dk::tools

#endif  // DK_TOOLS_FLAGS_MODEL_FLAGS_H_
