#include "tools/flags/model_flags.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/status.h"
#include "util/user_path.h"

ABSL_FLAG(std::string, model, "",
          "the model file alone, instead of --elf: a .gguf, an HF checkpoint directory, or a config.json "
          "(synthetic weights of its shape); the standard chain's decode ELFs are built for it (and cached)");
ABSL_FLAG(std::string, stage, "",
          "with --model: the stage to run (decode, decode_aligned, decode_bo, decode_opt, decode_fused, "
          "decode_x12, decode_q8, decode_gguf (a GGUF's own blocks), decode_spec); default: decode_gguf for "
          "a GGUF, decode_x12 otherwise");
ABSL_FLAG(std::string, cache_dir, "",
          "with --model: where the built ELFs are kept (default: $XDG_CACHE_HOME/decodekit/elf or "
          "~/.cache/decodekit/elf)");
ABSL_FLAG(int, max_context, 0,
          "the most positions: with --model, the ELF holds min(the model's own, this) (0: the model's own, "
          "at most 32768); with --elf, the KV cache's (0: the ELF's max_context)");

namespace dk::tools {

absl::Status CheckModelFlags(const std::string& elf_flag) {
  const bool model = !absl::GetFlag(FLAGS_model).empty();
  if (!model && !absl::GetFlag(FLAGS_stage).empty()) return absl::InvalidArgumentError("--stage goes with --model");
  if (model && !elf_flag.empty()) {
    return absl::InvalidArgumentError("--model builds the decode ELF: give --model or --elf, not both");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ModelChoice>> ModelFromFlags(const char* tool, const std::string& elf_flag,
                                                          const std::string& weights_flag,
                                                          const std::string& tokenizer_flag) {
  DK_RETURN_IF_ERROR(CheckModelFlags(elf_flag));
  const std::string model_flag = absl::GetFlag(FLAGS_model);
  if (model_flag.empty()) return std::nullopt;
  const int max_context = absl::GetFlag(FLAGS_max_context);
  if (max_context < 0) return absl::InvalidArgumentError(absl::StrCat("--max_context ", max_context, " is negative"));
  ModelChoice c;
  c.model = UserPath(model_flag);
  chain::ModelElfOptions options;
  options.max_context = max_context;
  options.cache_dir = UserPath(absl::GetFlag(FLAGS_cache_dir));
  DK_ASSIGN_OR_RETURN(c.elfs, chain::BuildModelElfs(c.model, options));
  absl::StatusOr<int> stage = chain::FindStage(c.elfs, absl::GetFlag(FLAGS_stage));
  if (!stage.ok()) return absl::InvalidArgumentError(absl::StrCat("--stage: ", stage.status().message()));
  c.stage = *stage;
  c.elf = c.elfs.stages[c.stage].elf_path;
  const bool config_alone = !c.elfs.holds_weights;
  const bool weights_given = !weights_flag.empty() && weights_flag != "synthetic";
  c.weights = weights_given ? UserPath(weights_flag) : config_alone ? "synthetic" : c.model;
  c.tokenizer = !tokenizer_flag.empty() ? UserPath(tokenizer_flag) : config_alone ? "" : c.model;
  std::fprintf(stderr, "%s: %s\n", tool, chain::Describe(model_flag, c.elfs, c.stage).c_str());
  return c;
}

}  // namespace dk::tools
