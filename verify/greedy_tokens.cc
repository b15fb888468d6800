#include "verify/greedy_tokens.h"

#include <cstdint>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "util/read_file.h"
#include "util/status.h"
#include "weights/sha256.h"

namespace dk::verify {
namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "decodekit greedy tokens 1";

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Field readers whose errors name the file and the field.
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Error(absl::string_view path, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("greedy tokens ", source_, ": ", path, ": ", what));
  }

  absl::StatusOr<const json*> Field(const json& obj, absl::string_view path, const char* name) const {
    if (!obj.is_object()) return Error(path, "not an object");
    auto it = obj.find(name);
    if (it == obj.end()) return Error(absl::StrCat(path, ".", name), "missing field");
    return &*it;
  }

  absl::StatusOr<std::string> String(const json& obj, absl::string_view path, const char* name) const {
    DK_ASSIGN_OR_RETURN(const json* v, Field(obj, path, name));
    if (!v->is_string()) return Error(absl::StrCat(path, ".", name), "expected a string");
    return v->get<std::string>();
  }

  absl::StatusOr<int64_t> Int(const json& obj, absl::string_view path, const char* name) const {
    DK_ASSIGN_OR_RETURN(const json* v, Field(obj, path, name));
    if (!v->is_number_integer()) return Error(absl::StrCat(path, ".", name), "expected an integer");
    return v->get<int64_t>();
  }

  absl::StatusOr<std::vector<uint32_t>> U32s(const json& obj, absl::string_view path, const char* name) const {
    DK_ASSIGN_OR_RETURN(const json* v, Field(obj, path, name));
    if (!v->is_array()) return Error(absl::StrCat(path, ".", name), "expected an array");
    std::vector<uint32_t> out;
    for (const json& e : *v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > int64_t{UINT32_MAX}) {
        return Error(absl::StrCat(path, ".", name), "expected uint32 values");
      }
      out.push_back(static_cast<uint32_t>(e.get<int64_t>()));
    }
    return out;
  }

 private:
  std::string source_;
};

}  // namespace

absl::StatusOr<std::string> FileSha256(const std::string& path) {
  DK_ASSIGN_OR_RETURN(const std::string bytes, ReadRegularFile(path, "file", kMaxElfFileBytes));
  return weights::Sha256Hex(bytes);
}

absl::StatusOr<std::string> FormatGreedyTokens(const std::string& elf_path, const GateSetup& setup,
                                               const std::vector<Sequence>& sequences) {
  DK_RETURN_IF_ERROR(CheckGoldens(setup));
  if (static_cast<int>(sequences.size()) != setup.prompts) {
    return absl::InvalidArgumentError(
        absl::StrCat(sequences.size(), " sequences for ", setup.prompts, " prompts"));
  }
  DK_ASSIGN_OR_RETURN(const std::string sha, FileSha256(elf_path));
  json seqs = json::array();
  for (int i = 0; i < setup.prompts; ++i) {
    json steps = json::array();
    for (const StepRecord& step : sequences[i].steps) {
      json bits = json::array();
      for (float f : step.top5_logits) bits.push_back(Bits(f));
      steps.push_back({{"id", step.id}, {"top5", step.top5}, {"top5_logit_bits", bits}});
    }
    const GoldenPrompt& prompt = setup.goldens->prompts[i];
    seqs.push_back({{"prompt", sequences[i].prompt}, {"prompt_ids", prompt.prompt_ids}, {"steps", steps}});
  }
  const json root = {
      {"format", kFormat},
      {"elf", elf_path},
      {"elf_sha256", sha},
      {"weights_digest", setup.weights_digest},
      {"weights", setup.weights->source()},
      {"validate", setup.validate},
      {"new_tokens", setup.goldens->new_tokens},
      {"sequences", seqs},
  };
  return root.dump() + "\n";
}

absl::Status WriteGreedyTokens(const std::string& path, const std::string& elf_path, const GateSetup& setup,
                               const std::vector<Sequence>& sequences) {
  DK_ASSIGN_OR_RETURN(const std::string text, FormatGreedyTokens(elf_path, setup, sequences));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out << text;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Sequence>> ParseGreedyTokens(absl::string_view text, absl::string_view source,
                                                        const std::string& elf_path, const GateSetup& setup) {
  DK_RETURN_IF_ERROR(CheckGoldens(setup));
  const Reader r(source);
  const json root = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return r.Error("<root>", "not valid JSON");
  DK_ASSIGN_OR_RETURN(const std::string format, r.String(root, "<root>", "format"));
  if (format != kFormat) return r.Error("format", absl::StrCat("\"", format, "\", expected \"", kFormat, "\""));

  // What the run depended on must be what this reader runs with.
  DK_ASSIGN_OR_RETURN(const std::string made_from, r.String(root, "<root>", "elf"));
  DK_ASSIGN_OR_RETURN(const std::string recorded_sha, r.String(root, "<root>", "elf_sha256"));
  DK_ASSIGN_OR_RETURN(const std::string sha, FileSha256(elf_path));
  if (recorded_sha != sha) {
    return r.Error("elf_sha256", absl::StrCat("the tokens were made by ", made_from, " (sha256 ", recorded_sha,
                                              "), not by ", elf_path, " (sha256 ", sha,
                                              "): a stale or another stage's file"));
  }
  DK_ASSIGN_OR_RETURN(const std::string digest, r.String(root, "<root>", "weights_digest"));
  if (digest != setup.weights_digest) {
    return r.Error("weights_digest", absl::StrCat("the tokens were made with weights ", digest, ", this run uses ",
                                                  setup.weights->source(), " = ", setup.weights_digest));
  }
  DK_ASSIGN_OR_RETURN(const json* validate, r.Field(root, "<root>", "validate"));
  if (!validate->is_boolean()) return r.Error("validate", "expected a boolean");
  if (setup.validate && !validate->get<bool>()) {
    return r.Error("validate", "the tokens were made without checking the BO protocol, which this run asks for");
  }
  DK_ASSIGN_OR_RETURN(const int64_t new_tokens, r.Int(root, "<root>", "new_tokens"));
  if (new_tokens != setup.goldens->new_tokens) {
    return r.Error("new_tokens", absl::StrCat(new_tokens, ", the goldens ", setup.goldens_name, " have ",
                                              setup.goldens->new_tokens));
  }
  DK_ASSIGN_OR_RETURN(const json* seqs, r.Field(root, "<root>", "sequences"));
  if (!seqs->is_array()) return r.Error("sequences", "expected an array");
  if (static_cast<int>(seqs->size()) != setup.prompts) {
    return r.Error("sequences", absl::StrCat(seqs->size(), " prompts, this run gates ", setup.prompts));
  }

  std::vector<Sequence> out;
  for (int i = 0; i < setup.prompts; ++i) {
    const json& s = (*seqs)[i];
    const std::string path = absl::StrCat("sequences[", i, "]");
    const GoldenPrompt& golden = setup.goldens->prompts[i];
    Sequence seq;
    DK_ASSIGN_OR_RETURN(seq.prompt, r.String(s, path, "prompt"));
    DK_ASSIGN_OR_RETURN(const std::vector<uint32_t> ids, r.U32s(s, path, "prompt_ids"));
    if (seq.prompt != golden.text || ids != golden.prompt_ids) {
      return r.Error(path, absl::StrCat("prompt \"", seq.prompt, "\" is not the goldens' prompt ", i, " \"",
                                        golden.text, "\" with the same ids"));
    }
    DK_ASSIGN_OR_RETURN(const json* steps, r.Field(s, path, "steps"));
    if (!steps->is_array() || static_cast<int64_t>(steps->size()) != new_tokens) {
      return r.Error(absl::StrCat(path, ".steps"), absl::StrCat("expected an array of ", new_tokens, " steps"));
    }
    for (size_t j = 0; j < steps->size(); ++j) {
      const std::string sp = absl::StrCat(path, ".steps[", j, "]");
      StepRecord step;
      DK_ASSIGN_OR_RETURN(const int64_t id, r.Int((*steps)[j], sp, "id"));
      if (id < 0 || id > int64_t{UINT32_MAX}) return r.Error(sp, "id is not a token id");
      step.id = static_cast<uint32_t>(id);
      DK_ASSIGN_OR_RETURN(step.top5, r.U32s((*steps)[j], sp, "top5"));
      DK_ASSIGN_OR_RETURN(const std::vector<uint32_t> bits, r.U32s((*steps)[j], sp, "top5_logit_bits"));
      for (uint32_t b : bits) step.top5_logits.push_back(FromBits(b));
      seq.steps.push_back(std::move(step));
    }
    out.push_back(std::move(seq));
  }
  return out;
}

absl::StatusOr<std::vector<Sequence>> ReadGreedyTokens(const std::string& path, const std::string& elf_path,
                                                       const GateSetup& setup) {
  DK_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, "greedy tokens"));
  return ParseGreedyTokens(text, path, elf_path, setup);
}

}  // namespace dk::verify
