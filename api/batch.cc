#include "api/batch.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/engine_internal.h"
#include "api/text_sink.h"
#include "runtime/decoder.h"
#include "runtime/sampling.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace decodekit {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The most prompt rows one step may read (as EngineOptions.prefill_chunk's bound).
constexpr int kMaxPromptRows = 65536;
constexpr int kMaxSequences = 4096;

}  // namespace

absl::Status ValidateBatchOptions(const BatchOptions& o) {
  if (o.sequences < 1 || o.sequences > kMaxSequences) {
    return absl::InvalidArgumentError(absl::StrCat("BatchOptions.sequences is ", o.sequences, ": 1 to ", kMaxSequences));
  }
  if (o.prompt_rows < 1 || o.prompt_rows > kMaxPromptRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchOptions.prompt_rows is ", o.prompt_rows, ": 1 to ", kMaxPromptRows));
  }
  return absl::OkStatus();
}

// One conversation: the Engine's state for one sequence (its tokens, sampler, text
// sink) plus where it is in the batch (slot, prompt tokens read).
struct BatchEngine::Sequence {
  int id = 0;
  std::vector<uint32_t> seq;  // the prompt, then each token generated
  int prompt_size = 0;
  int fed = 0;  // prompt tokens run
  GenerateOptions options;
  std::vector<uint32_t> stops;
  TextCallback on_text;  // the sink holds a reference: the Sequence lives on the heap
  GenerateResult result;
  std::unique_ptr<internal::TextSink> sink;
  std::optional<dk::runtime::Sampler> sampler;  // none: greedy, the row's top-1
  int slot = -1;
  bool cancelled = false;
  bool ended = false;
  absl::Status error;
  Clock::time_point added, first_token;
};

absl::StatusOr<std::unique_ptr<BatchEngine>> BatchEngine::Open(const EngineOptions& options,
                                                               const BatchOptions& batch) {
  return internal::EngineAccess::OpenBatch(options, batch, {});
}

absl::StatusOr<std::unique_ptr<BatchEngine>> internal::EngineAccess::OpenBatch(const EngineOptions& options,
                                                                               const BatchOptions& batch,
                                                                               ToolOptions tool) {
  DK_RETURN_IF_ERROR(ValidateBatchOptions(batch));
  tool.sequences = batch.sequences;
  // Every generating sequence but one joining, plus that one's prompt rows.
  tool.batch_rows = batch.sequences - 1 + batch.prompt_rows;
  DK_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Open(options, tool));
  return std::unique_ptr<BatchEngine>(new BatchEngine(std::move(engine), batch));
}

BatchEngine::BatchEngine(std::unique_ptr<Engine> engine, const BatchOptions& batch)
    : engine_(std::move(engine)), batch_(batch), slot_used_(static_cast<size_t>(batch.sequences), false) {}

BatchEngine::~BatchEngine() = default;

absl::StatusOr<int> BatchEngine::AddCompletion(std::string_view prompt, const GenerateOptions& options,
                                               TextCallback on_text) {
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, engine_->Tokenize(prompt, true));
  return Add({ids.begin(), ids.end()}, options, std::move(on_text), {});
}

absl::StatusOr<int> BatchEngine::AddChat(absl::Span<const Message> messages, const GenerateOptions& options,
                                         TextCallback on_text) {
  DK_ASSIGN_OR_RETURN(const std::string text, engine_->FormatChat(messages, true));
  // The template writes BOS itself where the model wants one (as Engine::Chat).
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, engine_->Tokenize(text, false));
  DK_ASSIGN_OR_RETURN(std::vector<uint32_t> stops, internal::EngineAccess::ChatStops(*engine_));
  return Add({ids.begin(), ids.end()}, options, std::move(on_text), std::move(stops));
}

absl::StatusOr<int> BatchEngine::AddTokens(absl::Span<const int32_t> prompt, const GenerateOptions& options,
                                           TextCallback on_text) {
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= engine_->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " is ", prompt[i], ": the model's ids are 0 to ",
                                                     engine_->vocab_size() - 1));
    }
  }
  return Add({prompt.begin(), prompt.end()}, options, std::move(on_text), {});
}

absl::StatusOr<int> BatchEngine::Add(std::vector<uint32_t> prompt, const GenerateOptions& options,
                                     TextCallback on_text, std::vector<uint32_t> stops) {
  DK_RETURN_IF_ERROR(ValidateGenerateOptions(options));
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  const int64_t context = engine_->max_context();
  if (static_cast<int64_t>(prompt.size()) > context) {
    return absl::OutOfRangeError(absl::StrCat("the prompt has ", prompt.size(), " tokens, the context ", context,
                                              " (EngineOptions.max_context)"));
  }
  // The last new token is chosen, not fed: max_new_tokens - 1 more positions (as Generate).
  if (static_cast<int64_t>(prompt.size()) + options.max_new_tokens - 1 > context) {
    return absl::OutOfRangeError(absl::StrCat("the prompt (", prompt.size(), " tokens) + max_new_tokens (",
                                              options.max_new_tokens, ") does not fit the context of ", context,
                                              " positions (EngineOptions.max_context)"));
  }
  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->prompt_size = static_cast<int>(prompt.size());
  s->seq = std::move(prompt);
  s->options = options;
  const dk::tokenizer::Tokenizer& tokenizer = internal::EngineAccess::Tokenizer(*engine_);
  // Generate's stop ids: the end-of-generation ids and the caller's, or none at all.
  if (options.stop_at_end_of_generation) {
    s->stops = std::move(stops);
    for (int32_t id : tokenizer.end_of_generation_ids()) s->stops.push_back(static_cast<uint32_t>(id));
  }
  if (!internal::EngineAccess::IsGreedy(options.sampling)) {
    DK_ASSIGN_OR_RETURN(s->sampler,
                        dk::runtime::Sampler::Create(internal::EngineAccess::RuntimeSampling(options.sampling)));
  }
  s->on_text = std::move(on_text);
  s->sink = std::make_unique<internal::TextSink>(tokenizer, options.stop_strings, s->on_text, &s->result.text);
  s->result.prompt_tokens = s->prompt_size;
  s->added = Clock::now();
  const int id = s->id;
  waiting_.push_back(std::move(s));
  return id;
}

void BatchEngine::Cancel(int id) {
  for (auto& s : running_) {
    if (s->id == id) s->cancelled = true;
  }
  for (auto& s : waiting_) {
    if (s->id == id) s->cancelled = true;
  }
}

BatchDone BatchEngine::Finish(Sequence& s) {
  if (s.slot >= 0) slot_used_[static_cast<size_t>(s.slot)] = false;
  s.slot = -1;
  BatchDone done;
  done.id = s.id;
  if (!s.error.ok()) {
    done.result = s.error;
    return done;
  }
  s.sink->Finish();
  if (s.sink->stop_string_seen()) {
    s.result.stop = StopReason::kStopString;
  } else if (s.sink->callback_ended() || s.cancelled) {
    s.result.stop = StopReason::kCallback;
  }
  if (!s.result.tokens.empty()) s.result.decode_ms = MsBetween(s.first_token, Clock::now());
  done.result = std::move(s.result);
  return done;
}

absl::StatusOr<bool> BatchEngine::Choose(Sequence& s, int row) {
  dk::runtime::Decoder& decoder = internal::EngineAccess::Decoder(*engine_);
  uint32_t token = 0;
  if (s.sampler) {
    const size_t vocab = static_cast<size_t>(engine_->vocab_size());
    token = s.sampler->Sample(absl::Span<const float>(decoder.row_logits(row), vocab), s.seq);
  } else {
    dk::runtime::StepResult step;
    DK_RETURN_IF_ERROR(decoder.ReadRow(row, &step));
    token = step.token;
  }
  if (s.result.tokens.empty()) {
    s.first_token = Clock::now();
    s.result.prompt_ms = MsBetween(s.added, s.first_token);
  }
  if (std::find(s.stops.begin(), s.stops.end(), token) != s.stops.end()) {
    s.result.stop = StopReason::kEndOfGeneration;
    return false;
  }
  s.seq.push_back(token);
  s.result.tokens.push_back(static_cast<int32_t>(token));
  DK_RETURN_IF_ERROR(s.sink->Push(static_cast<int32_t>(token)));
  return !s.sink->ended() && static_cast<int>(s.result.tokens.size()) < s.options.max_new_tokens;
}

std::vector<BatchDone> BatchEngine::Step() {
  std::vector<BatchDone> done;
  // 1. Leave, then join.
  auto leave = [&] {
    for (auto it = running_.begin(); it != running_.end();) {
      if ((*it)->ended || (*it)->cancelled) {
        done.push_back(Finish(**it));
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  };
  leave();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Sequence& s = **it;
    if (s.cancelled || s.options.max_new_tokens == 0) {  // nothing to run
      done.push_back(Finish(s));
      it = waiting_.erase(it);
      continue;
    }
    const auto free = std::find(slot_used_.begin(), slot_used_.end(), false);
    if (free == slot_used_.end()) break;
    *free = true;
    s.slot = static_cast<int>(free - slot_used_.begin());
    running_.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
  // 2. A decode row for each generating sequence; 3. prompt rows, oldest first.
  std::vector<dk::runtime::BatchRow> rows;
  std::vector<std::pair<Sequence*, int>> choosers;  // (sequence, its last row in the step)
  for (auto& s : running_) {
    if (s->fed < s->prompt_size) continue;
    rows.push_back({s->seq.back(), s->slot, static_cast<int>(s->seq.size()) - 1});
    choosers.push_back({s.get(), static_cast<int>(rows.size()) - 1});
  }
  int budget = batch_.prompt_rows;
  for (auto& s : running_) {
    if (s->fed >= s->prompt_size || budget == 0) continue;
    const int n = std::min(budget, s->prompt_size - s->fed);
    for (int i = 0; i < n; ++i) rows.push_back({s->seq[static_cast<size_t>(s->fed + i)], s->slot, s->fed + i});
    s->fed += n;
    budget -= n;
    if (s->fed == s->prompt_size) choosers.push_back({s.get(), static_cast<int>(rows.size()) - 1});
  }
  if (!rows.empty()) {
    const absl::Status run = internal::EngineAccess::Decoder(*engine_).StepBatch(rows);
    if (!run.ok()) {
      // The KV caches of this step's sequences are half written: they all end.
      for (auto& s : running_) {
        s->error = run;
        s->ended = true;
      }
    } else {
      for (const auto& [s, row] : choosers) {
        absl::StatusOr<bool> more = Choose(*s, row);
        if (!more.ok()) s->error = more.status();
        s->ended = !more.ok() || !*more;
      }
    }
    leave();  // those that ended in this step leave now, freeing their slots
  }
  std::sort(done.begin(), done.end(), [](const BatchDone& a, const BatchDone& b) { return a.id < b.id; });
  return done;
}

}  // namespace decodekit
