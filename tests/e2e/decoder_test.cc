// End to end on a tiny model: the baseline decode ELF on the CPU backend, its errors
// and the greedy loop (reference_decoder_test compares its logits with a scalar
// reference forward pass).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "optimizations/testing/tiny.h"
#include "tests/e2e/tiny_weights.h"
#include "graph/baseline.h"

namespace dk {
namespace {

elf::ModelShape Tiny() { return opt::testing::TinyShape(2); }

TEST(Decoder, KvCacheOverflowIsAClearError) {
  const elf::ModelShape m = Tiny();
  auto program = graph::BuildBaseline(m);
  auto w = std::make_shared<const weights::Weights>(weights::MakeSyntheticWeights(m, 1).value());
  runtime::SessionOptions options;
  options.max_context = 3;
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w, options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*session)->decoder().Step(1).ok());
  auto overflow = (*session)->decoder().Step(1);
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("exceeds the KV cache of 3 positions"), std::string::npos)
      << overflow.status();
  (*session)->decoder().Reset();
  EXPECT_TRUE((*session)->decoder().Step(1).ok());
}

TEST(Decoder, BadTokenAndMismatchedWeightsAreClearErrors) {
  const elf::ModelShape m = Tiny();
  auto program = graph::BuildBaseline(m);
  auto w = std::make_shared<const weights::Weights>(weights::MakeSyntheticWeights(m, 1).value());
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w);
  ASSERT_TRUE(session.ok());
  auto bad = (*session)->decoder().Step(300);
  EXPECT_NE(bad.status().message().find("token id 300 is out of range"), std::string::npos) << bad.status();

  elf::ModelShape other = m;
  other.set_ffn(128);
  auto wrong = std::make_shared<const weights::Weights>(weights::MakeSyntheticWeights(other, 1).value());
  auto s = runtime::CpuSession::Open(*program, "tiny.elf", wrong).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gate_proj"), std::string::npos) << s;
}

// NaN weights make NaN logits: the error says which ELF, step and position, not
// only what top-k saw.
TEST(Decoder, NanLogitsNameTheElfStepAndPosition) {
  const elf::ModelShape m = Tiny();
  auto program = graph::BuildBaseline(m);
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", testing::ScaledWeights(m, NAN));
  ASSERT_TRUE(session.ok()) << session.status();
  auto step = (*session)->decoder().Step(5);
  ASSERT_FALSE(step.ok());
  const std::string msg(step.status().message());
  EXPECT_NE(msg.find("ELF 'tiny.elf'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(host step 'topk'), position 0, input token 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no finite logit among the 300 of value 'logits'"), std::string::npos) << msg;
}

// Issue 15: sizes that pass validation can still not fit in memory. Synthetic
// weights ended in a DK_CHECK abort; a host value that failed to allocate was a
// null buffer the host steps wrote to.
TEST(Decoder, SizesThatDoNotFitInMemoryAreErrors) {
  elf::ModelShape huge = Tiny();
  huge.set_vocab(1 << 24);
  huge.set_hidden(1 << 24);  // the embedding alone: 2^48 elements
  auto synthetic = weights::MakeSyntheticWeights(huge, 1);
  EXPECT_EQ(synthetic.status().code(), absl::StatusCode::kResourceExhausted) << synthetic.status();
  EXPECT_NE(synthetic.status().message().find("model.embed_tokens.weight"), std::string::npos)
      << synthetic.status();

  std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
  int mode = -1;
  overcommit >> mode;
  if (mode == 1) GTEST_SKIP() << "vm.overcommit_memory=1: a 1 TiB allocation would succeed";
  const elf::ModelShape m = Tiny();
  auto program = graph::BuildBaseline(m);
  ASSERT_TRUE(program.ok());
  elf::HostValue* v = program->add_values();
  v->set_name("scratch");
  v->add_shape(int64_t{1} << 39);  // 1 TiB of bf16: valid (elf::kMaxBytes), not allocatable
  v->set_dtype(elf::BF16);
  ASSERT_TRUE(elf::ValidateProgram(*program).ok()) << elf::ValidateProgram(*program);
  auto w = std::make_shared<const weights::Weights>(weights::MakeSyntheticWeights(m, 1).value());
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kResourceExhausted) << session.status();
  EXPECT_NE(session.status().message().find("host value 'scratch'"), std::string::npos)
      << session.status();
}

TEST(Decoder, ActivationMarkedStaticIsNamedOnTheSecondToken) {
  const elf::ModelShape m = Tiny();
  auto program = graph::BuildBaseline(m);
  ASSERT_TRUE(program.ok());
  bool found = false;
  for (auto& bo : *program->mutable_bos()) {
    if (bo.name() == "L0.q_proj.x") {  // mirrors L0.xn, a new activation every token
      bo.set_category(elf::STATIC);
      found = true;
    }
  }
  ASSERT_TRUE(found);
  auto w = std::make_shared<const weights::Weights>(weights::MakeSyntheticWeights(m, 1).value());
  runtime::SessionOptions options;
  options.validate = true;
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w, options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->decoder().Step(5).ok());
  auto second = (*session)->decoder().Step(6);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("group 'L0.q_proj': STATIC BO 'L0.q_proj.x' mirrors host "
                                           "value 'L0.xn', which changed"),
            std::string::npos)
      << second.status();
}

// runtime::GenerateGreedy is the hand-written loop: the prompt one token at a time,
// then token i chosen after feeding token i - 1; N tokens take N - 1 decode steps.
TEST(Greedy, GeneratesWhatStepByStepDecodingDoes) {
  const elf::ModelShape m = Tiny();
  auto program = graph::BuildBaseline(m);
  ASSERT_TRUE(program.ok());
  auto w = testing::ScaledWeights(m, 25.0f);
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w);
  ASSERT_TRUE(session.ok()) << session.status();
  runtime::Decoder& decoder = (*session)->decoder();
  const std::vector<uint32_t> prompt = {3, 17, 42};
  std::vector<uint32_t> want;
  decoder.Reset();
  absl::StatusOr<runtime::StepResult> step;
  for (uint32_t id : prompt) step = decoder.Step(id);
  ASSERT_TRUE(step.ok());
  for (int i = 0; i < 6; ++i) {
    want.push_back(step->token);
    if (i + 1 < 6) step = decoder.Step(step->token);
  }

  runtime::GreedyOptions options;
  options.max_new_tokens = 6;
  std::vector<uint32_t> got;
  auto run = runtime::GenerateGreedy(decoder, prompt, options, [&](int i, const runtime::StepResult& s) {
    EXPECT_EQ(i, static_cast<int>(got.size()));
    got.push_back(s.token);
    return absl::OkStatus();
  });
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(got, want);
  EXPECT_EQ(run->generated, 6);
  EXPECT_FALSE(run->stopped);
  EXPECT_EQ(run->token_ms.size(), 5u);
  EXPECT_EQ(decoder.position(), 3 + 5);

  // A stop token ends the run before it is emitted.
  options.stop_tokens = {want[2]};
  got.clear();
  run = runtime::GenerateGreedy(decoder, prompt, options, [&](int, const runtime::StepResult& s) {
    got.push_back(s.token);
    return absl::OkStatus();
  });
  ASSERT_TRUE(run.ok()) << run.status();
  const auto first = std::find(want.begin(), want.end(), want[2]);
  EXPECT_EQ(got, std::vector<uint32_t>(want.begin(), first));
  EXPECT_TRUE(run->stopped);
  EXPECT_EQ(run->generated, static_cast<int>(got.size()));
  // The sequence ends with the token the stop follows: all of it fed, the stop not.
  EXPECT_EQ(decoder.position(), static_cast<int>(prompt.size() + got.size()));

  // ContinueGreedy goes on from the decoder's state: 2 tokens, then 4 more, are the 6.
  options.stop_tokens.clear();
  ASSERT_TRUE(runtime::FeedPrompt(decoder, prompt).ok());
  std::vector<uint32_t> context = prompt;
  options.max_new_tokens = 2;
  ASSERT_TRUE(runtime::ContinueGreedy(decoder, &context, options, nullptr).ok());
  EXPECT_EQ(decoder.position(), static_cast<int>(context.size()) - 1);  // the last chosen, not fed
  ASSERT_TRUE(decoder.Advance(context.back()).ok());
  options.max_new_tokens = 4;
  ASSERT_TRUE(runtime::ContinueGreedy(decoder, &context, options, nullptr).ok());
  EXPECT_EQ(std::vector<uint32_t>(context.begin() + 3, context.end()), want);
  // It refuses a context that is not what the decoder has fed.
  EXPECT_EQ(runtime::ContinueGreedy(decoder, &context, options, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // The callback's error ends the run and is returned; an empty prompt is an error.
  run = runtime::GenerateGreedy(decoder, prompt, options,
                                [](int, const runtime::StepResult&) { return absl::CancelledError("stop"); });
  EXPECT_EQ(run.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(runtime::GenerateGreedy(decoder, {}, options, nullptr).ok());
}

// The same loop with another token chooser (a sampler's place): each token is the
// chooser's, chosen from the step that fed the previous choice, and fed in turn; a
// chooser taking the step's top-1 is the default (argmax) loop.
TEST(Greedy, AChooserPicksEveryTokenAndItsChoicesAreFed) {
  const elf::ModelShape m = Tiny();
  auto program = graph::BuildBaseline(m);
  ASSERT_TRUE(program.ok());
  auto w = testing::ScaledWeights(m, 25.0f);
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w);
  ASSERT_TRUE(session.ok()) << session.status();
  runtime::Decoder& decoder = (*session)->decoder();
  const std::vector<uint32_t> prompt = {3, 17, 42};
  const uint32_t vocab = static_cast<uint32_t>(m.vocab());
  // Not the argmax: the step's second-best id, offset by how many tokens came before.
  auto pick = [vocab](const runtime::StepResult& s, size_t context) {
    return (s.top_ids.at(1) + static_cast<uint32_t>(context)) % vocab;
  };
  std::vector<uint32_t> want;
  decoder.Reset();
  absl::StatusOr<runtime::StepResult> step;
  for (uint32_t id : prompt) step = decoder.Step(id);
  ASSERT_TRUE(step.ok());
  for (int i = 0; i < 6; ++i) {
    want.push_back(pick(*step, prompt.size() + want.size()));
    if (i + 1 < 6) step = decoder.Step(want.back());
  }

  runtime::GreedyOptions options;
  options.max_new_tokens = 6;
  std::vector<size_t> context_sizes;
  options.choose = [&](const runtime::Decoder& d, absl::Span<const uint32_t> context) {
    context_sizes.push_back(context.size());
    return pick(d.last(), context.size());
  };
  std::vector<uint32_t> got;
  auto run = runtime::GenerateGreedy(decoder, prompt, options, [&](int, const runtime::StepResult& s) {
    got.push_back(s.token);
    return absl::OkStatus();
  });
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(got, want);
  EXPECT_EQ(context_sizes, (std::vector<size_t>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(decoder.position(), 3 + 5);
  // A stop token is checked against the chooser's token.
  options.stop_tokens = {want[3]};
  got.clear();
  run = runtime::GenerateGreedy(decoder, prompt, options, [&](int, const runtime::StepResult& s) {
    got.push_back(s.token);
    return absl::OkStatus();
  });
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->stopped);
  EXPECT_EQ(got, std::vector<uint32_t>(want.begin(), std::find(want.begin(), want.end(), want[3])));

  // The argmax as a chooser is the default loop.
  options.stop_tokens.clear();
  options.choose = [](const runtime::Decoder& d, absl::Span<const uint32_t>) { return d.last().token; };
  std::vector<uint32_t> chosen, plain;
  ASSERT_TRUE(runtime::GenerateGreedy(decoder, prompt, options, [&](int, const runtime::StepResult& s) {
                chosen.push_back(s.token);
                return absl::OkStatus();
              }).ok());
  options.choose = nullptr;
  ASSERT_TRUE(runtime::GenerateGreedy(decoder, prompt, options, [&](int, const runtime::StepResult& s) {
                plain.push_back(s.token);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(chosen, plain);
  EXPECT_NE(chosen, want);
}

}  // namespace
}  // namespace dk
