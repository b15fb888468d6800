#include "verify/goldens.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "util/read_file.h"
#include "util/status.h"

namespace dk::verify {
namespace {

using json = nlohmann::json;

// JSON-field readers: each error names the source and the field's JSON path.
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Error(absl::string_view path, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("goldens ", source_, ": ", path, ": ", what));
  }

  absl::StatusOr<const json*> Field(const json& obj, absl::string_view parent,
                                    const char* name) const {
    std::string path = parent.empty() ? std::string(name) : absl::StrCat(parent, ".", name);
    if (!obj.is_object()) return Error(parent.empty() ? "<root>" : parent, "not an object");
    auto it = obj.find(name);
    if (it == obj.end()) return Error(path, "missing field");
    return &*it;
  }

  absl::StatusOr<std::string> String(const json& obj, absl::string_view parent,
                                     const char* name) const {
    DK_ASSIGN_OR_RETURN(const json* v, Field(obj, parent, name));
    if (!v->is_string()) return Error(Path(parent, name), "expected a string");
    return v->get<std::string>();
  }

  absl::StatusOr<int64_t> Int(const json& obj, absl::string_view parent, const char* name) const {
    DK_ASSIGN_OR_RETURN(const json* v, Field(obj, parent, name));
    if (!v->is_number_integer()) return Error(Path(parent, name), "expected an integer");
    return v->get<int64_t>();
  }

  absl::StatusOr<std::vector<uint32_t>> Ids(const json& obj, absl::string_view parent,
                                            const char* name) const {
    DK_ASSIGN_OR_RETURN(const json* v, Field(obj, parent, name));
    std::string path = Path(parent, name);
    if (!v->is_array()) return Error(path, "expected an array of token ids");
    std::vector<uint32_t> ids;
    ids.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
          e.get<int64_t>() > int64_t{UINT32_MAX}) {
        return Error(absl::StrCat(path, "[", i, "]"), "expected a token id (uint32)");
      }
      ids.push_back(static_cast<uint32_t>(e.get<int64_t>()));
    }
    return ids;
  }

  absl::StatusOr<std::vector<float>> Floats(const json& obj, absl::string_view parent,
                                            const char* name) const {
    DK_ASSIGN_OR_RETURN(const json* v, Field(obj, parent, name));
    std::string path = Path(parent, name);
    if (!v->is_array()) return Error(path, "expected an array of numbers");
    std::vector<float> out;
    out.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_number()) return Error(absl::StrCat(path, "[", i, "]"), "expected a number");
      // A logit is a finite float: a larger value would become inf (and compare
      // equal to every other inf), so it is malformed, not clamped.
      const double d = (*v)[i].get<double>();
      if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
        return Error(absl::StrCat(path, "[", i, "]"),
                     absl::StrCat(d, " is not a finite float"));
      }
      out.push_back(static_cast<float>(d));
    }
    return out;
  }

  static std::string Path(absl::string_view parent, const char* name) {
    return parent.empty() ? std::string(name) : absl::StrCat(parent, ".", name);
  }

 private:
  std::string source_;
};

absl::StatusOr<GoldenPrompt> ParsePrompt(const Reader& r, const json& p, const std::string& path,
                                         int new_tokens) {
  GoldenPrompt out;
  DK_ASSIGN_OR_RETURN(out.text, r.String(p, path, "text"));
  DK_ASSIGN_OR_RETURN(out.prompt_ids, r.Ids(p, path, "prompt_ids"));
  DK_ASSIGN_OR_RETURN(out.text_out, r.String(p, path, "text_out"));
  if (out.prompt_ids.empty()) return r.Error(Reader::Path(path, "prompt_ids"), "empty");
  DK_ASSIGN_OR_RETURN(const json* steps, r.Field(p, path, "steps"));
  std::string steps_path = Reader::Path(path, "steps");
  if (!steps->is_array()) return r.Error(steps_path, "expected an array");
  if (static_cast<int64_t>(steps->size()) != new_tokens) {
    return r.Error(steps_path,
                   absl::StrCat("has ", steps->size(), " steps, new_tokens is ", new_tokens));
  }
  out.sequence.prompt = out.text;
  for (size_t i = 0; i < steps->size(); ++i) {
    const json& s = (*steps)[i];
    std::string sp = absl::StrCat(steps_path, "[", i, "]");
    StepRecord step;
    DK_ASSIGN_OR_RETURN(int64_t id, r.Int(s, sp, "id"));
    if (id < 0 || id > int64_t{UINT32_MAX}) {
      return r.Error(Reader::Path(sp, "id"), "expected a token id (uint32)");
    }
    step.id = static_cast<uint32_t>(id);
    DK_ASSIGN_OR_RETURN(step.top5, r.Ids(s, sp, "top5"));
    DK_ASSIGN_OR_RETURN(step.top5_logits, r.Floats(s, sp, "top5_logits"));
    if (step.top5_logits.empty()) return r.Error(Reader::Path(sp, "top5_logits"), "empty");
    absl::Status st = ValidateStep(step, /*k=*/5, sp);
    if (!st.ok()) return r.Error(sp, st.message());
    out.sequence.steps.push_back(std::move(step));
  }
  return out;
}

}  // namespace

std::string Goldens::Reference() const {
  if (!reference.empty()) return reference;
  if (!transformers_version.empty() && transformers_version.rfind("none", 0) != 0) {
    return absl::StrCat("transformers ", transformers_version, " ",
                        dtype.empty() || dtype == "bfloat16" ? "bf16" : dtype);
  }
  return absl::StrCat(generator.empty() ? "unknown generator" : generator, " (", transformers_version, ")");
}

std::vector<Sequence> Goldens::Sequences(int n) const {
  size_t count =
      (n < 0 || static_cast<size_t>(n) > prompts.size()) ? prompts.size() : static_cast<size_t>(n);
  std::vector<Sequence> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.push_back(prompts[i].sequence);
  return out;
}

absl::Status ValidateStep(const StepRecord& step, int k, absl::string_view where) {
  auto err = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  if (static_cast<int>(step.top5.size()) != k) {
    return err(absl::StrCat("top5 has ", step.top5.size(), " ids, expected ", k));
  }
  std::set<uint32_t> distinct(step.top5.begin(), step.top5.end());
  if (static_cast<int>(distinct.size()) != k) return err("top5 ids are not distinct");
  if (step.id != step.top5[0]) {
    return err(absl::StrCat("chosen id ", step.id, " is not top5[0] (", step.top5[0],
                            "): a greedy choice is the top-1"));
  }
  if (step.top5_logits.empty()) return absl::OkStatus();
  if (static_cast<int>(step.top5_logits.size()) != k) {
    return err(absl::StrCat("top5_logits has ", step.top5_logits.size(), " values, expected ", k));
  }
  for (int i = 0; i < k; ++i) {
    if (std::isnan(step.top5_logits[i])) return err(absl::StrCat("top5_logits[", i, "] is NaN"));
  }
  for (int i = 1; i < k; ++i) {
    float prev = step.top5_logits[i - 1], cur = step.top5_logits[i];
    if (cur > prev) {
      return err(
          absl::StrCat("top5_logits not sorted: [", i - 1, "]=", prev, " < [", i, "]=", cur));
    }
    if (cur == prev && step.top5[i] < step.top5[i - 1]) {
      return err(absl::StrCat("tied logits ", cur, " at ranks ", i, " and ", i + 1, " list id ",
                              step.top5[i - 1], " before ", step.top5[i],
                              ": ties must go to the smaller id"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Goldens> ParseGoldens(absl::string_view json_text, absl::string_view source) {
  Reader r(source);
  json root = json::parse(json_text.begin(), json_text.end(), /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) return r.Error("<root>", "not valid JSON");
  Goldens g;
  DK_ASSIGN_OR_RETURN(g.model, r.String(root, "", "model"));
  DK_ASSIGN_OR_RETURN(g.weights_digest, r.String(root, "", "weights_digest"));
  if (g.weights_digest.rfind("sha256:", 0) != 0) {
    return r.Error("weights_digest",
                   absl::StrCat("expected \"sha256:<hex>\", got \"", g.weights_digest, "\""));
  }
  DK_ASSIGN_OR_RETURN(g.transformers_version, r.String(root, "", "transformers_version"));
  DK_ASSIGN_OR_RETURN(g.torch_version, r.String(root, "", "torch_version"));
  for (auto [key, field] : {std::pair<const char*, std::string*>{"reference", &g.reference},
                             {"dtype", &g.dtype},
                             {"generator", &g.generator}}) {
    if (root.contains(key)) {
      DK_ASSIGN_OR_RETURN(*field, r.String(root, "", key));
    }
  }
  DK_ASSIGN_OR_RETURN(int64_t new_tokens, r.Int(root, "", "new_tokens"));
  if (new_tokens <= 0 || new_tokens > 1 << 20) {
    return r.Error("new_tokens", absl::StrCat("out of range: ", new_tokens));
  }
  g.new_tokens = static_cast<int>(new_tokens);
  DK_ASSIGN_OR_RETURN(const json* prompts, r.Field(root, "", "prompts"));
  if (!prompts->is_array()) return r.Error("prompts", "expected an array");
  if (prompts->empty()) return r.Error("prompts", "empty");
  for (size_t i = 0; i < prompts->size(); ++i) {
    DK_ASSIGN_OR_RETURN(
        GoldenPrompt p,
        ParsePrompt(r, (*prompts)[i], absl::StrCat("prompts[", i, "]"), g.new_tokens));
    g.prompts.push_back(std::move(p));
  }
  return g;
}

absl::StatusOr<Goldens> LoadGoldens(const std::string& path) {
  DK_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, "goldens"));
  return ParseGoldens(text, path);
}

}  // namespace dk::verify
