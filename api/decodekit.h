// decodekit: run a verified decode stage inside your own program.
//
//   decodekit::EngineOptions options;
//   options.model = "smollm2-135m.gguf";      // the model file, as downloaded: its chain is built
//                                             // (and cached), the best stage its weights allow runs
//   // or a stage the rules built: options.elf = "decode_gguf.elf"; options.weights = "smollm2-135m.gguf";
//   auto engine = decodekit::Engine::Open(options);
//   if (!engine.ok()) return Fail(engine.status());
//   decodekit::GenerateOptions generate;
//   generate.sampling.temperature = 0.7f;     // 0 (the default): greedy, what verify checks
//   auto result = (*engine)->Chat({{"user", "What is the capital of France?"}}, generate,
//                                 [](std::string_view text) { std::fputs(std::string(text).c_str(), stdout); return true; });
//
// An Engine holds one sequence: the tokens fed so far, whose keys and values sit in
// its KV cache. Feed appends tokens (prompts go through the prefill path, a chunk of
// tokens per run of the program); Generate continues from the last token fed;
// Truncate drops the tail, Reset all of it. Complete and Chat start a new sequence but
// keep the KV cache of the longest common prefix with the previous one, so a chat's
// next turn costs only its new tokens.
//
// Errors are absl::Status values (a bad file, a prompt past the context, bad
// options); nothing aborts. Thread-safety: one thread drives an Engine; separate
// Engines may run on separate threads at once, from Open on: each owns its thread pool
// (EngineOptions::threads), its weights and its kernels' scratch, and they share no
// mutable state (docs/architecture.md, "One context per engine").
#ifndef DECODEKIT_API_DECODEKIT_H_
#define DECODEKIT_API_DECODEKIT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace decodekit {

struct EngineOptions {
  // The model file alone, instead of `elf`: a .gguf, an HF checkpoint directory, or a
  // config.json (synthetic weights of its shape). The decode ELFs of the standard
  // chain are built for the file's shape with the pass table the rules use (the same
  // bytes as the rules build) and kept in `cache_dir`; `stage` picks one.
  std::string model;
  // With `model`: the stage to run ("": the best the file's weights allow,
  // decode_gguf for a GGUF, decode_x12 otherwise); Describe() names it and its ELF.
  std::string stage;
  // With `model`: where built ELFs are kept ("": $XDG_CACHE_HOME/decodekit/elf or
  // ~/.cache/decodekit/elf). An unwritable directory is an error naming it.
  std::string cache_dir;
  std::string elf;        // the decode ELF of a stage (a stage the rules built), or `model`
  // A .gguf file, an HF checkpoint directory, or "synthetic[:SEED]" (random weights of
  // the ELF's model shape, for tests). "" with `model`: the model file itself.
  std::string weights;
  // A .gguf, a tokenizer.json, or a checkpoint directory with one; "": the weights'
  // own (a .gguf file or a checkpoint directory).
  std::string tokenizer;
  int threads = 0;        // kernel threads, counting the caller (0: one per hardware thread)
  // KV-cache positions (0: the model's). With `model`, also the ELF's: min(the
  // model's own maximum, this), 0: the model's own capped at 32768.
  int max_context = 0;
  int prefill_chunk = 0;  // prompt tokens per run of the program (0: auto, 512 or fewer)
  // How Chat formats messages: "" for the model's own chat template (refused when the
  // toolkit does not recognise it), or "llama3", "chatml", "gemma", "raw" (contents
  // only, no markup).
  std::string chat_format;
};

// How the next token is chosen from the logits, in this order (HF transformers'
// order): repetition penalty, temperature, top-k, top-p, min-p, then a draw.
struct SamplingOptions {
  float temperature = 0.0f;         // 0: greedy (the most likely; ties to the smaller id)
  int top_k = 0;                    // keep the k most likely (0: all)
  float top_p = 1.0f;               // keep the smallest set reaching this probability (1: all)
  float min_p = 0.0f;               // drop ids below min_p x the most likely's probability
  float repetition_penalty = 1.0f;  // > 1 discourages tokens of the recent history
  int repetition_last_n = 64;       // how many recent tokens the penalty looks at
  uint64_t seed = 0;                // the same seed and options give the same tokens
};

struct GenerateOptions {
  int max_new_tokens = 256;
  SamplingOptions sampling;
  // Stop at the model's end-of-generation tokens (its files' EOS / end-of-turn ids);
  // they are not emitted.
  bool stop_at_end_of_generation = true;
  // Stop when the text produced contains one of these; the text ends before it.
  std::vector<std::string> stop_strings;
};

// OK, or InvalidArgument naming the option and its valid range (Engine::Open and
// Generate check too); files are not opened here.
absl::Status ValidateEngineOptions(const EngineOptions& options);
absl::Status ValidateGenerateOptions(const GenerateOptions& options);

struct Message {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

enum class StopReason { kMaxTokens, kEndOfGeneration, kStopString, kCallback };

struct GenerateResult {
  std::string text;             // the new text (a stop string and what follows excluded)
  std::vector<int32_t> tokens;  // the new tokens (an end-of-generation token excluded)
  StopReason stop = StopReason::kMaxTokens;
  int prompt_tokens = 0;        // tokens fed before generating (after a reused prefix)
  int reused_tokens = 0;        // prefix tokens whose KV entries were kept (Complete, Chat)
  double prompt_ms = 0;         // feeding them: the time to the first new token's logits
  double decode_ms = 0;         // the steps after the first new token
  // A speculative stage (greedy): draft checks run, tokens drafted, drafts accepted.
  int draft_checks = 0, drafted = 0, accepted = 0;
  // New tokens per second after the first (0 with fewer than two).
  double decode_tokens_per_s() const;
};

// Called with each piece of new text as soon as it is complete (whole UTF-8
// characters; text that could start a stop string is held until it cannot). Return
// false to stop (StopReason::kCallback).
using TextCallback = std::function<bool(std::string_view text)>;

namespace internal {
struct EngineAccess;  // the repository's own tools: options the public API leaves out
}  // namespace internal

class Engine {
 public:
  // Reads the ELF, the weights and the tokenizer, and loads the stage on the CPU
  // device. NotFound / InvalidArgument naming the file for what cannot be read or
  // does not fit the ELF.
  static absl::StatusOr<std::unique_ptr<Engine>> Open(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Text <-> tokens with the model's tokenizer (add_special: BOS as the model adds it).
  absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special = true) const;
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> tokens) const;
  // The prompt text of a conversation in the engine's chat format (add_generation_prompt:
  // end with the assistant's turn opened).
  absl::StatusOr<std::string> FormatChat(absl::Span<const Message> messages,
                                         bool add_generation_prompt = true) const;

  // Appends tokens to the sequence (the prefill path). OutOfRange when they would not
  // fit the context, saying how many there are and how many fit.
  absl::Status Feed(absl::Span<const int32_t> tokens);
  // Generates after the tokens fed so far (at least one), appending what it generates.
  absl::StatusOr<GenerateResult> Generate(const GenerateOptions& options, const TextCallback& on_text = nullptr);
  // A new sequence from `prompt` (tokenized with BOS), then Generate.
  absl::StatusOr<GenerateResult> Complete(std::string_view prompt, const GenerateOptions& options,
                                          const TextCallback& on_text = nullptr);
  // A new sequence from the conversation (FormatChat), then Generate; with
  // stop_at_end_of_generation it stops at the end of the assistant's turn as well.
  absl::StatusOr<GenerateResult> Chat(absl::Span<const Message> messages, const GenerateOptions& options,
                                      const TextCallback& on_text = nullptr);

  // Keeps the first `tokens` tokens of the sequence (0 <= tokens <= its size): the KV
  // cache past them is dropped.
  absl::Status Truncate(int tokens);
  void Reset();  // an empty sequence
  // The sequence: every token fed or generated. Generate's last token is chosen but
  // runs through the model only when needed (the next Feed, Generate or Logits).
  std::vector<int32_t> tokens() const;
  // The logits after the last token of the sequence (vocab_size() floats, valid until
  // the engine is used again); FailedPrecondition for an empty sequence.
  absl::StatusOr<absl::Span<const float>> Logits();

  int vocab_size() const;   // the model's (logit rows)
  int max_context() const;  // positions the KV cache holds
  // One line: the model, the stage, the device, threads, chunk and chat format.
  std::string Describe() const;

 private:
  friend struct internal::EngineAccess;
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace decodekit

#endif  // DECODEKIT_API_DECODEKIT_H_
