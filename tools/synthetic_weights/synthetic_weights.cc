// Writes deterministic synthetic weights for a model shape as an HF checkpoint
// directory (config.json + model.safetensors) and prints their digest:
//
//   bazel run //tools/synthetic_weights -- --model models/llama32_1b/config.json --name llama32_1b \
//       --max_context 2048 --out /tmp/llama32_1b_synth --seed 1
//
// Relative paths are resolved against the directory `bazel run` was started from.
// Exit status (util/exit_codes.h): 0 written, 1 an error, 2 a usage error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/read_file.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "util/user_path.h"
#include "weights/model_file.h"
#include "weights/weights.h"

ABSL_FLAG(std::string, config, "", "model shape, a dk.elf.ModelShape text proto (or --model)");
ABSL_FLAG(std::string, model, "",
          "the shape from a model file: a .gguf, an HF checkpoint directory or its config.json "
          "(weights/model_file.h)");
ABSL_FLAG(std::string, name, "", "with --model: the shape's name (default: the file's own)");
ABSL_FLAG(int64_t, max_context, 0, "with --model: cap on the model's own context (0: the default cap)");
ABSL_FLAG(std::string, out, "", "output directory (created if missing)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the synthetic values");
ABSL_FLAG(int, shards, 1,
          "safetensors files: 1 writes model.safetensors, N > 1 model-0000i-of-0000N.safetensors "
          "and model.safetensors.index.json, as HF shards a checkpoint");

namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

absl::Status Run() {
  const std::string out = dk::UserPath(absl::GetFlag(FLAGS_out));
  // --out is created if missing; an existing file there is not a directory.
  if (absl::Status s = dk::cli::RequireDirectory("out", out); !s.ok() && !absl::IsNotFound(s)) {
    return s;
  }
  dk::elf::ModelShape shape;
  if (const std::string model = absl::GetFlag(FLAGS_model); !model.empty()) {
    DK_ASSIGN_OR_RETURN(shape, dk::weights::ShapeFromModelFile(
                                   dk::UserPath(model), {.name = absl::GetFlag(FLAGS_name),
                                                         .max_context = absl::GetFlag(FLAGS_max_context)}));
  } else {
    const std::string config_path = dk::UserPath(absl::GetFlag(FLAGS_config));
    DK_RETURN_IF_ERROR(dk::cli::RequireFile("config", config_path));
    DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(config_path, "--config"));
    DK_ASSIGN_OR_RETURN(shape, dk::elf::ParseModelShapeText(text, config_path));
  }
  auto t0 = std::chrono::steady_clock::now();
  DK_ASSIGN_OR_RETURN(const dk::weights::Weights w,
                      dk::weights::MakeSyntheticWeights(shape, absl::GetFlag(FLAGS_seed), &dk::SharedThreadPool()));
  const double make_s = Since(t0);
  t0 = std::chrono::steady_clock::now();
  const std::string digest = w.Digest();
  const double digest_s = Since(t0);
  t0 = std::chrono::steady_clock::now();
  DK_RETURN_IF_ERROR(dk::weights::WriteHfCheckpoint(w, out, absl::GetFlag(FLAGS_shards)));
  const double write_s = Since(t0);
  std::fprintf(stderr,
               "%s: %zu tensors, %.2f GB; generate %.2f s, digest %.2f s, write %.2f s\n",
               shape.name().c_str(), w.size(), w.total_bytes() / 1e9, make_s, digest_s,
               write_s);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  std::printf("%s\n", digest.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const bool has_model = !absl::GetFlag(FLAGS_model).empty();
  if (has_model && !absl::GetFlag(FLAGS_config).empty()) {
    return dk::ExitWithError("synthetic_weights", absl::InvalidArgumentError("--config and --model: give one"),
                             dk::kExitUsage);
  }
  for (const absl::Status& s : {has_model ? absl::OkStatus() : dk::cli::RequireFlag("config", absl::GetFlag(FLAGS_config)),
                                dk::cli::RequireFlag("out", absl::GetFlag(FLAGS_out))}) {
    if (!s.ok()) return dk::ExitWithError("synthetic_weights", s, dk::kExitUsage);
  }
  if (const int shards = absl::GetFlag(FLAGS_shards); shards < 1 || shards > 99999) {
    return dk::ExitWithError("synthetic_weights",
                             absl::InvalidArgumentError(absl::StrCat("--shards ", shards, " is outside [1, 99999]")),
                             dk::kExitUsage);
  }
  if (absl::Status s = Run(); !s.ok()) return dk::ExitWithError("synthetic_weights", s);
  return dk::kExitOk;
}
