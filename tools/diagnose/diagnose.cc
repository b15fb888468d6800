// Diagnosis aid, never a gate (docs/architecture.md s.6): how close each layer's output of a
// decode ELF is to HuggingFace's, for one prompt. Feeds the prompt ids through the ELF
// on the CPU backend and, after the last one, compares every layer's output (host value
// "L<i>.h_out", bf16) with HF's at the same (last) position: cosine, max |a-b| and
// relative L2, printed as a table; then the embedding ("h0"), the final norm
// ("final.xn") and the top-5 of the logits. The ELF must keep every layer output on the
// host: the baseline `decode` (or `decode_aligned`) stage, not buffer_object_reuse or
// later ones, where those activations are INTERMEDIATE BOs.
//
// Record the HF side first (tools/hf_reference/README.md, "Per-layer hidden states"),
// then build the baseline ELF and run (each command is one line; relative paths are
// resolved against the directory `bazel run` was called from):
//   OB="$(./bazelw info output_base)"
//   .venv-ref/bin/python tools/hf_reference/hidden_states.py --gguf "$OB/external/smollm2_135m/model.gguf" --tokenizer tokenizer/testdata/smollm2_tokenizer.json --model-name smollm2_135m --prompt "The capital of France is" --out /tmp/smollm2_hidden.json
//   ./bazelw build //models/smollm2_135m:decode
//   ./bazelw run //tools/diagnose -- --elf bazel-bin/models/smollm2_135m/decode.elf --weights "$OB/external/smollm2_135m/model.gguf" --hf /tmp/smollm2_hidden.json
//
// Exit status (util/exit_codes.h): 0 when the comparison ran (whatever the numbers),
// 1 on an error (bad input, an ELF without host layer outputs, shape mismatch), 2 a
// usage error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tools/diagnose/metrics.h"
#include "util/bf16.h"
#include "util/cli.h"
#include "util/exit_codes.h"
#include "util/status.h"
#include "util/read_file.h"
#include "util/thread_pool.h"
#include "util/user_path.h"

ABSL_FLAG(std::string, elf, "", "a decode ELF whose layer outputs are host values (baseline `decode`)");
ABSL_FLAG(std::string, weights, "",
          "weights: an HF checkpoint directory, a .gguf file, or synthetic[:SEED]");
ABSL_FLAG(std::string, hf, "", "JSON written by tools/hf_reference/hidden_states.py");
ABSL_FLAG(double, warn_cosine, 0.99, "mark layers whose cosine is below this");

namespace {

using json = nlohmann::json;
using dk::diagnose::Compare;
using dk::diagnose::Row;

using dk::UserPath;  // paths are relative to where `bazel run` was called

struct HfRecord {
  std::string model, weights_digest, prompt;
  std::vector<uint32_t> prompt_ids;
  std::vector<float> embedding, final_norm;  // empty when absent
  std::vector<std::vector<float>> layers;
  std::vector<int64_t> top_ids;
  std::vector<double> top_logits;
};

absl::StatusOr<std::vector<float>> FloatArray(const json& v, const std::string& what) {
  if (!v.is_array()) return absl::InvalidArgumentError(absl::StrCat(what, " is not an array"));
  std::vector<float> out;
  out.reserve(v.size());
  for (const json& x : v) {
    if (!x.is_number()) return absl::InvalidArgumentError(absl::StrCat(what, " holds a non-number"));
    out.push_back(static_cast<float>(x.get<double>()));
  }
  return out;
}

absl::StatusOr<HfRecord> ReadHf(const std::string& path) {
  DK_ASSIGN_OR_RETURN(const std::string text, dk::ReadRegularFile(path, "reference record"));
  json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(path, ": ", why)); };
  if (root.is_discarded() || !root.is_object()) return bad("not a JSON object");
  HfRecord r;
  for (auto [key, dst] : {std::pair<const char*, std::string*>{"model", &r.model},
                          {"weights_digest", &r.weights_digest}}) {
    if (!root.contains(key) || !root[key].is_string()) return bad(absl::StrCat("no string '", key, "'"));
    *dst = root[key].get<std::string>();
  }
  if (root.contains("prompt") && root["prompt"].is_string()) r.prompt = root["prompt"].get<std::string>();
  if (!root.contains("prompt_ids") || !root["prompt_ids"].is_array() || root["prompt_ids"].empty()) {
    return bad("no non-empty 'prompt_ids'");
  }
  // Read as the JSON number it is and range-checked before narrowing: a cast alone
  // would take 2^32 + 5 for id 5, a valid id, and diagnose another prompt than HF ran.
  // (Ids below 2^32 are checked against the vocab once the ELF is read.)
  for (size_t i = 0; i < root["prompt_ids"].size(); ++i) {
    const json& x = root["prompt_ids"][i];
    if (!x.is_number_integer()) return bad(absl::StrCat("prompt_ids[", i, "] = ", x.dump(), " is not an id"));
    if (!x.is_number_unsigned() || x.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      return bad(absl::StrCat("prompt_ids[", i, "] = ", x.dump(), " is not an id (outside [0, 2^32 - 1])"));
    }
    r.prompt_ids.push_back(static_cast<uint32_t>(x.get<uint64_t>()));
  }
  if (!root.contains("layers") || !root["layers"].is_array() || root["layers"].empty()) {
    return bad("no non-empty 'layers'");
  }
  for (size_t i = 0; i < root["layers"].size(); ++i) {
    DK_ASSIGN_OR_RETURN(std::vector<float> v, FloatArray(root["layers"][i], absl::StrCat(path, ": layers[", i, "]")));
    r.layers.push_back(std::move(v));
  }
  for (auto [key, dst] : {std::pair<const char*, std::vector<float>*>{"embedding", &r.embedding},
                          {"final_norm", &r.final_norm}}) {
    if (!root.contains(key)) continue;
    DK_ASSIGN_OR_RETURN(*dst, FloatArray(root[key], absl::StrCat(path, ": ", key)));
  }
  if (root.contains("logits_top5") && root["logits_top5"].is_object()) {
    const json& t = root["logits_top5"];
    if (t.contains("ids") && t["ids"].is_array()) {
      for (const json& x : t["ids"]) r.top_ids.push_back(x.is_number_integer() ? x.get<int64_t>() : -1);
    }
    if (t.contains("logits") && t["logits"].is_array()) {
      for (const json& x : t["logits"]) r.top_logits.push_back(x.is_number() ? x.get<double>() : 0.0);
    }
  }
  return r;
}

// The ELF's layer outputs must be host values that the host actually receives: a
// program value read back by an OUTPUT BO or written by a host step.
absl::Status CheckHostValue(const dk::elf::Program& p, const std::string& elf, const std::string& name) {
  bool listed = false;
  for (const auto& v : p.values()) listed |= v.name() == name;
  std::string stages;
  for (const auto& l : p.lineage()) {
    if (l.applied()) absl::StrAppend(&stages, stages.empty() ? "" : ", ", l.pass());
  }
  int intermediate = 0;
  for (const auto& b : p.bos()) intermediate += b.category() == dk::elf::INTERMEDIATE;
  const std::string advice = absl::StrCat(
      " (passes applied: ", stages.empty() ? "none" : stages, "; ", intermediate,
      " INTERMEDIATE BOs). Layer outputs stay on the device (INTERMEDIATE) after "
      "buffer_object_reuse; diagnose the baseline ELF instead, e.g. "
      "bazel-bin/models/<model>/decode.elf");
  if (!listed) {
    return absl::FailedPreconditionError(
        absl::StrCat(elf, " has no host value '", name, "'", advice));
  }
  for (const auto& b : p.bos()) {
    if (b.host_value() == name && b.category() == dk::elf::OUTPUT) return absl::OkStatus();
  }
  for (const auto& s : p.steps()) {
    if (!s.has_host()) continue;
    for (const auto& bind : s.host().bindings()) {
      if (bind.value() == name) return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      elf, ": value '", name, "' is listed but no OUTPUT BO or host step produces it on the host",
      advice));
}

// A host value of the decoder as floats (bf16 or f32), checked to hold `n` elements.
absl::StatusOr<std::vector<float>> ReadValue(const dk::runtime::Decoder& d, const std::string& name,
                                             size_t n) {
  dk::elf::DType dtype = dk::elf::DTYPE_UNSPECIFIED;
  for (const auto& v : d.program().values()) {
    if (v.name() == name) dtype = v.dtype();
  }
  size_t bytes = 0;
  const void* data = d.value(name, &bytes);
  if (data == nullptr) return absl::NotFoundError(absl::StrCat("no host value '", name, "'"));
  std::vector<float> out(n);
  if (dtype == dk::elf::BF16 && bytes == 2 * n) {
    const auto* b = static_cast<const dk::bf16*>(data);
    for (size_t i = 0; i < n; ++i) out[i] = dk::Bf16ToF32(b[i]);
  } else if (dtype == dk::elf::F32 && bytes == 4 * n) {
    const auto* f = static_cast<const float*>(data);
    for (size_t i = 0; i < n; ++i) out[i] = f[i];
  } else {
    return absl::InvalidArgumentError(absl::StrCat("host value '", name, "' is ", bytes,
                                                   " bytes of dtype ", dk::elf::DType_Name(dtype),
                                                   "; the reference has ", n, " elements"));
  }
  return out;
}

// What the comparison runs on, loaded and checked from the flags.
struct Inputs {
  std::string elf_path, weights_spec, hf_path;
  HfRecord hf;
  dk::elf::Program program;
  std::string digest;  // of the weights
  std::unique_ptr<dk::runtime::CpuSession> session;
};

// The HF record and the ELF, checked to match: as many layers, each `hidden` floats,
// every layer output a host value.
absl::Status LoadReference(Inputs& in) {
  DK_ASSIGN_OR_RETURN(in.hf, ReadHf(in.hf_path));
  DK_ASSIGN_OR_RETURN(in.program, dk::elf::ReadElfFile(in.elf_path));
  const dk::elf::ModelShape& m = in.program.model();
  const size_t hidden = static_cast<size_t>(m.hidden());
  if (static_cast<int>(in.hf.layers.size()) != m.n_layers()) {
    return absl::InvalidArgumentError(absl::StrCat(in.hf_path, " has ", in.hf.layers.size(), " layers; ",
                                                   in.elf_path, " has ", m.n_layers()));
  }
  for (size_t i = 0; i < in.hf.layers.size(); ++i) {
    if (in.hf.layers[i].size() != hidden) {
      return absl::InvalidArgumentError(absl::StrCat(in.hf_path, ": layers[", i, "] has ", in.hf.layers[i].size(),
                                                     " floats; hidden is ", hidden));
    }
  }
  for (int i = 0; i < m.n_layers(); ++i) {
    DK_RETURN_IF_ERROR(CheckHostValue(in.program, in.elf_path, absl::StrCat("L", i, ".h_out")));
  }
  if (static_cast<int>(in.hf.prompt_ids.size()) > m.max_context()) {
    return absl::OutOfRangeError("the prompt is longer than the model's max_context");
  }
  for (uint32_t id : in.hf.prompt_ids) {
    if (static_cast<int64_t>(id) >= m.vocab()) {
      return absl::OutOfRangeError(absl::StrCat("prompt id ", id, " >= vocab ", m.vocab()));
    }
  }
  return absl::OkStatus();
}

// The weights (a loud warning when they are not HF's), a session, and the prompt fed.
absl::Status RunPrompt(Inputs& in) {
  std::fprintf(stderr, "[diagnose] loading weights (%s) ...\n", in.weights_spec.c_str());
  DK_ASSIGN_OR_RETURN(auto weights, dk::runtime::LoadWeightsSpec(in.weights_spec, in.program.model(), &dk::SharedThreadPool()));
  in.digest = weights->Digest();
  if (in.digest != in.hf.weights_digest) {
    std::fprintf(stderr,
                 "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
                 "!!! WARNING: WEIGHTS DIFFER FROM THE HF REFERENCE'S; the numbers below\n"
                 "!!! compare different models and mean nothing.\n"
                 "!!!   ours (%s): %s\n!!!   HF   (%s): %s\n"
                 "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n",
                 in.weights_spec.c_str(), in.digest.c_str(), in.hf_path.c_str(), in.hf.weights_digest.c_str());
  }
  dk::runtime::SessionOptions options;
  options.pool = &dk::SharedThreadPool();  // the tool's one pool, as its loader's
  DK_ASSIGN_OR_RETURN(in.session, dk::runtime::CpuSession::Open(in.program, in.elf_path, weights, options));
  return dk::runtime::FeedPrompt(in.session->decoder(), in.hf.prompt_ids);
}

// One row per compared value: the embedding and final norm when both sides have
// them, every layer's output.
absl::StatusOr<std::vector<Row>> CompareValues(const Inputs& in) {
  const dk::runtime::Decoder& decoder = in.session->decoder();
  const dk::elf::ModelShape& m = in.program.model();
  const size_t hidden = static_cast<size_t>(m.hidden());
  std::vector<Row> rows;
  auto add_row = [&](const std::string& label, const std::string& value,
                     const std::vector<float>& ref) -> absl::Status {
    DK_ASSIGN_OR_RETURN(const std::vector<float> ours, ReadValue(decoder, value, ref.size()));
    rows.push_back({label, Compare(ours.data(), ref.data(), static_cast<int64_t>(ref.size()))});
    return absl::OkStatus();
  };
  if (in.hf.embedding.size() == hidden && decoder.value("h0", nullptr) != nullptr) {
    DK_RETURN_IF_ERROR(add_row("emb", "h0", in.hf.embedding));
  }
  for (int i = 0; i < m.n_layers(); ++i) {
    DK_RETURN_IF_ERROR(add_row(absl::StrCat(i), absl::StrCat("L", i, ".h_out"), in.hf.layers[i]));
  }
  if (in.hf.final_norm.size() == hidden && decoder.value("final.xn", nullptr) != nullptr) {
    DK_RETURN_IF_ERROR(add_row("final_norm", "final.xn", in.hf.final_norm));
  }
  return rows;
}

// The table, the worst layer, and the top-5 of both sides.
void PrintReport(const Inputs& in, const std::vector<Row>& rows) {
  const HfRecord& hf = in.hf;
  std::printf("model %s, ELF %s\n", in.program.model().name().c_str(), in.elf_path.c_str());
  std::printf("weights %s (%s HF's)\n", in.digest.c_str(), in.digest == hf.weights_digest ? "matches" : "DIFFERS FROM");
  std::printf("prompt %s ids [%s], compared at position %zu (the last)\n\n",
              hf.prompt.empty() ? "(ids only)" : absl::StrCat("\"", hf.prompt, "\"").c_str(),
              absl::StrJoin(hf.prompt_ids, ", ").c_str(), hf.prompt_ids.size() - 1);
  std::printf("%s", dk::diagnose::FormatTable(rows).c_str());

  const double warn = absl::GetFlag(FLAGS_warn_cosine);
  const Row* worst = nullptr;
  const Row* first_low = nullptr;
  for (const Row& r : rows) {
    if (worst == nullptr || r.m.cosine < worst->m.cosine) worst = &r;
    if (first_low == nullptr && r.m.cosine < warn) first_low = &r;
  }
  std::printf("\nmin cosine %.6f at %s; ", worst->m.cosine, worst->name.c_str());
  if (first_low != nullptr) {
    std::printf("first below %.4g: %s\n", warn, first_low->name.c_str());
  } else {
    std::printf("none below %.4g\n", warn);
  }

  const dk::runtime::StepResult& last = in.session->decoder().last();
  std::vector<int64_t> ours_top(last.top_ids.begin(), last.top_ids.end());
  std::string ours_s, ref_s;
  for (size_t i = 0; i < ours_top.size(); ++i) {
    absl::StrAppend(&ours_s, i ? ", " : "", ours_top[i], " (", absl::StrFormat("%.3f", last.top_logits[i]), ")");
  }
  for (size_t i = 0; i < hf.top_ids.size(); ++i) {
    absl::StrAppend(&ref_s, i ? ", " : "", hf.top_ids[i],
                    i < hf.top_logits.size() ? absl::StrFormat(" (%.3f)", hf.top_logits[i]) : "");
  }
  std::printf("top-5 ours: %s\ntop-5 HF:   %s\ntop-5: %s\n", ours_s.c_str(), ref_s.c_str(),
              hf.top_ids.empty() ? "no HF top-5 in the JSON" : dk::diagnose::CompareTopK(ours_top, hf.top_ids).c_str());
}

int Fail(const absl::Status& s, int code = dk::kExitFailure) { return dk::ExitWithError("diagnose", s, code); }

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "diagnose --elf DECODE.elf --weights DIR|FILE.gguf|synthetic --hf HIDDEN.json");
  absl::ParseCommandLine(argc, argv);
  Inputs in;
  in.elf_path = UserPath(absl::GetFlag(FLAGS_elf));
  in.weights_spec = UserPath(absl::GetFlag(FLAGS_weights));
  in.hf_path = UserPath(absl::GetFlag(FLAGS_hf));
  for (const absl::Status& s : {dk::cli::RequireFlag("elf", in.elf_path),
                                dk::cli::RequireFlag("weights", in.weights_spec),
                                dk::cli::RequireFlag("hf", in.hf_path)}) {
    if (!s.ok()) return Fail(s, dk::kExitUsage);
  }
  for (const absl::Status& s : {dk::cli::RequireFile("elf", in.elf_path),
                                dk::cli::RequireFile("hf", in.hf_path)}) {
    if (!s.ok()) return Fail(s);
  }
  if (absl::Status s = LoadReference(in); !s.ok()) return Fail(s);
  if (absl::Status s = RunPrompt(in); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<Row>> rows = CompareValues(in);
  if (!rows.ok()) return Fail(rows.status());
  PrintReport(in, *rows);
  return dk::kExitOk;
}
