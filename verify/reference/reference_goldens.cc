#include "verify/reference/reference_goldens.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "util/bf16.h"
#include "util/status.h"
#include "verify/reference/reference_decoder.h"

namespace dk::verify {
namespace {

using json = nlohmann::json;
constexpr int kTopK = 5;

struct Step {
  uint32_t id = 0;
  std::vector<uint32_t> top;
  std::vector<float> top_logits;
};

// make_goldens.py's top_k: the logits as HF records them (bf16, then f32), ids by
// (-logit, id), the first kTopK.
Step TopK(const std::vector<double>& logits) {
  std::vector<float> z(logits.size());
  for (size_t i = 0; i < z.size(); ++i) z[i] = RoundToBf16(static_cast<float>(logits[i]));
  std::vector<uint32_t> order(z.size());
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + kTopK, order.end(),
                    [&](uint32_t a, uint32_t b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
  Step s;
  s.top.assign(order.begin(), order.begin() + kTopK);
  for (uint32_t id : s.top) s.top_logits.push_back(z[id]);
  s.id = s.top[0];
  return s;
}

// make_goldens.py's safe_decode: ids the tokenizer lacks (a synthetic model's vocab is
// larger than its test tokenizer's) become "<id:N>".
std::string SafeDecode(const tokenizer::Tokenizer& tok, const std::vector<uint32_t>& ids) {
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

std::string Compact(const json& j) { return j.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace); }

}  // namespace

absl::StatusOr<std::string> RecordReferenceGoldens(const elf::ModelShape& shape, const weights::Weights& weights,
                                                   const tokenizer::Tokenizer& tok,
                                                   const std::vector<std::string>& prompts,
                                                   const ReferenceGoldensOptions& options) {
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts");
  if (options.new_tokens < 1) return absl::InvalidArgumentError("new_tokens must be >= 1");
  DK_RETURN_IF_ERROR(weights::CheckWeights(weights, shape));
  const int n = options.new_tokens;
  // The header fields in make_goldens.py's order; transformers_version and
  // torch_version stay (verify/goldens.h requires them) and say "none".
  std::string out = "{\n";
  auto field = [&](const char* key, const json& value) {
    absl::StrAppend(&out, " ", Compact(json(key)), ": ", Compact(value), ",\n");
  };
  field("model", options.model.empty() ? shape.name() : options.model);
  field("weights_digest", weights.Digest());
  field("reference", kReferenceDecoderName);
  field("transformers_version", "none: recorded by the decodekit reference decoder");
  field("torch_version", "none");
  field("dtype", "bfloat16");
  field("generator", options.generator.empty() ? "verify/reference/reference_goldens.cc" : options.generator);
  field("weights_source", weights.source());
  field("new_tokens", n);
  out += " \"prompts\": [\n";
  for (size_t p = 0; p < prompts.size(); ++p) {
    DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, tok.Encode(prompts[p]));
    const std::vector<uint32_t> prompt_ids(ids.begin(), ids.end());
    if (prompt_ids.empty() || static_cast<int64_t>(prompt_ids.size()) + n > shape.max_context()) {
      return absl::InvalidArgumentError(absl::StrCat("prompt '", prompts[p], "': ", prompt_ids.size(), " ids + ", n,
                                                     " new tokens do not fit max_context ", shape.max_context()));
    }
    for (uint32_t id : prompt_ids) {
      if (id >= static_cast<uint32_t>(shape.vocab())) {
        return absl::InvalidArgumentError(absl::StrCat("prompt '", prompts[p], "': token id ", id,
                                                       " is outside the model's vocab of ", shape.vocab()));
      }
    }
    ReferenceDecoder ref(shape, weights);
    std::vector<double> logits;
    for (uint32_t id : prompt_ids) logits = ref.Step(id);
    std::vector<Step> steps;
    std::vector<uint32_t> out_ids;
    for (int i = 0; i < n; ++i) {
      steps.push_back(TopK(logits));
      out_ids.push_back(steps.back().id);
      if (i + 1 < n) logits = ref.Step(steps.back().id);
    }
    absl::StrAppend(&out, "  {\n   \"text\": ", Compact(json(prompts[p])), ",\n   \"prompt_ids\": ",
                    Compact(json(prompt_ids)), ",\n   \"steps\": [\n");
    for (size_t i = 0; i < steps.size(); ++i) {
      const json s = {{"id", steps[i].id}, {"top5", steps[i].top}, {"top5_logits", steps[i].top_logits}};
      absl::StrAppend(&out, "    {\"id\": ", Compact(s["id"]), ", \"top5\": ", Compact(s["top5"]),
                      ", \"top5_logits\": ", Compact(s["top5_logits"]), "}", i + 1 < steps.size() ? "," : "", "\n");
    }
    absl::StrAppend(&out, "   ],\n   \"text_out\": ", Compact(json(SafeDecode(tok, out_ids))), "\n  }",
                    p + 1 < prompts.size() ? "," : "", "\n");
  }
  out += " ]\n}\n";
  return out;
}

}  // namespace dk::verify
