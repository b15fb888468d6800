// A program outside the repository's packages, as a user writes one: it sees only
// api/decodekit.h. On SmolLM2-135M-Instruct's GGUF (decode_gguf, and decode_spec for the
// speculative path), it checks what the header promises.
//   consumer_test ELF SPEC_ELF MODEL.gguf
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "api/decodekit.h"
#include "gtest/gtest.h"

namespace {

std::string g_elf, g_spec_elf, g_model;

std::unique_ptr<decodekit::Engine> Open(int threads = 0, const std::string& elf = g_elf) {
  decodekit::EngineOptions options;
  options.elf = elf;
  options.weights = g_model;
  options.threads = threads;
  auto engine = decodekit::Engine::Open(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

decodekit::GenerateOptions Tokens(int n) {
  decodekit::GenerateOptions o;
  o.max_new_tokens = n;
  return o;
}

TEST(Consumer, RefusesBadOptionsWithAStatus) {
  decodekit::EngineOptions options;
  options.elf = "/no/such/stage.elf";
  options.weights = g_model;
  auto engine = decodekit::Engine::Open(options);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(std::string(engine.status().message()).find("/no/such/stage.elf"), std::string::npos)
      << engine.status();
  options.elf = g_elf;
  options.threads = -1;
  EXPECT_EQ(decodekit::Engine::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.threads = 0;
  options.chat_format = "vicuna";
  EXPECT_EQ(decodekit::Engine::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Consumer, GreedyIsReproducibleAndMatchesTheLogits) {
  auto engine = Open();
  ASSERT_NE(engine, nullptr);
  auto first = engine->Complete("The capital of France is", Tokens(12));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_NE(first->text.find("Paris"), std::string::npos) << first->text;
  // The first new token is the argmax of the logits after the prompt.
  engine->Reset();
  auto ids = engine->Tokenize("The capital of France is");
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(engine->Feed(*ids).ok());
  auto logits = engine->Logits();
  ASSERT_TRUE(logits.ok());
  ASSERT_EQ(static_cast<int>(logits->size()), engine->vocab_size());
  int best = 0;
  for (int i = 1; i < engine->vocab_size(); ++i) best = (*logits)[i] > (*logits)[best] ? i : best;
  EXPECT_EQ(best, first->tokens[0]);
  auto again = engine->Generate(Tokens(12));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tokens, first->tokens);
  // Speculative decoding (decode_spec) chooses the same tokens.
  auto spec = Open(0, g_spec_elf);
  ASSERT_NE(spec, nullptr);
  auto spec_run = spec->Complete("The capital of France is", Tokens(12));
  ASSERT_TRUE(spec_run.ok()) << spec_run.status();
  EXPECT_EQ(spec_run->tokens, first->tokens);
}

TEST(Consumer, SamplingIsReproducibleWithASeedAcrossThreadCounts) {
  decodekit::GenerateOptions o = Tokens(16);
  o.sampling.temperature = 1.0f;
  o.sampling.top_p = 0.95f;
  o.sampling.seed = 7;
  auto one = Open(1), two = Open(2);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  auto a = one->Complete("Once upon a time", o);
  auto b = two->Complete("Once upon a time", o);
  auto c = one->Complete("Once upon a time", o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->tokens, c->tokens);
  o.sampling.seed = 8;
  auto d = one->Complete("Once upon a time", o);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(a->tokens, d->tokens);
}

TEST(Consumer, KeepsTheSharedPrefixAndTruncates) {
  auto engine = Open(), fresh = Open();
  ASSERT_NE(engine, nullptr);
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(engine->Complete("The capital of France is Paris. The capital of Spain is", Tokens(4)).ok());
  const std::string longer = "The capital of France is Paris. The capital of Spain is Madrid. The capital of Italy is";
  auto reused = engine->Complete(longer, Tokens(8));
  auto want = fresh->Complete(longer, Tokens(8));
  ASSERT_TRUE(reused.ok() && want.ok());
  EXPECT_GT(reused->reused_tokens, 10);
  EXPECT_EQ(reused->prompt_tokens + reused->reused_tokens, want->prompt_tokens);
  EXPECT_EQ(reused->tokens, want->tokens);
  // Truncating back to the prompt and generating again gives the same tokens.
  const int prompt = want->prompt_tokens;
  ASSERT_EQ(static_cast<int>(engine->tokens().size()), prompt + 8);
  ASSERT_TRUE(engine->Truncate(prompt).ok());
  auto again = engine->Generate(Tokens(8));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tokens, want->tokens);
  EXPECT_FALSE(engine->Truncate(prompt + 100).ok());
}

TEST(Consumer, StopsAtStopStringsCallbacksAndTheEndOfTheTurn) {
  auto engine = Open();
  ASSERT_NE(engine, nullptr);
  decodekit::GenerateOptions o = Tokens(12);
  o.stop_strings = {"Paris"};
  std::string streamed;
  auto r = engine->Complete("The capital of France is", o, [&](std::string_view t) {
    streamed += t;
    return true;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, decodekit::StopReason::kStopString);
  EXPECT_EQ(r->text.find("Paris"), std::string::npos);
  EXPECT_EQ(streamed, r->text);
  int pieces = 0;
  r = engine->Complete("Once upon a time", Tokens(12), [&](std::string_view) { return ++pieces < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, decodekit::StopReason::kCallback);
  EXPECT_LT(r->tokens.size(), 12u);
  // The model's chat template (ChatML); the answer ends with the turn.
  // (llama.cpp answers "Hello! How can I assist you today?" and stops too.)
  r = engine->Chat({{"user", "Hi!"}}, Tokens(64));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop, decodekit::StopReason::kEndOfGeneration) << r->text;
  EXPECT_NE(r->text.find("Hello"), std::string::npos) << r->text;
  EXPECT_EQ(r->text.find("<|im_end|>"), std::string::npos) << r->text;
  // The same conversation as plain text: the model's end-of-generation ids stop it.
  auto text = engine->FormatChat({{"user", "Hi!"}});
  ASSERT_TRUE(text.ok()) << text.status();
  auto plain = engine->Complete(*text, Tokens(64));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->stop, decodekit::StopReason::kEndOfGeneration) << plain->text;
  EXPECT_EQ(plain->tokens, r->tokens);
  // ... and run on without them, the turn's end comes out as text.
  decodekit::GenerateOptions on = Tokens(12);
  on.stop_at_end_of_generation = false;
  plain = engine->Complete(*text, on);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(plain->text.find("<|im_end|>"), std::string::npos) << plain->text;
  EXPECT_LT(r->tokens.size(), 64u);
}

// The model file alone (EngineOptions::model): its chain built in process, the best
// stage its weights allow (decode_gguf) run; the same tokens as the rules' decode_gguf.
TEST(Consumer, OpensTheModelFileAlone) {
  decodekit::EngineOptions options;
  options.model = g_model;
  options.max_context = 2048;  // the rules' ELF's, so the two runs are the same program
  options.cache_dir = std::string(std::getenv("TEST_TMPDIR")) + "/elf_cache";
  auto engine = decodekit::Engine::Open(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_NE((*engine)->Describe().find("stage decode_gguf (quantize_weights scheme=gguf over decode_q8), ELF " +
                                       options.cache_dir),
            std::string::npos)
      << (*engine)->Describe();
  auto alone = (*engine)->Complete("The capital of France is", Tokens(8));
  ASSERT_TRUE(alone.ok()) << alone.status();
  auto rules = Open()->Complete("The capital of France is", Tokens(8));
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(alone->tokens, rules->tokens);
  EXPECT_NE(alone->text.find("Paris"), std::string::npos) << alone->text;

  decodekit::EngineOptions both = options;
  both.elf = g_elf;
  auto refused = decodekit::Engine::Open(both);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  decodekit::EngineOptions bad_stage = options;
  bad_stage.stage = "decode_q5";
  auto unknown = decodekit::Engine::Open(bad_stage);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("decode_gguf"), std::string::npos) << unknown.status();
}

TEST(Consumer, RefusesWhatDoesNotFitTheContext) {
  decodekit::EngineOptions options;
  options.elf = g_elf;
  options.weights = g_model;
  options.max_context = 32;
  auto engine = decodekit::Engine::Open(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<int32_t> many(40, 100);
  const absl::Status s = (*engine)->Feed(many);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(std::string(s.message()).find("40"), std::string::npos) << s;
  EXPECT_EQ((*engine)->Feed({-1}).code(), absl::StatusCode::kInvalidArgument);
  auto r = (*engine)->Complete("Hello", Tokens(40));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
  EXPECT_EQ((*engine)->Generate(Tokens(40)).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE((*engine)->Generate(Tokens(4)).ok());  // what fits still runs
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: consumer_test ELF SPEC_ELF MODEL.gguf\n");
    return 2;
  }
  g_elf = argv[1];
  g_spec_elf = argv[2];
  g_model = argv[3];
  return RUN_ALL_TESTS();
}
