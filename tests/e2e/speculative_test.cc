// speculative_decode on SmolLM2's real weights: decode_spec (drafts by prompt lookup,
// checked max_draft + 1 rows at a time) generates exactly decode_gguf's tokens, with
// the same top-k ids and logits at every step, on a repetitive prompt (where drafts
// are accepted) and on ordinary ones; and it did check drafts.
#include <memory>
#include <string>
#include <vector>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace dk {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

struct Generated {
  std::vector<runtime::StepResult> steps;
  runtime::GreedyRun run;
};

class Speculative : public ::testing::Test {
 protected:
  void SetUp() override {
    std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest());
    ASSERT_NE(runfiles, nullptr);
    gguf_ = runfiles->Rlocation("smollm2_135m/model.gguf");
    for (const char* name : {"decode_gguf", "decode_spec"}) {
      auto p = elf::ReadElfFile(runfiles->Rlocation(std::string("decodekit/models/smollm2_135m/") + name + ".elf"));
      ASSERT_TRUE(p.ok()) << p.status();
      programs_.push_back(*p);
    }
    auto w = runtime::LoadWeightsSpec(gguf_, programs_[0].model());
    ASSERT_TRUE(w.ok()) << w.status();
    weights_ = *w;
    auto tok = tokenizer::Tokenizer::Load(gguf_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = *std::move(tok);
  }

  Generated Generate(int stage, const std::string& text, int tokens) {
    runtime::SessionOptions options;
    options.validate = true;
    auto session = runtime::CpuSession::Open(programs_[stage], "test.elf", weights_, options);
    EXPECT_TRUE(session.ok()) << session.status();
    auto ids = tokenizer_->Encode(text);
    EXPECT_TRUE(ids.ok());
    const std::vector<uint32_t> prompt(ids->begin(), ids->end());
    Generated out;
    runtime::GreedyOptions greedy;
    greedy.max_new_tokens = tokens;
    auto run = runtime::GenerateGreedy((*session)->decoder(), prompt, greedy,
                                       [&](int, const runtime::StepResult& s) {
                                         out.steps.push_back(s);
                                         return absl::OkStatus();
                                       });
    EXPECT_TRUE(run.ok()) << run.status();
    if (run.ok()) out.run = *run;
    return out;
  }

  void ExpectSame(const Generated& parent, const Generated& spec) {
    ASSERT_EQ(parent.steps.size(), spec.steps.size());
    for (size_t i = 0; i < parent.steps.size(); ++i) {
      EXPECT_EQ(parent.steps[i].token, spec.steps[i].token) << "token " << i;
      EXPECT_EQ(parent.steps[i].top_ids, spec.steps[i].top_ids) << "token " << i;
      EXPECT_EQ(parent.steps[i].top_logits, spec.steps[i].top_logits) << "token " << i;
    }
  }

  std::string gguf_;
  std::vector<elf::Program> programs_;
  std::shared_ptr<const weights::Weights> weights_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

TEST_F(Speculative, RepetitivePromptSameTokensWithAcceptedDrafts) {
  ASSERT_TRUE(programs_[1].has_speculative());
  const std::string code =
      "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n\n"
      "Here is the same code again:\n\ndef add(a, b):\n";
  const Generated parent = Generate(0, code, 40);
  const Generated spec = Generate(1, code, 40);
  ExpectSame(parent, spec);
  EXPECT_EQ(parent.run.checks, 0);
  EXPECT_GT(spec.run.checks, 0);
  EXPECT_GT(spec.run.accepted, 10) << "drafted " << spec.run.drafted;  // the code is quoted back
  EXPECT_LT(spec.run.checks, 39);  // fewer runs than tokens
  EXPECT_EQ(spec.run.token_ms.size(), parent.run.token_ms.size());
}

// A stop token chosen inside a check's accepted drafts ends the run there: the
// sequence then holds the prompt and the tokens emitted, nothing fed past the stop.
// So does an end requested after a token inside them.
TEST_F(Speculative, StopInsideAcceptedDraftsLeavesTheSequenceAtTheStop) {
  const std::string code =
      "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n"
      "Here is the same code again:\n\ndef add(a, b):\n";
  const Generated parent = Generate(0, code, 24);
  ASSERT_EQ(parent.steps.size(), 24u);
  auto session = runtime::CpuSession::Open(programs_[1], "test.elf", weights_);
  ASSERT_TRUE(session.ok()) << session.status();
  auto ids = tokenizer_->Encode(code);
  ASSERT_TRUE(ids.ok());
  const std::vector<uint32_t> prompt(ids->begin(), ids->end());
  int stops_inside = 0;
  for (int k = 2; k < 24; ++k) {
    const uint32_t stop = parent.steps[k].token;
    int first = 0;
    while (parent.steps[first].token != stop) ++first;
    runtime::GreedyOptions greedy;
    greedy.max_new_tokens = 24;
    greedy.stop_tokens = {stop};
    auto run = runtime::GenerateGreedy((*session)->decoder(), prompt, greedy, nullptr);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(run->stopped);
    EXPECT_EQ(run->generated, first) << "stop token " << stop;
    EXPECT_EQ((*session)->decoder().position(), static_cast<int>(prompt.size()) + first) << "stop at " << first;
    EXPECT_EQ((*session)->decoder().last().token, stop);
    stops_inside += run->accepted > 0 ? 1 : 0;
    // An end requested after token `first`: it is the run's last, chosen but not fed.
    greedy.stop_tokens.clear();
    int emitted = 0;
    greedy.end_requested = [&emitted, first] { return ++emitted == first + 1; };
    run = runtime::GenerateGreedy((*session)->decoder(), prompt, greedy, nullptr);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_TRUE(run->requested_end);
    EXPECT_EQ(run->generated, first + 1);
    EXPECT_EQ((*session)->decoder().position(), static_cast<int>(prompt.size()) + first) << "end after " << first;
    EXPECT_EQ((*session)->decoder().last().token, stop);
  }
  EXPECT_GT(stops_inside, 0);  // some stops came inside accepted drafts
}

TEST_F(Speculative, OrdinaryPromptsSameTokens) {
  for (const char* text : {"The capital of France is", "Once upon a time, there was a"}) {
    const Generated parent = Generate(0, text, 24);
    const Generated spec = Generate(1, text, 24);
    ExpectSame(parent, spec);
  }
}

}  // namespace
}  // namespace dk
