// perplexity: a decode stage judged the way the field judges a quantization, against a
// reference stage over a text (llama.cpp's `llama-perplexity --kl-divergence`): mean and
// 99th-percentile KL divergence, top-1 agreement, both perplexities and their ratio
// (tools/perplexity/run.h: the windows and the positions scored; docs/perplexity.md).
//   perplexity --elf decode_q8.elf --reference_elf decode.elf --weights model.gguf \
//              --tokenizer model.gguf --text text.txt
//   perplexity --model model.gguf [--stage decode_gguf] --text text.txt   (reference: the chain's baseline)
// Exit status (util/exit_codes.h): 0 the figures were written, 1 bad input, 2 a usage error.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "elf/elf.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/session.h"
#include "tokenizer/model_special_ids.h"
#include "tokenizer/tokenizer.h"
#include "tools/flags/model_flags.h"
#include "tools/flags/runtime_flags.h"
#include "tools/perplexity/run.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/read_file.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "util/user_path.h"

ABSL_FLAG(std::string, elf, "", "the stage judged (a decode ELF)");
ABSL_FLAG(std::string, reference_elf, "",
          "the reference stage of the same chain (its bf16 baseline, e.g. decode.elf); with --model: the "
          "chain's baseline stage unless given");
ABSL_FLAG(std::string, weights, "synthetic", "checkpoint dir, .gguf, or synthetic[:SEED] (both stages)");
ABSL_FLAG(std::string, reference_weights, "", "the reference's weights when they differ (default: --weights)");
ABSL_FLAG(std::string, tokenizer, "", "GGUF, tokenizer.json or checkpoint dir: encodes --text");
ABSL_FLAG(std::string, text, "", "a UTF-8 text (e.g. @english_text//:text.txt)");
ABSL_FLAG(int, window, 512, "tokens per window (llama-perplexity's -c); at most the model's context");
ABSL_FLAG(int, score_from, -1, "first position scored in each window (-1: window / 2, as llama-perplexity)");
ABSL_FLAG(int, max_windows, 0, "windows used (0: every whole window of the text)");
ABSL_FLAG(int, score_rows, 0,
          "tokens per run, the LM head on each (0: the window, fewer where the logits of a run would pass 256 MiB)");
ABSL_FLAG(bool, json, false, "the figures as one JSON object on stdout");
ABSL_FLAG(std::string, ids_out, "",
          "also write the windows' token ids (JSON: window, score_from, windows) to this file, for the same run "
          "through llama.cpp (tools/perplexity/llama_kld.py)");

namespace {

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("perplexity", s, code); }

struct Stage {
  std::string name, elf, weights;
  dk::elf::Program program;
  std::unique_ptr<dk::runtime::CpuSession> session;
};

// The default run size: every window's rows at once, unless their logits (the LM
// head's BO and the host value, f32) would pass 256 MiB.
int ScoreRows(int window, int64_t vocab) {
  if (const int flag = absl::GetFlag(FLAGS_score_rows); flag > 0) return std::min(flag, window - 1);
  const int64_t fit = std::max<int64_t>(1, (int64_t{256} << 20) / (vocab * 4 * 2));
  return static_cast<int>(std::min<int64_t>(window - 1, fit));
}

absl::Status Open(Stage& s, const dk::tools::RuntimeOptions& runtime, int window) {
  DK_ASSIGN_OR_RETURN(s.program, dk::elf::ReadElfFile(s.elf));
  DK_ASSIGN_OR_RETURN(dk::weights::Weights w, dk::runtime::ReadWeightsSpec(s.weights, s.program, window, &dk::SharedThreadPool()));
  dk::runtime::SessionOptions options = runtime.Session();
  options.max_context = window;
  options.score_rows = ScoreRows(window, s.program.model().vocab());
  DK_ASSIGN_OR_RETURN(s.session, dk::runtime::CpuSession::OpenOwning(s.program, s.elf, std::move(w), options));
  return absl::OkStatus();
}

absl::Status Run(Stage& stage, Stage& reference, const std::string& tokenizer_path, const std::string& text_path,
                 const dk::tools::RuntimeOptions& runtime) {
  DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(text_path, "--text", uint64_t{1} << 30));
  DK_ASSIGN_OR_RETURN(auto tokenizer, dk::tokenizer::Tokenizer::Load(tokenizer_path));
  DK_ASSIGN_OR_RETURN(stage.program, dk::elf::ReadElfFile(stage.elf));
  DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerFitsModel(*tokenizer, stage.program.model().vocab(), tokenizer_path,
                                                            absl::StrCat("ELF ", stage.elf)));
  DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerMatchesWeights(*tokenizer, tokenizer_path, stage.weights));
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, tokenizer->Encode(text));
  dk::perplexity::WindowOptions windows;
  windows.window = absl::GetFlag(FLAGS_window);
  windows.score_from = absl::GetFlag(FLAGS_score_from);
  windows.max_windows = absl::GetFlag(FLAGS_max_windows);
  // llama-perplexity starts every window with BOS where the tokenizer adds one.
  if (!ids.empty() && tokenizer->bos_id() && ids[0] == *tokenizer->bos_id()) windows.bos = tokenizer->bos_id();
  const int64_t context = stage.program.model().max_context();
  if (context > 0 && windows.window > context) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window ", windows.window, " is longer than the model's context of ", context));
  }
  DK_ASSIGN_OR_RETURN(const auto chunks, dk::perplexity::MakeWindows(ids, windows));
  if (const std::string out = absl::GetFlag(FLAGS_ids_out); !out.empty()) {
    const nlohmann::json j = {{"window", windows.window}, {"score_from", dk::perplexity::ScoreFrom(windows)},
                              {"windows", chunks}};
    FILE* f = std::fopen(dk::UserPath(out).c_str(), "w");
    if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("--ids_out: cannot write ", out));
    const std::string text = j.dump();
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) return absl::DataLossError(absl::StrCat("--ids_out: writing ", out, " failed"));
  }
  DK_RETURN_IF_ERROR(Open(stage, runtime, windows.window));
  DK_RETURN_IF_ERROR(Open(reference, runtime, windows.window));
  const int from = dk::perplexity::ScoreFrom(windows);
  std::fprintf(stderr,
               "perplexity: %s (%s) against %s (%s)\nperplexity: text %s: %zu tokens, %zu windows of %d, positions "
               "%d..%d of each scored, %d rows a run; runtime %s\n",
               stage.name.c_str(), stage.elf.c_str(), reference.name.c_str(), reference.elf.c_str(), text_path.c_str(),
               ids.size(), chunks.size(), windows.window, from, windows.window - 2,
               stage.session->decoder().check_rows(), runtime.Describe().c_str());
  const auto t0 = std::chrono::steady_clock::now();
  DK_ASSIGN_OR_RETURN(
      const dk::perplexity::Summary s,
      dk::perplexity::CompareStages(stage.session->decoder(), reference.session->decoder(), chunks, from,
                                    [&](int done, int total) {
                                      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                                      std::fprintf(stderr, "perplexity: window %d/%d (%.1f s)\n", done, total, sec);
                                    }));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j = {{"stage", stage.name},           {"reference", reference.name},
                        {"text", text_path},             {"text_tokens", ids.size()},
                        {"window", windows.window},      {"windows", chunks.size()},
                        {"score_from", from},            {"positions", s.positions},
                        {"mean_kld", s.mean_kld},        {"median_kld", s.median_kld},
                        {"p99_kld", s.p99_kld},          {"max_kld", s.max_kld},
                        {"top1", s.top1},                {"ppl", s.ppl},
                        {"reference_ppl", s.ref_ppl},    {"ppl_ratio", s.ppl_ratio},
                        {"seconds", seconds},            {"runtime", runtime.Describe()}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("stage %s against %s: %s\n", stage.name.c_str(), reference.name.c_str(), s.Describe().c_str());
    std::printf("mean KLD: %.6f\n99th percentile KLD: %.6f\nmedian KLD: %.6f\nmax KLD: %.6f\n", s.mean_kld, s.p99_kld,
                s.median_kld, s.max_kld);
    std::printf("top-1 agreement: %.2f%%\n", 100 * s.top1);
    std::printf("PPL: %.4f (%s), %.4f (%s), ratio %.4f\n", s.ppl, stage.name.c_str(), s.ref_ppl,
                reference.name.c_str(), s.ppl_ratio);
    std::printf("time: %.1f s for %zu windows of %d tokens (both stages)\n", seconds, chunks.size(), windows.window);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "perplexity (--elf STAGE.elf --reference_elf BASELINE.elf --weights W | --model FILE [--stage S]) "
      "--tokenizer T --text FILE [--window 512] [--score_from N] [--max_windows N] [--json]");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = dk::cli::RequireNoPositional(args); !s.ok()) return Fail(s, dk::kExitUsage);
  if (absl::Status s = dk::cli::RequireRange("window", absl::GetFlag(FLAGS_window), 2, 1 << 20); !s.ok()) {
    return Fail(s, dk::kExitUsage);
  }
  if (absl::Status s = dk::cli::RequireRange("max_windows", absl::GetFlag(FLAGS_max_windows), 0, 1 << 20); !s.ok()) {
    return Fail(s, dk::kExitUsage);
  }
  if (absl::Status s = dk::cli::RequireRange("score_rows", absl::GetFlag(FLAGS_score_rows), 0, 1 << 16); !s.ok()) {
    return Fail(s, dk::kExitUsage);
  }
  if (absl::Status s = dk::cli::RequireFile("text", dk::UserPath(absl::GetFlag(FLAGS_text))); !s.ok()) {
    return Fail(s, absl::GetFlag(FLAGS_text).empty() ? dk::kExitUsage : dk::kExitFailure);
  }
  Stage stage, reference;
  stage.elf = absl::GetFlag(FLAGS_elf);
  stage.weights = dk::UserPath(absl::GetFlag(FLAGS_weights));
  reference.elf = absl::GetFlag(FLAGS_reference_elf);
  std::string tokenizer = dk::UserPath(absl::GetFlag(FLAGS_tokenizer));
  absl::StatusOr<std::optional<dk::tools::ModelChoice>> chosen = dk::tools::ModelFromFlags(
      "perplexity", stage.elf, absl::GetFlag(FLAGS_weights), absl::GetFlag(FLAGS_tokenizer));
  if (!chosen.ok()) {
    return Fail(chosen.status(), absl::IsInvalidArgument(chosen.status()) ? dk::kExitUsage : dk::kExitFailure);
  }
  if (*chosen) {
    const dk::tools::ModelChoice& m = **chosen;
    stage.elf = m.elf;
    stage.name = m.elfs.stages[m.stage].name;
    stage.weights = m.weights;
    tokenizer = m.tokenizer;
    if (reference.elf.empty()) {
      reference.elf = m.elfs.stages[0].elf_path;
      reference.name = m.elfs.stages[0].name;
    }
  } else {
    for (const absl::Status& s : {dk::cli::RequireFlag("elf", stage.elf), dk::cli::RequireFlag("reference_elf", reference.elf),
                                  dk::cli::RequireFlag("tokenizer", tokenizer)}) {
      if (!s.ok()) return Fail(s, dk::kExitUsage);
    }
    stage.elf = dk::UserPath(stage.elf);
  }
  if (reference.name.empty()) reference.elf = dk::UserPath(reference.elf);
  for (const absl::Status& s : {dk::cli::RequireFile("elf", stage.elf), dk::cli::RequireFile("reference_elf", reference.elf)}) {
    if (!s.ok()) return Fail(s);
  }
  // A stage's name: its ELF's file name without ".elf".
  auto name_of = [](const std::string& path) {
    std::string base = path.substr(path.find_last_of('/') + 1);
    if (base.size() > 4 && base.compare(base.size() - 4, 4, ".elf") == 0) base.resize(base.size() - 4);
    return base;
  };
  if (stage.name.empty()) stage.name = name_of(stage.elf);
  if (reference.name.empty()) reference.name = name_of(reference.elf);
  reference.weights = absl::GetFlag(FLAGS_reference_weights).empty()
                          ? stage.weights
                          : dk::UserPath(absl::GetFlag(FLAGS_reference_weights));
  absl::StatusOr<dk::tools::RuntimeOptions> runtime = dk::tools::ApplyRuntimeFlags();
  if (!runtime.ok()) return Fail(runtime.status(), dk::kExitUsage);
  if (absl::Status s = Run(stage, reference, tokenizer, dk::UserPath(absl::GetFlag(FLAGS_text)), *runtime); !s.ok()) {
    return Fail(s);
  }
  return dk::kExitOk;
}
