// Writes verify-gate goldens for the tiny test model (tests/profile/tiny.textproto) in
// the JSON shape of tools/hf_reference/make_goldens.py, from the scalar reference
// decoder (tests/e2e/reference_decoder.h: f64 math with bf16 rounding where HF's bf16
// forward rounds), fed the model's config and its synthetic weights directly.
//
// Why the reference decoder and not the decode ELF's own baseline stage: goldens the
// code under test made itself agree with that code whatever it computes, so a fault
// the baseline shares with the later stages (a kernel, the runtime, the graph builder,
// a pass every stage gets) could only ever fail the gate by nondeterminism. The
// reference decoder reads the shape and the weights, not the ELF, and shares no code
// with kernels/, runtime/, graph/ or optimizations/. Why not HF transformers: these
// tests must stay hermetic and fast (the real models' goldens come from HF; see
// tools/hf_reference).
//
// Like make_goldens.py: greedy, the prompt fed one token at a time over a KV cache,
// logits rounded to bf16 (HF's bf16 LM head, then .float()), top-5 by (-logit, id),
// the chosen id the top-1 (ties to the smaller id).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "elf/elf.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/reference_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/bf16.h"
#include "util/exit_codes.h"
#include "util/read_file.h"
#include "weights/weights.h"

ABSL_FLAG(std::string, config, "", "the model config (text proto of dk.elf.ModelShape)");
ABSL_FLAG(std::string, weights, "synthetic", "synthetic or synthetic:SEED (the verify default is seed 1)");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer for the prompts");
ABSL_FLAG(std::string, prompts_file, "", "prompts, one per line (verify's --prompts is a count)");
ABSL_FLAG(int, new_tokens, 32, "greedy tokens per prompt");
ABSL_FLAG(std::string, out, "", "goldens JSON to write");

namespace {

constexpr int kTopK = 5;

int Fail(const absl::Status& s) { return dk::ExitWithError("make_goldens", s); }

absl::StatusOr<uint64_t> SyntheticSeed(const std::string& spec) {
  if (spec == "synthetic") return 1;
  uint64_t seed = 0;
  if (spec.rfind("synthetic:", 0) == 0 && absl::SimpleAtoi(spec.substr(10), &seed)) return seed;
  return absl::InvalidArgumentError(
      absl::StrCat("--weights ", spec, ": only synthetic or synthetic:SEED (the reference reads no files)"));
}

struct Step {
  uint32_t id;
  std::vector<uint32_t> top;
  std::vector<float> top_logits;
};

// make_goldens.py's top_k: the logits as HF records them (bf16, then f32), ids by
// (-logit, id), the first kTopK.
Step TopK(const std::vector<double>& logits) {
  std::vector<float> z(logits.size());
  for (size_t i = 0; i < z.size(); ++i) z[i] = dk::RoundToBf16(static_cast<float>(logits[i]));
  std::vector<uint32_t> order(z.size());
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + kTopK, order.end(), [&](uint32_t a, uint32_t b) {
    return z[a] != z[b] ? z[a] > z[b] : a < b;
  });
  Step s;
  s.top.assign(order.begin(), order.begin() + kTopK);
  for (uint32_t id : s.top) s.top_logits.push_back(z[id]);
  s.id = s.top[0];
  return s;
}

// make_goldens.py's safe_decode: ids the tokenizer lacks (the model's vocab is larger
// than the test tokenizer's) become "<id:N>".
std::string SafeDecode(const dk::tokenizer::Tokenizer& tok, const std::vector<uint32_t>& ids) {
  std::string out;
  std::vector<int32_t> run;
  auto flush = [&] {
    if (run.empty()) return;
    auto text = tok.Decode(run);
    out += text.ok() ? *text : "";
    run.clear();
  };
  for (uint32_t id : ids) {
    if (id < static_cast<uint32_t>(tok.vocab_size())) {
      run.push_back(static_cast<int32_t>(id));
    } else {
      flush();
      absl::StrAppend(&out, "<id:", id, ">");
    }
  }
  flush();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string config_path = absl::GetFlag(FLAGS_config);
  auto config = dk::ReadRegularFile(config_path, "--config");
  if (!config.ok()) return Fail(config.status());
  auto shape = dk::elf::ParseModelShapeText(*config, config_path);
  if (!shape.ok()) return Fail(shape.status());
  auto seed = SyntheticSeed(absl::GetFlag(FLAGS_weights));
  if (!seed.ok()) return Fail(seed.status());
  auto weights = dk::weights::MakeSyntheticWeights(*shape, *seed);
  if (!weights.ok()) return Fail(weights.status());
  auto tok = dk::tokenizer::Tokenizer::Load(absl::GetFlag(FLAGS_tokenizer));
  if (!tok.ok()) return Fail(tok.status());
  std::ifstream in(absl::GetFlag(FLAGS_prompts_file));
  std::stringstream text;
  text << in.rdbuf();
  const int n = absl::GetFlag(FLAGS_new_tokens);

  nlohmann::json j;
  j["model"] = shape->name();
  j["weights_digest"] = weights->Digest();
  j["transformers_version"] = "none: recorded by the scalar reference decoder";
  j["torch_version"] = "none";
  j["generator"] = "tests/profile/make_goldens.cc (tests/e2e/reference_decoder.h)";
  j["new_tokens"] = n;
  j["prompts"] = nlohmann::json::array();
  for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipWhitespace())) {
    auto ids = (*tok)->Encode(line);
    if (!ids.ok()) return Fail(ids.status());
    const std::vector<uint32_t> prompt_ids(ids->begin(), ids->end());
    if (prompt_ids.empty() || static_cast<int64_t>(prompt_ids.size()) + n > shape->max_context()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "prompt '", line, "': ", prompt_ids.size(), " ids + ", n, " new tokens do not fit max_context ",
          shape->max_context())));
    }
    dk::testing::ReferenceDecoder ref(*shape, *weights);
    std::vector<double> logits;
    for (uint32_t id : prompt_ids) logits = ref.Step(id);
    nlohmann::json steps = nlohmann::json::array();
    std::vector<uint32_t> out_ids;
    for (int i = 0; i < n; ++i) {
      const Step s = TopK(logits);
      steps.push_back({{"id", s.id}, {"top5", s.top}, {"top5_logits", s.top_logits}});
      out_ids.push_back(s.id);
      if (i + 1 < n) logits = ref.Step(s.id);
    }
    j["prompts"].push_back({{"text", std::string(line)},
                            {"prompt_ids", prompt_ids},
                            {"text_out", SafeDecode(**tok, out_ids)},
                            {"steps", steps}});
  }
  if (j["prompts"].empty()) return Fail(absl::InvalidArgumentError("no prompts in --prompts_file"));
  std::ofstream out(absl::GetFlag(FLAGS_out));
  out << j.dump(1) << "\n";
  return out ? dk::kExitOk : dk::kExitFailure;
}
