// decodekit::BatchEngine: several conversations on one engine, stepped together
// (continuous batching). Each step is one run of the decode program over a row per
// sequence (runtime::Decoder::StepBatch), so the weights are read once for all of them.
//
//   decodekit::BatchOptions batch;
//   batch.sequences = 4;
//   auto engine = decodekit::BatchEngine::Open(options, batch);   // EngineOptions as for Engine
//   auto a = (*engine)->AddChat({{"user", "Hi"}}, generate, on_text_a);
//   auto b = (*engine)->AddCompletion("Once upon a time", generate, on_text_b);
//   while ((*engine)->busy()) {
//     for (decodekit::BatchDone& d : (*engine)->Step())   // one device run
//       Use(d.id, d.result);                               // the sequences that ended in it
//   }
//
// Sequences join (Add*) and leave (they end, or Cancel) between steps. Each has its
// own GenerateOptions (sampling and seed, stop strings, max_new_tokens, the end-of-
// generation stop) and text callback, and ends as Engine::Complete / Chat with the same
// prompt and options would: the same tokens and text, bit for bit (the batched rows'
// logits are the rows' alone; the sampler, the stop ids and the text's assembly are
// Engine's own). Each sequence starts with an empty KV cache (no prefix reuse).
//
// Scheduling, per Step:
//   1. cancelled sequences leave; waiting ones (more than BatchOptions::sequences were
//      added) take the free slots, oldest first;
//   2. every sequence that is generating puts one row in the step: its last token.
//      Generating sequences never wait for a prompt;
//   3. the step's other rows, up to BatchOptions::prompt_rows, are prompt tokens of
//      the sequences still reading their prompt, oldest first: a long prompt is read
//      over several steps beside the others' decode rows, so it adds at most
//      prompt_rows rows' time to their next token. A sequence whose prompt ends in
//      this step chooses its first token from the step's last row of it.
// Prompt rows run the LM head too (a batched run's tail runs on every row), which an
// Engine's Feed runs for a chunk's last token only: prompts cost more here than alone,
// decode rows less.
//
// Errors: Add* refuse bad options, an empty prompt and one that (with max_new_tokens)
// does not fit the context, before anything runs. A failed device run ends every
// running sequence (their KV caches are half written) with its status as their
// BatchDone::result; the engine takes new sequences after it. Thread-safety: one thread drives a BatchEngine
// (Add*, Cancel and Step); the callbacks run on it.
#ifndef DECODEKIT_API_BATCH_H_
#define DECODEKIT_API_BATCH_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "api/decodekit.h"

namespace decodekit {

struct BatchOptions {
  int sequences = 4;     // conversations stepped together (a KV cache each); >= 1
  // The most prompt tokens one step reads, all joining sequences together (>= 1): larger
  // reads prompts sooner, smaller keeps the generating sequences' steps shorter.
  int prompt_rows = 32;
};

absl::Status ValidateBatchOptions(const BatchOptions& options);

// A sequence that ended: its id (from Add*), and what Engine::Complete / Chat returns
// for it, or the error that ended it. prompt_ms runs from Add* to its first token's
// logits (waiting for a slot included); reused_tokens is 0.
struct BatchDone {
  int id = 0;
  absl::StatusOr<GenerateResult> result;
};

class BatchEngine {
 public:
  static absl::StatusOr<std::unique_ptr<BatchEngine>> Open(const EngineOptions& options, const BatchOptions& batch);
  ~BatchEngine();
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // A new sequence, as Engine::Complete (`prompt` tokenized with BOS), Engine::Chat, or
  // Feed of `prompt` then Generate; its id (0, 1, ...). The callback runs inside Step,
  // with each piece of the sequence's text; false ends it (StopReason::kCallback).
  absl::StatusOr<int> AddCompletion(std::string_view prompt, const GenerateOptions& options,
                                    TextCallback on_text = nullptr);
  absl::StatusOr<int> AddChat(absl::Span<const Message> messages, const GenerateOptions& options,
                              TextCallback on_text = nullptr);
  absl::StatusOr<int> AddTokens(absl::Span<const int32_t> prompt, const GenerateOptions& options,
                                TextCallback on_text = nullptr);
  // Ends sequence `id` at the next Step (StopReason::kCallback, with the text so far);
  // an id that has ended or was never given: nothing.
  void Cancel(int id);

  // One step (see the header's comment): the sequences that ended in it, in the order
  // they were added. With nothing to run, returns at once with none.
  std::vector<BatchDone> Step();

  bool busy() const { return !running_.empty() || !waiting_.empty(); }
  int running() const { return static_cast<int>(running_.size()); }  // holding a slot
  int waiting() const { return static_cast<int>(waiting_.size()); }   // added, no slot yet
  const BatchOptions& options() const { return batch_; }
  // Tokenize, FormatChat, max_context, Describe... (its one-sequence calls share slot
  // 0's KV cache with the batch: do not generate through it).
  const Engine& engine() const { return *engine_; }

 private:
  friend struct internal::EngineAccess;
  struct Sequence;
  BatchEngine(std::unique_ptr<Engine> engine, const BatchOptions& batch);
  absl::StatusOr<int> Add(std::vector<uint32_t> prompt, const GenerateOptions& options, TextCallback on_text,
                          std::vector<uint32_t> stops);
  // Chooses sequence s's next token from row `row` of the step just run; false when
  // the sequence has ended.
  absl::StatusOr<bool> Choose(Sequence& s, int row);
  BatchDone Finish(Sequence& s);

  std::unique_ptr<Engine> engine_;
  BatchOptions batch_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in the order they were added
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<bool> slot_used_;
  int next_id_ = 0;
};

}  // namespace decodekit

#endif  // DECODEKIT_API_BATCH_H_
