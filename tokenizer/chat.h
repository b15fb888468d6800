// Chat formatting: the prompt text a model's chat template renders for a conversation, written
// natively per template (no Jinja engine), exact against HF's apply_chat_template.
//
// A template is RECOGNISED only when its text is one of the known templates below, byte for
// byte (after CRLF -> LF and dropping one newline after a final "%}", which Jinja's
// trim_blocks drops anyway). Anything else, even a whitespace edit of a known one, is refused:
// a near match could render differently from HF, which is worse than asking the user to choose
// a format with --chat_format. The known texts are tokenizer/testdata/chat_templates/*.jinja
// (their sources in that folder's README), compiled in:
//
//   variant     family  template
//   smollm2     chatml  SmolLM2 Instruct (default system "You are a helpful AI assistant named
//                       SmolLM, trained by Hugging Face" when the first message is not system)
//   chatml      chatml  plain ChatML (teknium/OpenHermes-2.5); ByName("chatml")
//   qwen2.5     chatml  Qwen2.5 Instruct (default system "You are Qwen, created by Alibaba
//                       Cloud. You are a helpful assistant."); its tools branch is never taken
//                       (this API passes no tools)
//   qwen3       chatml  Qwen3: earlier assistant turns lose their <think>...</think> part;
//                       assistant turns after the last user query get a <think> block;
//                       enable_thinking is left undefined (HF's default)
//   llama3      llama3  Meta-Llama-3 Instruct: BOS, headers, trimmed contents; ByName("llama3")
//   llama3.1    llama3  Llama 3.1 / 3.3 Instruct: a system turn always, with "Cutting Knowledge
//                       Date: December 2023" and "Today Date: 26 Jul 2024"
//   llama3.2    llama3  Llama 3.2 Instruct: as 3.1, but the date is today's (HF's strftime_now,
//                       local time, "%d %b %Y") unless set_today() or set_date_string() pins it
//   gemma3      gemma   Gemma 3 Instruct: BOS; the system message folded into the first user
//                       turn; "assistant" -> "model"; user/assistant must alternate; contents
//                       trimmed; ByName("gemma")
//   raw         raw     ByName("raw"): the contents concatenated, no markup, no generation prompt
//
// Roles: only "system", "user" and "assistant" are accepted (InvalidArgument naming the index
// otherwise), even where a template would render another role; an empty conversation is refused
// (HF refuses it too). "trim" is Python's str.strip(): Unicode whitespace (U+00A0, U+3000, ...).
#ifndef DK_TOKENIZER_CHAT_H_
#define DK_TOKENIZER_CHAT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/types/span.h"

namespace dk::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  // Recognises a model's Jinja chat template text (GGUF tokenizer.chat_template,
  // tokenizer_config.json "chat_template", or chat_template.jinja). Unrecognised: InvalidArgument
  // saying so, naming the family markers it saw, and that --chat_format=<llama3|chatml|gemma|raw>
  // chooses one explicitly.
  static absl::StatusOr<ChatTemplate> Recognize(absl::string_view jinja_text);
  // A family's plain format by name: "llama3", "chatml", "gemma", or "raw".
  static absl::StatusOr<ChatTemplate> ByName(absl::string_view name);

  // The prompt text HF's apply_chat_template(messages, add_generation_prompt, tokenize=False)
  // renders; Tokenizer::Encode(text, /*add_special_tokens=*/false) gives its tokenize=True ids.
  // InvalidArgument where the template raises (naming the message index), for an unknown role,
  // and for an empty conversation.
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    bool add_generation_prompt) const;

  // The token text that ends the assistant's turn: "<|eot_id|>", "<|im_end|>",
  // "<end_of_turn>" ("" for raw).
  absl::string_view end_of_turn() const;
  // The family: "llama3", "chatml", "gemma" or "raw".
  absl::string_view name() const;
  // The recognised template (table above), e.g. "qwen2.5", "llama3.2".
  absl::string_view variant() const;

  // Llama 3.2's "Today Date:" (its template's date_string, e.g. "26 Jul 2024"); unset, the
  // day of set_today() as HF renders it ("%d %b %Y"). Other variants ignore it.
  void set_date_string(std::string date) { date_string_ = std::move(date); }
  // The day Llama 3.2's date is rendered from when no date_string is set; unset, today's
  // local date, read at each Apply. A caller that needs the same text whenever it runs (a
  // test, a replayed conversation) sets it: the clock may pass midnight between two reads.
  void set_today(absl::CivilDay day) { today_ = day; }

  // Every known template: (variant, Jinja text), for tests and tools.
  struct Known {
    absl::string_view variant;
    absl::string_view text;
  };
  static std::vector<Known> KnownTemplates();

  enum class Variant { kSmolLm2, kChatMl, kQwen25, kQwen3, kLlama3, kLlama31, kLlama32, kGemma3, kRaw };

 private:
  explicit ChatTemplate(Variant v) : variant_(v) {}
  std::string TodayDate() const;

  Variant variant_;
  std::string date_string_;
  std::optional<absl::CivilDay> today_;
};

// The chat template text a model's tokenizer files carry: a .gguf's tokenizer.chat_template; a
// checkpoint directory's chat_template.jinja or tokenizer_config.json "chat_template" (a string,
// or the list form's "default" entry); for a tokenizer.json (any file that is not GGUF), the same
// in its directory. NotFound when none.
absl::StatusOr<std::string> LoadChatTemplateText(const std::string& tokenizer_path);

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_CHAT_H_
