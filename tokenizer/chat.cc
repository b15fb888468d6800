#include "tokenizer/chat.h"

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tokenizer/chat_templates_data.h"
#include "tokenizer/checkpoint_files.h"
#include "tokenizer/utf8.h"
#include "util/read_file.h"
#include "weights/gguf.h"

namespace dk::tokenizer {
namespace {

using Variant = ChatTemplate::Variant;

struct VariantInfo {
  Variant variant;
  absl::string_view variant_name;
  absl::string_view family;
  absl::string_view file;  // in tokenizer/testdata/chat_templates/; "" for raw
};

constexpr VariantInfo kVariants[] = {
    {Variant::kSmolLm2, "smollm2", "chatml", "smollm2.jinja"},
    {Variant::kChatMl, "chatml", "chatml", "chatml.jinja"},
    {Variant::kQwen25, "qwen2.5", "chatml", "qwen2.5_instruct.jinja"},
    {Variant::kQwen3, "qwen3", "chatml", "qwen3.jinja"},
    {Variant::kLlama3, "llama3", "llama3", "llama3.jinja"},
    {Variant::kLlama31, "llama3.1", "llama3", "llama3.1_instruct.jinja"},
    {Variant::kLlama32, "llama3.2", "llama3", "llama3.2_instruct.jinja"},
    {Variant::kGemma3, "gemma3", "gemma", "gemma3_it.jinja"},
    {Variant::kRaw, "raw", "raw", ""},
};

const VariantInfo& Info(Variant v) {
  for (const VariantInfo& info : kVariants) {
    if (info.variant == v) return info;
  }
  return kVariants[0];  // unreachable: every Variant is in the table
}

constexpr absl::string_view kSmolLm2System =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
constexpr absl::string_view kQwen25System =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// The text a template is compared by: CRLF -> LF, and a newline right after a final block tag
// dropped (trim_blocks removes it when rendering, so both spellings render the same).
std::string Canonical(absl::string_view text) {
  std::string out = absl::StrReplaceAll(text, {{"\r\n", "\n"}});
  if (absl::EndsWith(out, "%}\n")) out.pop_back();
  return out;
}

// Python's str.isspace() for one code point (what Jinja's trim strips).
bool IsPyWhitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Jinja's `trim` filter: Python's str.strip() with no argument. Ill-formed UTF-8 stops the scan
// (Encode rejects such text later anyway).
std::string PyStrip(absl::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t len = 0;
    if (NextUtf8(s.substr(begin), &len) != Utf8Step::kValid) break;
    if (!IsPyWhitespace(DecodeUtf8(s.substr(begin), &len))) break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    absl::string_view tail = s.substr(start, end - start);
    if (NextUtf8(tail, &len) != Utf8Step::kValid || len != tail.size()) break;
    if (!IsPyWhitespace(DecodeUtf8(tail, &len))) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

// Python's str.strip/lstrip/rstrip('\n').
absl::string_view LStripNl(absl::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
absl::string_view RStripNl(absl::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

absl::Status CheckMessages(absl::Span<const ChatMessage> messages) {
  if (messages.empty()) {
    return absl::InvalidArgumentError(
        "chat: cannot format an empty conversation; give at least one message");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat: message ", i, " has role \"", role,
          "\"; the roles are \"system\", \"user\" and \"assistant\""));
    }
  }
  return absl::OkStatus();
}

// ChatML turns (SmolLM2, plain ChatML, Qwen2.5): an optional default system turn when the
// first message is not a system one, then every message as its own turn, contents as given.
std::string RenderChatMl(absl::Span<const ChatMessage> messages, absl::string_view default_system,
                         bool add_generation_prompt) {
  std::string out;
  if (!default_system.empty() && messages[0].role != "system") {
    absl::StrAppend(&out, "<|im_start|>system\n", default_system, "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen3's assistant turn at `index`: the part before "</think>" is its reasoning; kept (as a
// <think> block) only after the last real user query, and there only for the last message or
// a turn with non-empty reasoning.
void AppendQwen3Assistant(const ChatMessage& m, bool after_last_query, bool last,
                          std::string* out) {
  absl::string_view content = m.content;
  std::string reasoning;
  const size_t close = content.find("</think>");
  if (close != absl::string_view::npos) {
    absl::string_view before = RStripNl(content.substr(0, close));
    const size_t open = before.rfind("<think>");
    if (open != absl::string_view::npos) before.remove_prefix(open + 7);
    reasoning = std::string(LStripNl(before));
    content = LStripNl(content.substr(content.rfind("</think>") + 8));
  }
  if (after_last_query && (last || !reasoning.empty())) {
    absl::StrAppend(out, "<|im_start|>assistant\n<think>\n", LStripNl(RStripNl(reasoning)),
                    "\n</think>\n\n", LStripNl(content));
  } else {
    absl::StrAppend(out, "<|im_start|>assistant\n", content);
  }
  *out += "<|im_end|>\n";
}

std::string RenderQwen3(absl::Span<const ChatMessage> messages, bool add_generation_prompt) {
  // The last user message that is not a wrapped tool response (the whole list's last index
  // when there is none).
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    if (messages[i].role == "user" &&
        !(absl::StartsWith(c, "<tool_response>") && absl::EndsWith(c, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      AppendQwen3Assistant(m, i > last_query, i + 1 == messages.size(), &out);
    } else {
      absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

void AppendLlamaTurn(absl::string_view role, absl::string_view content, std::string* out) {
  absl::StrAppend(out, "<|start_header_id|>", role, "<|end_header_id|>\n\n", PyStrip(content),
                  "<|eot_id|>");
}

// Llama 3 (plain) and 3.1/3.2/3.3 (`date`: a system turn always, the first system message's
// content after the date lines).
std::string RenderLlama3(absl::Span<const ChatMessage> messages, const std::string* date,
                         bool add_generation_prompt) {
  std::string out = "<|begin_of_text|>";
  if (date != nullptr) {
    std::string system;
    if (messages[0].role == "system") {
      system = PyStrip(messages[0].content);
      messages.remove_prefix(1);
    }
    absl::StrAppend(&out, "<|start_header_id|>system<|end_header_id|>\n\n",
                    "Cutting Knowledge Date: December 2023\nToday Date: ", *date, "\n\n", system,
                    "<|eot_id|>");
  }
  for (const ChatMessage& m : messages) AppendLlamaTurn(m.role, m.content, &out);
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

absl::StatusOr<std::string> RenderGemma3(absl::Span<const ChatMessage> messages,
                                         bool add_generation_prompt) {
  std::string out = "<bos>";
  std::string first_user_prefix;
  size_t offset = 0;
  if (messages[0].role == "system") {
    // Not trimmed: the template appends the raw system content to the (trimmed) first turn.
    first_user_prefix = absl::StrCat(messages[0].content, "\n\n");
    offset = 1;
  }
  for (size_t i = offset; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool even = (i - offset) % 2 == 0;
    if ((m.role == "user") != even) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat (gemma3): message ", i, " has role \"", m.role, "\" where ",
          even ? "\"user\"" : "a non-user role", " is needed: Gemma's template requires "
          "roles to alternate user/assistant/user/assistant/... after an optional system message"));
    }
    absl::StrAppend(&out, "<start_of_turn>", m.role == "assistant" ? "model" : m.role, "\n",
                    i == offset ? first_user_prefix : "", PyStrip(m.content), "<end_of_turn>\n");
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

std::vector<ChatTemplate::Known> ChatTemplate::KnownTemplates() {
  std::vector<Known> known;
  for (int i = 0; i < chat_internal::kNumTemplateFiles; ++i) {
    const chat_internal::TemplateFile& f = chat_internal::kTemplateFiles[i];
    for (const VariantInfo& info : kVariants) {
      if (info.file == f.file) known.push_back({info.variant_name, f.text});
    }
  }
  return known;
}

absl::StatusOr<ChatTemplate> ChatTemplate::Recognize(absl::string_view jinja_text) {
  const std::string text = Canonical(jinja_text);
  for (const Known& k : KnownTemplates()) {
    if (Canonical(k.text) != text) continue;
    for (const VariantInfo& info : kVariants) {
      if (info.variant_name == k.variant) return ChatTemplate(info.variant);
    }
  }
  std::vector<std::string> seen;
  if (absl::StrContains(text, "<|im_start|>")) seen.push_back("<|im_start|> (ChatML)");
  if (absl::StrContains(text, "<|start_header_id|>")) seen.push_back("<|start_header_id|> (Llama 3)");
  if (absl::StrContains(text, "<start_of_turn>")) seen.push_back("<start_of_turn> (Gemma)");
  std::vector<std::string> variants;
  for (const VariantInfo& info : kVariants) {
    if (!info.file.empty()) variants.push_back(std::string(info.variant_name));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "chat template not recognised (", jinja_text.size(), " bytes): it is none of the known "
      "templates (", absl::StrJoin(variants, ", "), ") exactly; ",
      seen.empty() ? "it has no family markers"
                   : absl::StrCat("family markers seen: ", absl::StrJoin(seen, ", ")),
      ". Choose a format explicitly with --chat_format=<llama3|chatml|gemma|raw>"));
}

absl::StatusOr<ChatTemplate> ChatTemplate::ByName(absl::string_view name) {
  if (name == "llama3") return ChatTemplate(Variant::kLlama3);
  if (name == "chatml") return ChatTemplate(Variant::kChatMl);
  if (name == "gemma") return ChatTemplate(Variant::kGemma3);
  if (name == "raw") return ChatTemplate(Variant::kRaw);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown chat format \"", name, "\"; the formats are llama3, chatml, gemma and raw"));
}

std::string ChatTemplate::TodayDate() const {
  if (!date_string_.empty()) return date_string_;
  const absl::CivilDay day =
      today_.has_value() ? *today_ : absl::ToCivilDay(absl::Now(), absl::LocalTimeZone());
  return absl::FormatTime("%d %b %Y", absl::FromCivil(day, absl::UTCTimeZone()), absl::UTCTimeZone());
}

absl::StatusOr<std::string> ChatTemplate::Apply(absl::Span<const ChatMessage> messages,
                                                bool add_generation_prompt) const {
  if (absl::Status s = CheckMessages(messages); !s.ok()) return s;
  const bool gen = add_generation_prompt;
  switch (variant_) {
    case Variant::kSmolLm2:
      return RenderChatMl(messages, kSmolLm2System, gen);
    case Variant::kChatMl:
      return RenderChatMl(messages, "", gen);
    case Variant::kQwen25:
      return RenderChatMl(messages, kQwen25System, gen);
    case Variant::kQwen3:
      return RenderQwen3(messages, gen);
    case Variant::kLlama3:
      return RenderLlama3(messages, nullptr, gen);
    case Variant::kLlama31: {
      const std::string date = "26 Jul 2024";
      return RenderLlama3(messages, &date, gen);
    }
    case Variant::kLlama32: {
      const std::string date = TodayDate();
      return RenderLlama3(messages, &date, gen);
    }
    case Variant::kGemma3:
      return RenderGemma3(messages, gen);
    case Variant::kRaw:
      break;
  }
  std::string out;
  for (const ChatMessage& m : messages) out += m.content;
  return out;
}

absl::string_view ChatTemplate::end_of_turn() const {
  const absl::string_view family = name();
  if (family == "chatml") return "<|im_end|>";
  if (family == "llama3") return "<|eot_id|>";
  if (family == "gemma") return "<end_of_turn>";
  return "";
}

absl::string_view ChatTemplate::name() const { return Info(variant_).family; }
absl::string_view ChatTemplate::variant() const { return Info(variant_).variant_name; }

namespace {

// tokenizer_config.json's "chat_template": a string, or a list of {name, template} whose
// "default" entry is the one HF applies. NotFound when the file or the field is absent.
absl::StatusOr<std::string> TemplateFromConfig(const std::string& config_path) {
  absl::StatusOr<std::optional<nlohmann::json>> read = ReadJsonConfig(config_path, "tokenizer_config.json");
  if (!read.ok()) return read.status();
  if (!read->has_value()) return absl::NotFoundError(absl::StrCat("no ", config_path));
  const nlohmann::json& config = **read;
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return absl::NotFoundError(absl::StrCat(config_path, " has no chat_template"));
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const nlohmann::json& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    return absl::NotFoundError(
        absl::StrCat(config_path, ": chat_template is a list with no \"default\" entry"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(config_path, ": chat_template is neither a string nor a list"));
}

// A checkpoint directory: chat_template.jinja first (newer HF checkpoints keep it there), then
// tokenizer_config.json.
absl::StatusOr<std::string> TemplateFromDirectory(const std::string& dir) {
  const std::string jinja = absl::StrCat(dir, "/chat_template.jinja");
  struct stat st;
  if (::stat(jinja.c_str(), &st) == 0) return ReadRegularFile(jinja, "chat_template.jinja");
  absl::StatusOr<std::string> t = TemplateFromConfig(absl::StrCat(dir, "/tokenizer_config.json"));
  if (absl::IsNotFound(t.status())) {
    return absl::NotFoundError(absl::StrCat(
        "no chat template in ", dir, " (neither chat_template.jinja nor a tokenizer_config.json "
        "chat_template)"));
  }
  return t;
}

}  // namespace

absl::StatusOr<std::string> LoadChatTemplateText(const std::string& tokenizer_path) {
  absl::StatusOr<OpenedPath> opened =
      OpenUserPath(tokenizer_path, "chat template source", PathKinds::kFileOrDirectory);
  if (absl::IsNotFound(opened.status())) {
    return absl::NotFoundError(absl::StrCat("chat template: no such file or directory: ",
                                            tokenizer_path));
  }
  if (!opened.ok()) return opened.status();
  if (opened->is_directory) return TemplateFromDirectory(tokenizer_path);
  // A GGUF by its magic (as Tokenizer::Load tells them apart); anything else is a
  // tokenizer.json whose directory holds the template.
  absl::StatusOr<std::string> magic = ReadHead(*opened, tokenizer_path, 4);
  if (!magic.ok()) return magic.status();
  if (*magic == "GGUF") {
    absl::StatusOr<std::unique_ptr<weights::GgufFile>> gguf =
        weights::GgufFile::Open(tokenizer_path);
    if (!gguf.ok()) return gguf.status();
    if ((*gguf)->Find("tokenizer.chat_template") == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(tokenizer_path, " has no tokenizer.chat_template in its metadata"));
    }
    return (*gguf)->GetString("tokenizer.chat_template");
  }
  return TemplateFromDirectory(DirectoryOf(tokenizer_path));
}

}  // namespace dk::tokenizer
