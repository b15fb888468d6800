#include "api/decodekit.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/engine_internal.h"
#include "api/text_sink.h"
#include "chain/model_elf.h"
#include "elf/elf.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "runtime/sampling.h"
#include "tokenizer/chat.h"
#include "tokenizer/model_special_ids.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace decodekit {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The most prompt tokens one run may take (as tools' --prefill_chunk).
constexpr int kMaxPrefillChunk = 65536;

}  // namespace

absl::Status ValidateEngineOptions(const EngineOptions& o) {
  if (!o.model.empty() && !o.elf.empty()) {
    return absl::InvalidArgumentError("EngineOptions.model and .elf are both set: model builds the ELF, name one");
  }
  if (o.model.empty() && (!o.stage.empty() || !o.cache_dir.empty())) {
    return absl::InvalidArgumentError("EngineOptions.stage and .cache_dir go with .model");
  }
  if (o.model.empty() && o.elf.empty()) {
    return absl::InvalidArgumentError("EngineOptions.elf and .model are empty: name a model file or a stage's decode ELF");
  }
  if (o.model.empty() && o.weights.empty()) {
    return absl::InvalidArgumentError("EngineOptions.weights is empty: name a .gguf, a checkpoint directory or synthetic");
  }
  if (o.threads < 0) return absl::InvalidArgumentError(absl::StrCat("EngineOptions.threads is ", o.threads, ": >= 0"));
  if (o.max_context < 0 || o.max_context > dk::elf::kMaxDimension) {
    return absl::InvalidArgumentError(absl::StrCat("EngineOptions.max_context is ", o.max_context, ": 0 to ",
                                                   dk::elf::kMaxDimension));
  }
  if (o.prefill_chunk < 0 || o.prefill_chunk > kMaxPrefillChunk) {
    return absl::InvalidArgumentError(absl::StrCat("EngineOptions.prefill_chunk is ", o.prefill_chunk, ": 0 (auto) to ",
                                                   kMaxPrefillChunk));
  }
  if (!o.chat_format.empty()) return dk::tokenizer::ChatTemplate::ByName(o.chat_format).status();
  return absl::OkStatus();
}

namespace {

// The tokenizer's path: the option, or the weights' own file or directory.
absl::StatusOr<std::string> TokenizerPath(const EngineOptions& o) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  std::error_code ec;
  if (absl::EndsWith(o.weights, ".gguf") || std::filesystem::is_directory(o.weights, ec)) return o.weights;
  return absl::InvalidArgumentError(absl::StrCat("EngineOptions.tokenizer is empty and the weights (", o.weights,
                                                 ") carry none: name a .gguf, tokenizer.json or checkpoint directory"));
}

std::vector<uint32_t> ToIds(absl::Span<const int32_t> tokens) { return {tokens.begin(), tokens.end()}; }

bool IsGreedy(const SamplingOptions& s) { return s.temperature == 0.0f && s.repetition_penalty == 1.0f; }

dk::runtime::SamplingOptions ToRuntime(const SamplingOptions& s) {
  dk::runtime::SamplingOptions r;
  r.temperature = s.temperature;
  r.top_k = s.top_k;
  r.top_p = s.top_p;
  r.min_p = s.min_p;
  r.repetition_penalty = s.repetition_penalty;
  r.repetition_last_n = s.repetition_last_n;
  r.seed = s.seed;
  return r;
}

}  // namespace

absl::Status ValidateGenerateOptions(const GenerateOptions& options) {
  if (options.max_new_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens is ", options.max_new_tokens, ": expected >= 0"));
  }
  return dk::runtime::ValidateSamplingOptions(ToRuntime(options.sampling));
}

double GenerateResult::decode_tokens_per_s() const {
  return tokens.size() >= 2 && decode_ms > 0 ? (tokens.size() - 1) / (decode_ms * 1e-3) : 0.0;
}

struct Engine::Impl {
  EngineOptions options;
  internal::ToolOptions tool;
  dk::elf::Program program;
  std::string tokenizer_path;
  std::string built;  // with options.model: which stage runs and where its ELF is (chain::Describe)
  std::unique_ptr<dk::tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<dk::ThreadPool> pool;
  std::unique_ptr<dk::runtime::CpuSession> session;
  std::vector<uint32_t> seq;  // the sequence; seq.size() - position() tokens wait to be fed
  int max_context = 0;
  std::optional<dk::tokenizer::ChatTemplate> chat;  // resolved on first use

  dk::runtime::Decoder& decoder() { return session->decoder(); }
  absl::Status Open();
  // Feeds the tokens of seq not yet fed, then `more` (appended to seq).
  absl::Status FeedPending(absl::Span<const uint32_t> more = {});
  // A new sequence `prompt` keeping the KV cache of the longest prefix it shares with the
  // current one; *reused: the tokens kept.
  absl::Status StartSequence(const std::vector<uint32_t>& prompt, int* reused);
  absl::StatusOr<const dk::tokenizer::ChatTemplate*> ChatTemplate();
  absl::Status CheckIds(absl::Span<const int32_t> tokens) const;
  // Generate's tokens: the runtime's one generation loop (runtime/greedy.h), its
  // chooser the argmax (speculative where the stage is) or a seeded sampler.
  absl::Status Loop(const GenerateOptions& o, const std::vector<uint32_t>& stops, internal::TextSink& sink,
                    GenerateResult& result);
  absl::StatusOr<GenerateResult> Generate(const GenerateOptions& o, const TextCallback& on_text,
                                          std::vector<uint32_t> extra_stops);
  // Complete's and Chat's: a new sequence from `prompt` (StartSequence), then Generate
  // with `stops` besides the end-of-generation ids; the prompt's counts and time.
  absl::StatusOr<GenerateResult> Run(absl::Span<const int32_t> prompt, const GenerateOptions& o,
                                     const TextCallback& on_text, std::vector<uint32_t> stops);
};

absl::Status Engine::Impl::Open() {
  DK_RETURN_IF_ERROR(ValidateEngineOptions(options));
  if (!options.model.empty()) {
    // The model file alone: its chain's ELFs, built or cached; the chosen stage's
    // ELF, and the file as the weights (a config.json alone: synthetic ones).
    dk::chain::ModelElfOptions chain_options;
    chain_options.max_context = options.max_context;
    chain_options.cache_dir = options.cache_dir;
    DK_ASSIGN_OR_RETURN(const dk::chain::ModelElfs elfs, dk::chain::BuildModelElfs(options.model, chain_options));
    DK_ASSIGN_OR_RETURN(const int stage, dk::chain::FindStage(elfs, options.stage));
    built = dk::chain::Describe(options.model, elfs, stage);
    options.elf = elfs.stages[stage].elf_path;
    if (options.weights.empty()) options.weights = elfs.holds_weights ? options.model : "synthetic";
  }
  DK_ASSIGN_OR_RETURN(tokenizer_path, TokenizerPath(options));
  DK_ASSIGN_OR_RETURN(program, dk::elf::ReadElfFile(options.elf));
  DK_ASSIGN_OR_RETURN(tokenizer, dk::tokenizer::Tokenizer::Load(tokenizer_path));
  DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerFitsModel(*tokenizer, program.model().vocab(), tokenizer_path,
                                                            absl::StrCat("ELF ", options.elf)));
  DK_RETURN_IF_ERROR(dk::tokenizer::CheckTokenizerMatchesWeights(*tokenizer, tokenizer_path, options.weights));
  // The engine's own pool (unless a tool lends its one) loads the weights and runs the
  // kernels, so that engines on other threads share no pool with this one.
  if (tool.pool == nullptr) {
    dk::ThreadPoolOptions pool_options;
    pool_options.num_threads = options.threads;
    pool = std::make_unique<dk::ThreadPool>(pool_options);
  }
  dk::ThreadPool* const threads = tool.pool != nullptr ? tool.pool : pool.get();
  DK_ASSIGN_OR_RETURN(dk::weights::Weights weights,
                      dk::runtime::ReadWeightsSpec(options.weights, program, options.max_context, threads));
  dk::runtime::SessionOptions session_options;
  session_options.pool = threads;
  session_options.cpu = tool.cpu;
  session_options.validate = tool.validate;
  session_options.max_context = options.max_context;
  session_options.prefill_rows = options.prefill_chunk;
  session_options.sequences = tool.sequences;
  session_options.batch_rows = tool.batch_rows;
  DK_ASSIGN_OR_RETURN(session, dk::runtime::CpuSession::OpenOwning(program, options.elf, std::move(weights),
                                                                   session_options));
  max_context = options.max_context > 0 ? options.max_context : static_cast<int>(program.model().max_context());
  return absl::OkStatus();
}

absl::Status Engine::Impl::CheckIds(absl::Span<const int32_t> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= program.model().vocab()) {
      return absl::InvalidArgumentError(absl::StrCat("token ", i, " is ", tokens[i], ": the model's ids are 0 to ",
                                                     program.model().vocab() - 1));
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::Impl::FeedPending(absl::Span<const uint32_t> more) {
  const size_t fed = static_cast<size_t>(decoder().position());
  const size_t total = seq.size() + more.size();
  if (total > static_cast<size_t>(max_context)) {
    return absl::OutOfRangeError(absl::StrCat("the sequence would hold ", total, " tokens (", seq.size(), " + ",
                                              more.size(), " new), the context ", max_context,
                                              " (EngineOptions.max_context)"));
  }
  seq.insert(seq.end(), more.begin(), more.end());
  if (total == fed) return absl::OkStatus();
  const absl::Status status = decoder().Feed(absl::Span<const uint32_t>(seq).subspan(fed));
  // The sequence is what the KV cache holds.
  if (!status.ok()) seq.resize(static_cast<size_t>(decoder().position()));
  return status;
}

absl::Status Engine::Impl::StartSequence(const std::vector<uint32_t>& prompt, int* reused) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  const size_t fed = static_cast<size_t>(decoder().position());
  size_t keep = 0;
  // The prompt's last token is fed again even when cached: its logits choose the next.
  while (keep < fed && keep + 1 < prompt.size() && seq[keep] == prompt[keep]) ++keep;
  DK_RETURN_IF_ERROR(decoder().Truncate(static_cast<int>(keep)));
  seq.assign(prompt.begin(), prompt.begin() + keep);
  *reused = static_cast<int>(keep);
  return FeedPending(absl::Span<const uint32_t>(prompt).subspan(keep));
}

absl::StatusOr<const dk::tokenizer::ChatTemplate*> Engine::Impl::ChatTemplate() {
  if (chat) return &*chat;
  if (!options.chat_format.empty()) {
    DK_ASSIGN_OR_RETURN(chat, dk::tokenizer::ChatTemplate::ByName(options.chat_format));
    return &*chat;
  }
  absl::StatusOr<std::string> text = dk::tokenizer::LoadChatTemplateText(tokenizer_path);
  if (absl::IsNotFound(text.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model's files (", tokenizer_path, ") carry no chat template: set EngineOptions.chat_format (llama3, ",
        "chatml, gemma or raw; generate: --chat_format)"));
  }
  DK_RETURN_IF_ERROR(text.status());
  DK_ASSIGN_OR_RETURN(chat, dk::tokenizer::ChatTemplate::Recognize(*text));
  return &*chat;
}

absl::Status Engine::Impl::Loop(const GenerateOptions& o, const std::vector<uint32_t>& stops,
                                internal::TextSink& sink, GenerateResult& result) {
  dk::runtime::GreedyOptions loop;
  loop.max_new_tokens = o.max_new_tokens;
  loop.stop_tokens = stops;
  loop.end_requested = [&sink] { return sink.ended(); };
  std::optional<dk::runtime::Sampler> sampler;
  if (!IsGreedy(o.sampling)) {
    DK_ASSIGN_OR_RETURN(sampler, dk::runtime::Sampler::Create(ToRuntime(o.sampling)));
    const size_t vocab = static_cast<size_t>(program.model().vocab());
    loop.choose = [&sampler, vocab](const dk::runtime::Decoder& d, absl::Span<const uint32_t> context) {
      return sampler->Sample(absl::Span<const float>(d.logits(), vocab), context);
    };
  }
  DK_ASSIGN_OR_RETURN(
      const dk::runtime::GreedyRun run,
      dk::runtime::ContinueGreedy(decoder(), &seq, loop, [&](int, const dk::runtime::StepResult& step) {
        result.tokens.push_back(static_cast<int32_t>(step.token));
        return sink.Push(static_cast<int32_t>(step.token));
      }));
  for (double ms : run.token_ms) result.decode_ms += ms;
  result.draft_checks = run.checks;
  result.drafted = run.drafted;
  result.accepted = run.accepted;
  if (run.stopped) result.stop = StopReason::kEndOfGeneration;
  return absl::OkStatus();
}

absl::StatusOr<GenerateResult> Engine::Impl::Generate(const GenerateOptions& o, const TextCallback& on_text,
                                                      std::vector<uint32_t> stops) {
  DK_RETURN_IF_ERROR(ValidateGenerateOptions(o));
  if (seq.empty()) return absl::FailedPreconditionError("Generate: feed a prompt first (the sequence is empty)");
  DK_RETURN_IF_ERROR(FeedPending());
  // The last new token is chosen, not fed: max_new_tokens - 1 more positions.
  if (static_cast<int64_t>(seq.size()) + o.max_new_tokens - 1 > max_context) {
    return absl::OutOfRangeError(absl::StrCat("the sequence (", seq.size(), " tokens) + max_new_tokens (",
                                              o.max_new_tokens, ") does not fit the context of ", max_context,
                                              " positions (EngineOptions.max_context)"));
  }
  if (o.stop_at_end_of_generation) {
    for (int32_t id : tokenizer->end_of_generation_ids()) stops.push_back(static_cast<uint32_t>(id));
  } else {
    stops.clear();
  }
  GenerateResult result;
  internal::TextSink sink(*tokenizer, o.stop_strings, on_text, &result.text);
  DK_RETURN_IF_ERROR(Loop(o, stops, sink, result));
  sink.Finish();
  if (sink.stop_string_seen()) result.stop = StopReason::kStopString;
  else if (sink.callback_ended()) result.stop = StopReason::kCallback;
  return result;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& options) {
  return internal::EngineAccess::Open(options, {});
}

absl::StatusOr<std::unique_ptr<Engine>> internal::EngineAccess::Open(const EngineOptions& options,
                                                                      const ToolOptions& tool) {
  auto impl = std::make_unique<Engine::Impl>();
  impl->options = options;
  impl->tool = tool;
  DK_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

absl::StatusOr<std::vector<int32_t>> Engine::Tokenize(std::string_view text, bool add_special) const {
  return impl_->tokenizer->Encode(absl::string_view(text.data(), text.size()), add_special);
}

absl::StatusOr<std::string> Engine::Detokenize(absl::Span<const int32_t> tokens) const {
  return impl_->tokenizer->Decode(tokens);
}

absl::StatusOr<std::string> Engine::FormatChat(absl::Span<const Message> messages, bool add_generation_prompt) const {
  DK_ASSIGN_OR_RETURN(const dk::tokenizer::ChatTemplate* chat, impl_->ChatTemplate());
  std::vector<dk::tokenizer::ChatMessage> m;
  for (const Message& message : messages) m.push_back({message.role, message.content});
  return chat->Apply(m, add_generation_prompt);
}

absl::Status Engine::Feed(absl::Span<const int32_t> tokens) {
  DK_RETURN_IF_ERROR(impl_->CheckIds(tokens));
  if (tokens.empty()) return absl::OkStatus();
  return impl_->FeedPending(ToIds(tokens));
}

absl::StatusOr<GenerateResult> Engine::Generate(const GenerateOptions& options, const TextCallback& on_text) {
  return impl_->Generate(options, on_text, {});
}

absl::StatusOr<GenerateResult> Engine::Impl::Run(absl::Span<const int32_t> prompt, const GenerateOptions& o,
                                                 const TextCallback& on_text, std::vector<uint32_t> stops) {
  DK_RETURN_IF_ERROR(CheckIds(prompt));
  const auto t0 = Clock::now();
  int reused = 0;
  DK_RETURN_IF_ERROR(StartSequence(ToIds(prompt), &reused));
  const double prompt_ms = MsSince(t0);
  DK_ASSIGN_OR_RETURN(GenerateResult result, Generate(o, on_text, std::move(stops)));
  result.prompt_tokens = static_cast<int>(prompt.size()) - reused;
  result.reused_tokens = reused;
  result.prompt_ms = prompt_ms;
  return result;
}

absl::StatusOr<GenerateResult> Engine::Complete(std::string_view prompt, const GenerateOptions& options,
                                                const TextCallback& on_text) {
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, Tokenize(prompt, true));
  return impl_->Run(ids, options, on_text, {});
}

absl::StatusOr<GenerateResult> Engine::Chat(absl::Span<const Message> messages, const GenerateOptions& options,
                                            const TextCallback& on_text) {
  DK_ASSIGN_OR_RETURN(const std::string text, FormatChat(messages, true));
  // The template writes BOS itself where the model wants one.
  DK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, Tokenize(text, false));
  DK_ASSIGN_OR_RETURN(std::vector<uint32_t> stops, internal::EngineAccess::ChatStops(*this));
  return impl_->Run(ids, options, on_text, std::move(stops));
}

absl::Status Engine::Truncate(int tokens) {
  Impl& m = *impl_;
  if (tokens < 0 || static_cast<size_t>(tokens) > m.seq.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Truncate(", tokens, "): the sequence has ", m.seq.size(), " tokens (keep 0..", m.seq.size(), ")"));
  }
  // The last kept token is fed again (lazily) for its logits.
  DK_RETURN_IF_ERROR(m.decoder().Truncate(std::min(m.decoder().position(), std::max(tokens - 1, 0))));
  m.seq.resize(static_cast<size_t>(tokens));
  return absl::OkStatus();
}

void Engine::Reset() {
  impl_->decoder().Reset();
  impl_->seq.clear();
}

std::vector<int32_t> Engine::tokens() const { return {impl_->seq.begin(), impl_->seq.end()}; }

absl::StatusOr<absl::Span<const float>> Engine::Logits() {
  if (impl_->seq.empty()) return absl::FailedPreconditionError("Logits: the sequence is empty");
  DK_RETURN_IF_ERROR(impl_->FeedPending());
  return absl::Span<const float>(impl_->decoder().logits(), static_cast<size_t>(vocab_size()));
}

int Engine::vocab_size() const { return static_cast<int>(impl_->program.model().vocab()); }
int Engine::max_context() const { return impl_->max_context; }

std::string Engine::Describe() const {
  const Impl& m = *impl_;
  const dk::ThreadPool* pool = m.tool.pool != nullptr ? m.tool.pool : m.pool.get();
  return absl::StrCat(m.built.empty() ? "" : m.built + "; ", m.program.model().name(), " stage ", std::filesystem::path(m.options.elf).filename().string(),
                      " on ", m.session->device().description(), ", threads=", pool->num_threads(),
                      " prefill_chunk=", m.session->decoder().prefill_rows(), " context=", m.max_context,
                      " chat_format=", m.options.chat_format.empty() ? "model's own" : m.options.chat_format);
}

dk::runtime::Decoder& internal::EngineAccess::Decoder(Engine& engine) { return engine.impl_->decoder(); }

const dk::tokenizer::Tokenizer& internal::EngineAccess::Tokenizer(const Engine& engine) {
  return *engine.impl_->tokenizer;
}

absl::StatusOr<std::vector<uint32_t>> internal::EngineAccess::ChatStops(const Engine& engine) {
  DK_ASSIGN_OR_RETURN(const dk::tokenizer::ChatTemplate* chat, engine.impl_->ChatTemplate());
  std::vector<uint32_t> stops;
  if (!chat->end_of_turn().empty()) {
    const int32_t end = engine.impl_->tokenizer->TokenToId(chat->end_of_turn());
    if (end >= 0) stops.push_back(static_cast<uint32_t>(end));
  }
  return stops;
}

bool internal::EngineAccess::IsGreedy(const SamplingOptions& sampling) { return decodekit::IsGreedy(sampling); }

dk::runtime::SamplingOptions internal::EngineAccess::RuntimeSampling(const SamplingOptions& sampling) {
  return ToRuntime(sampling);
}

}  // namespace decodekit
