// The greedy tokens file: what one process writes, another reads back exactly, and
// only with the ELF, weights and prompts it was made from.
#include "verify/greedy_tokens.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verify/goldens.h"
#include "verify/stage_gate.h"
#include "weights/weights.h"

namespace dk::verify {
namespace {

using ::testing::HasSubstr;

constexpr int kTokens = 3;

std::string TempFile(const std::string& name, const std::string& contents) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

struct Fixture {
  Goldens goldens;
  GateSetup setup;
  std::vector<Sequence> run;  // a greedy run over both prompts
  std::string elf = TempFile("stage.elf", "the stage's bytes");

  Fixture() {
    goldens.weights_digest = "sha256:aaaa";
    goldens.new_tokens = kTokens;
    for (const char* text : {"first prompt", "second prompt"}) {
      GoldenPrompt p;
      p.text = text;
      p.prompt_ids = {1, 2, static_cast<uint32_t>(goldens.prompts.size() + 3)};
      goldens.prompts.push_back(p);
      Sequence s{text, {}};
      for (uint32_t i = 0; i < kTokens; ++i) {
        s.steps.push_back({10 * i, {10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3, 10 * i + 4},
                           {2.5f, 1.0f / 3.0f, -0.f, -1e-30f, -7.25f}});
      }
      run.push_back(s);
    }
    // A NaN survives the round trip as the run produced it.
    run[1].steps[2].top5_logits[4] = std::numeric_limits<float>::quiet_NaN();
    auto weights = std::make_shared<weights::Weights>();
    weights->set_source("test weights");
    setup.weights = weights;
    setup.weights_digest = goldens.weights_digest;
    setup.goldens = &goldens;
    setup.goldens_name = "test goldens";
    setup.prompts = 2;
  }

  std::string Text() {
    absl::StatusOr<std::string> text = FormatGreedyTokens(elf, setup, run);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }
};

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(GreedyTokensTest, RoundTripsExactly) {
  Fixture f;
  const std::string path = TempFile("tokens.json", f.Text());
  absl::StatusOr<std::vector<Sequence>> back = ReadGreedyTokens(path, f.elf, f.setup);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), f.run.size());
  for (size_t i = 0; i < f.run.size(); ++i) {
    EXPECT_EQ((*back)[i].prompt, f.run[i].prompt);
    ASSERT_EQ((*back)[i].steps.size(), f.run[i].steps.size());
    for (size_t j = 0; j < f.run[i].steps.size(); ++j) {
      const StepRecord& got = (*back)[i].steps[j];
      const StepRecord& want = f.run[i].steps[j];
      EXPECT_EQ(got.id, want.id);
      EXPECT_EQ(got.top5, want.top5);
      ASSERT_EQ(got.top5_logits.size(), want.top5_logits.size());
      for (size_t k = 0; k < want.top5_logits.size(); ++k) {
        EXPECT_TRUE(SameBits(got.top5_logits[k], want.top5_logits[k])) << i << " " << j << " " << k;
      }
    }
  }
}

TEST(GreedyTokensTest, RefusesAnotherElf) {
  Fixture f;
  const std::string text = f.Text();
  const std::string other = TempFile("other.elf", "another stage's bytes");
  absl::StatusOr<std::vector<Sequence>> back = ParseGreedyTokens(text, "tokens.json", other, f.setup);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("elf_sha256"));
  EXPECT_THAT(back.status().message(), HasSubstr("stale or another stage's file"));
}

TEST(GreedyTokensTest, RefusesOtherWeights) {
  Fixture f;
  const std::string text = f.Text();
  f.goldens.weights_digest = f.setup.weights_digest = "sha256:bbbb";
  absl::StatusOr<std::vector<Sequence>> back = ParseGreedyTokens(text, "tokens.json", f.elf, f.setup);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("weights_digest"));
}

TEST(GreedyTokensTest, RefusesAnotherPromptCount) {
  Fixture f;
  const std::string text = f.Text();
  f.setup.prompts = 1;
  absl::StatusOr<std::vector<Sequence>> back = ParseGreedyTokens(text, "tokens.json", f.elf, f.setup);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("2 prompts, this run gates 1"));
}

TEST(GreedyTokensTest, RefusesOtherPromptIds) {
  Fixture f;
  const std::string text = f.Text();
  f.goldens.prompts[1].prompt_ids.back() += 1;
  absl::StatusOr<std::vector<Sequence>> back = ParseGreedyTokens(text, "tokens.json", f.elf, f.setup);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("sequences[1]"));
}

TEST(GreedyTokensTest, RefusesOtherNewTokens) {
  Fixture f;
  const std::string text = f.Text();
  f.goldens.new_tokens = kTokens + 1;
  absl::StatusOr<std::vector<Sequence>> back = ParseGreedyTokens(text, "tokens.json", f.elf, f.setup);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("new_tokens"));
}

TEST(GreedyTokensTest, RefusesAnUnvalidatedRunWhenValidating) {
  Fixture f;
  f.setup.validate = false;
  const std::string text = f.Text();
  f.setup.validate = true;
  absl::StatusOr<std::vector<Sequence>> back = ParseGreedyTokens(text, "tokens.json", f.elf, f.setup);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("BO protocol"));
  f.setup.validate = false;
  EXPECT_TRUE(ParseGreedyTokens(text, "tokens.json", f.elf, f.setup).ok());
}

TEST(GreedyTokensTest, RefusesAnotherFormat) {
  Fixture f;
  const std::string text = absl::StrReplaceAll(f.Text(), {{"greedy tokens 1", "greedy tokens 0"}});
  absl::StatusOr<std::vector<Sequence>> back = ParseGreedyTokens(text, "tokens.json", f.elf, f.setup);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("format"));
}

}  // namespace
}  // namespace dk::verify
