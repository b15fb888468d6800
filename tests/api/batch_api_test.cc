// decodekit::BatchEngine against decodekit::Engine on SmolLM2-135M-Instruct's GGUF
// (decode_gguf): conversations of different prompt lengths and lengths of answer, greedy
// and sampled with seeds, completions and chats, some with stop strings, joining at
// different steps (more of them than slots, so some wait for one to free), must each
// give exactly the tokens, text and stop reason Engine::Complete / Chat gives alone, and
// the text their callbacks saw must be that text. Then: Cancel and a callback that
// returns false end one sequence early without changing the others; bad options and
// prompts that do not fit are refused.
//   batch_api_test ELF GGUF
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/batch.h"
#include "api/decodekit.h"
#include "gtest/gtest.h"

namespace {

std::string g_elf, g_gguf;
constexpr int kContext = 256;

decodekit::EngineOptions Options() {
  decodekit::EngineOptions o;
  o.elf = g_elf;
  o.weights = g_gguf;
  o.max_context = kContext;
  return o;
}

// One conversation of the test and the step of the batch at which it is added.
struct Conversation {
  int join_step = 0;
  std::string prompt;  // a completion's prompt, or a chat's one user message
  bool chat = false;
  decodekit::GenerateOptions options;
};

decodekit::GenerateOptions Sampled(uint64_t seed, int max_new_tokens) {
  decodekit::GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.sampling.temperature = 0.9f;
  o.sampling.top_p = 0.95f;
  o.sampling.top_k = 40;
  o.sampling.seed = seed;
  return o;
}

decodekit::GenerateOptions Greedy(int max_new_tokens) {
  decodekit::GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  return o;
}

std::vector<Conversation> Conversations() {
  std::vector<Conversation> c;
  c.push_back({0, "The capital of France is", false, Greedy(8)});
  c.push_back({0, "What is the tallest mountain on Earth? Answer in one sentence.", true, Sampled(7, 10)});
  c.push_back({1, "Once upon a time, in a small village by the sea, there lived", false, Sampled(42, 10)});
  c.push_back({3, "Name three colours.", true, Greedy(9)});
  decodekit::GenerateOptions stop = Greedy(16);
  stop.stop_strings = {","};
  c.push_back({4, "Water boils at a temperature of", false, stop});
  c.push_back({6, "Write a haiku about autumn.", true, Sampled(3, 8)});
  decodekit::GenerateOptions penalty = Sampled(11, 7);
  penalty.sampling.repetition_penalty = 1.3f;
  c.push_back({6, "1, 2, 3, 4,", false, penalty});
  return c;
}

absl::StatusOr<decodekit::GenerateResult> Alone(decodekit::Engine& engine, const Conversation& c) {
  engine.Reset();
  if (c.chat) return engine.Chat({{"user", c.prompt}}, c.options);
  return engine.Complete(c.prompt, c.options);
}

absl::StatusOr<int> Add(decodekit::BatchEngine& batch, const Conversation& c, decodekit::TextCallback on_text) {
  if (c.chat) return batch.AddChat({{"user", c.prompt}}, c.options, std::move(on_text));
  return batch.AddCompletion(c.prompt, c.options, std::move(on_text));
}

void ExpectSame(const decodekit::GenerateResult& got, const decodekit::GenerateResult& want, const std::string& where) {
  EXPECT_EQ(got.tokens, want.tokens) << where;
  EXPECT_EQ(got.text, want.text) << where;
  EXPECT_EQ(got.stop, want.stop) << where;
  EXPECT_EQ(got.prompt_tokens, want.prompt_tokens + want.reused_tokens) << where;
}

TEST(BatchApi, EachConversationAsAlone) {
  auto engine = decodekit::Engine::Open(Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  decodekit::BatchOptions batch_options;
  batch_options.sequences = 3;
  batch_options.prompt_rows = 5;  // prompts read over several steps, beside decode rows
  auto batch = decodekit::BatchEngine::Open(Options(), batch_options);
  ASSERT_TRUE(batch.ok()) << batch.status();

  const std::vector<Conversation> conversations = Conversations();
  std::map<int, size_t> which;                     // batch id -> conversation
  std::vector<std::string> streamed(conversations.size());
  std::map<size_t, decodekit::GenerateResult> got;
  size_t next = 0;
  int most_running = 0, waited = 0;
  for (int step = 0; step < 1000 && (next < conversations.size() || (*batch)->busy()); ++step) {
    while (next < conversations.size() && conversations[next].join_step <= step) {
      const size_t j = next++;
      auto id = Add(**batch, conversations[j], [&streamed, j](std::string_view t) {
        streamed[j] += t;
        return true;
      });
      ASSERT_TRUE(id.ok()) << id.status();
      which[*id] = j;
    }
    for (decodekit::BatchDone& d : (*batch)->Step()) {
      ASSERT_TRUE(d.result.ok()) << "conversation " << which[d.id] << ": " << d.result.status();
      got[which[d.id]] = *std::move(d.result);
    }
    most_running = std::max(most_running, (*batch)->running());
    waited = std::max(waited, (*batch)->waiting());
  }
  EXPECT_EQ(most_running, 3) << "the steps never batched every slot";
  EXPECT_GT(waited, 0) << "no conversation waited for a slot";
  ASSERT_EQ(got.size(), conversations.size());
  for (size_t j = 0; j < conversations.size(); ++j) {
    auto want = Alone(**engine, conversations[j]);
    ASSERT_TRUE(want.ok()) << want.status();
    const std::string where = "conversation " + std::to_string(j) + " (" + conversations[j].prompt + ")";
    ExpectSame(got[j], *want, where);
    EXPECT_EQ(streamed[j], got[j].text) << where;
    EXPECT_FALSE(want->tokens.empty()) << where;
    std::printf("%s: %zu tokens, %s\n", where.c_str(), got[j].tokens.size(), got[j].text.c_str());
  }
  EXPECT_EQ(got[4].stop, decodekit::StopReason::kStopString);
}

// Cancel and a callback's false end their sequence; the one beside them is unchanged.
TEST(BatchApi, CancelAndCallbackEndOneSequence) {
  auto engine = decodekit::Engine::Open(Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto batch = decodekit::BatchEngine::Open(Options(), {});
  ASSERT_TRUE(batch.ok()) << batch.status();
  const Conversation keep{0, "The capital of France is", false, Greedy(10)};
  const Conversation cancel{0, "Once upon a time", false, Greedy(10)};
  auto kept = Add(**batch, keep, nullptr);
  auto cancelled = Add(**batch, cancel, nullptr);
  int pieces = 0;
  auto ended = Add(**batch, cancel, [&pieces](std::string_view) { return ++pieces < 2; });
  ASSERT_TRUE(kept.ok() && cancelled.ok() && ended.ok());
  std::map<int, decodekit::GenerateResult> got;
  for (int step = 0; (*batch)->busy() && step < 100; ++step) {
    if (step == 3) (*batch)->Cancel(*cancelled);
    for (decodekit::BatchDone& d : (*batch)->Step()) {
      ASSERT_TRUE(d.result.ok()) << d.result.status();
      got[d.id] = *std::move(d.result);
    }
  }
  auto want_keep = Alone(**engine, keep);
  auto want_cancel = Alone(**engine, cancel);
  ASSERT_TRUE(want_keep.ok() && want_cancel.ok());
  ExpectSame(got[*kept], *want_keep, "kept");
  for (int id : {*cancelled, *ended}) {
    const decodekit::GenerateResult& r = got[id];
    EXPECT_EQ(r.stop, decodekit::StopReason::kCallback) << id;
    ASSERT_LT(r.tokens.size(), want_cancel->tokens.size()) << id;
    EXPECT_FALSE(r.tokens.empty()) << id;
    EXPECT_EQ(r.tokens, std::vector<int32_t>(want_cancel->tokens.begin(), want_cancel->tokens.begin() + r.tokens.size()))
        << id;
  }
  EXPECT_EQ(pieces, 2);
}

TEST(BatchApi, RefusesBadInput) {
  decodekit::BatchOptions bad;
  bad.sequences = 0;
  EXPECT_NE(decodekit::BatchEngine::Open(Options(), bad).status().message().find("BatchOptions.sequences is 0"),
            std::string::npos);
  bad = {};
  bad.prompt_rows = -1;
  EXPECT_NE(decodekit::ValidateBatchOptions(bad).message().find("BatchOptions.prompt_rows is -1"), std::string::npos);
  auto batch = decodekit::BatchEngine::Open(Options(), {});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ((*batch)->AddTokens(std::vector<int32_t>(kContext + 1, 1), Greedy(1)).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*batch)->AddTokens(std::vector<int32_t>(kContext - 4, 1), Greedy(10)).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*batch)->AddTokens({}, Greedy(1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*batch)->AddTokens({-1}, Greedy(1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*batch)->AddTokens({1}, Greedy(-1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*batch)->busy());
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: batch_api_test ELF GGUF\n");
    return 2;
  }
  g_elf = argv[1];
  g_gguf = argv[2];
  return RUN_ALL_TESTS();
}
