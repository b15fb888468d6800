// Records verify goldens from the reference decoder (verify/reference/reference_decoder.h)
// instead of HF transformers, for a model given by its file alone:
//
//   reference_goldens --model model.gguf --prompts prompts.txt --out goldens.json
//   reference_goldens --model config.json --weights synthetic:1 --tokenizer tok.json
//       --prompts prompts.txt --out goldens.json          (one command line)
//
// The shape comes from --model (weights/model_file.h: a GGUF, an HF checkpoint
// directory or a config.json), or from --config (a dk.elf.ModelShape text proto). The
// weights: --weights (a GGUF, a checkpoint directory, synthetic or synthetic:SEED);
// by default the model file itself, or synthetic (seed 1, verify's default) when
// --model is a config.json or --config is given. The tokenizer: --tokenizer, by
// default the model file (a GGUF's own, or a checkpoint directory's tokenizer.json).
// The JSON is make_goldens.py's, with "reference" naming this decoder (verify and the
// profile print it) and the weights digest decodekit computes, so verify takes these
// goldens for these weights only. Slow: one f64 dot product per weight per token.
// Relative paths are resolved against the directory `bazel run` was started from.
// Exit status (util/exit_codes.h): 0 written, 1 an error, 2 a usage error.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "elf/elf.h"
#include "tokenizer/tokenizer.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/read_file.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "util/user_path.h"
#include "verify/reference/reference_goldens.h"
#include "weights/model_file.h"
#include "weights/weights.h"

ABSL_FLAG(std::string, model, "", "the model file: a .gguf, an HF checkpoint directory or its config.json");
ABSL_FLAG(std::string, config, "", "instead of --model: a dk.elf.ModelShape text proto");
ABSL_FLAG(std::string, name, "", "the shape's name and the goldens' \"model\" (default: the file's own)");
ABSL_FLAG(int64_t, max_context, 0, "with --model: cap on the model's context (0: the default cap)");
ABSL_FLAG(std::string, weights, "",
          "a .gguf, a checkpoint directory, synthetic or synthetic:SEED (default: --model itself, or "
          "synthetic for a config.json / --config)");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer.json, a .gguf or a directory (default: --model)");
ABSL_FLAG(std::string, prompts, "", "prompts, one per line (blank lines skipped)");
ABSL_FLAG(int, new_tokens, 32, "greedy tokens per prompt");
ABSL_FLAG(std::string, out, "", "the goldens JSON to write");

namespace {

bool IsSynthetic(const std::string& spec) { return spec == "synthetic" || spec.rfind("synthetic:", 0) == 0; }

absl::StatusOr<dk::elf::ModelShape> Shape(const std::string& model, const std::string& config) {
  if (!config.empty()) {
    DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(config, "--config"));
    DK_ASSIGN_OR_RETURN(dk::elf::ModelShape shape, dk::elf::ParseModelShapeText(text, config));
    if (!absl::GetFlag(FLAGS_name).empty()) shape.set_name(absl::GetFlag(FLAGS_name));
    return shape;
  }
  dk::weights::ModelFileOptions options;
  options.name = absl::GetFlag(FLAGS_name);
  options.max_context = absl::GetFlag(FLAGS_max_context);
  return dk::weights::ShapeFromModelFile(model, options);
}

absl::StatusOr<dk::weights::Weights> Weights(const dk::elf::ModelShape& shape, const std::string& spec) {
  if (IsSynthetic(spec)) {
    uint64_t seed = 1;
    if (spec != "synthetic" && !absl::SimpleAtoi(spec.substr(10), &seed)) {
      return absl::InvalidArgumentError(absl::StrCat("--weights ", spec, ": expected synthetic or synthetic:SEED"));
    }
    return dk::weights::MakeSyntheticWeights(shape, seed, &dk::SharedThreadPool());
  }
  return dk::weights::LoadWeights(spec, nullptr, &dk::SharedThreadPool());
}

absl::Status Run() {
  const std::string model = absl::GetFlag(FLAGS_model).empty() ? "" : dk::UserPath(absl::GetFlag(FLAGS_model));
  const std::string config = absl::GetFlag(FLAGS_config).empty() ? "" : dk::UserPath(absl::GetFlag(FLAGS_config));
  DK_ASSIGN_OR_RETURN(const dk::elf::ModelShape shape, Shape(model, config));
  // The model file holds its weights unless it is a shape alone (a config.json).
  const bool shape_only = !config.empty() || absl::EndsWith(model, ".json");
  std::string spec = absl::GetFlag(FLAGS_weights);
  if (spec.empty()) spec = shape_only ? "synthetic" : model;
  if (!IsSynthetic(spec)) spec = dk::UserPath(spec);
  DK_ASSIGN_OR_RETURN(const dk::weights::Weights weights, Weights(shape, spec));
  std::string tok_path = absl::GetFlag(FLAGS_tokenizer);
  if (tok_path.empty()) {
    if (shape_only) return absl::InvalidArgumentError("--tokenizer is required with a config.json or --config");
    tok_path = model;
  } else {
    tok_path = dk::UserPath(tok_path);
  }
  DK_ASSIGN_OR_RETURN(const std::unique_ptr<dk::tokenizer::Tokenizer> tok, dk::tokenizer::Tokenizer::Load(tok_path));
  const std::string prompts_path = dk::UserPath(absl::GetFlag(FLAGS_prompts));
  DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(prompts_path, "--prompts"));
  std::vector<std::string> prompts;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) prompts.emplace_back(line);
  dk::verify::ReferenceGoldensOptions options;
  options.model = shape.name();
  options.new_tokens = absl::GetFlag(FLAGS_new_tokens);
  options.generator = "tools/reference_goldens";
  std::fprintf(stderr, "reference_goldens: %s (%d layers, hidden %d), weights %s, %zu prompts x %d tokens\n",
               shape.name().c_str(), shape.n_layers(), shape.hidden(), weights.source().c_str(), prompts.size(),
               options.new_tokens);
  DK_ASSIGN_OR_RETURN(const std::string json, dk::verify::RecordReferenceGoldens(shape, weights, *tok, prompts, options));
  const std::string out_path = dk::UserPath(absl::GetFlag(FLAGS_out));
  std::ofstream out(out_path, std::ios::trunc);
  out << json;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", out_path, " failed"));
  std::fprintf(stderr, "reference_goldens: wrote %s (digest %s)\n", out_path.c_str(), weights.Digest().c_str());
  return absl::OkStatus();
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("reference_goldens", s, code); }

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "reference_goldens (--model FILE | --config SHAPE.textproto) [--weights FILE|synthetic[:SEED]] "
      "[--tokenizer FILE] --prompts PROMPTS.txt [--new_tokens N] --out GOLDENS.json");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  if (absl::GetFlag(FLAGS_model).empty() == absl::GetFlag(FLAGS_config).empty()) {
    return Fail(absl::InvalidArgumentError("give exactly one of --model and --config"), dk::kExitUsage);
  }
  for (const absl::Status& s : {dk::cli::RequireFlag("prompts", absl::GetFlag(FLAGS_prompts)),
                                dk::cli::RequireFlag("out", absl::GetFlag(FLAGS_out)),
                                dk::cli::RequireRange("new_tokens", absl::GetFlag(FLAGS_new_tokens), 1, 1 << 16)}) {
    if (!s.ok()) return Fail(s, dk::kExitUsage);
  }
  if (absl::Status s = Run(); !s.ok()) return Fail(s);
  return dk::kExitOk;
}
