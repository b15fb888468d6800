// The committed SmolLM2 goldens (models/smollm2_135m/goldens/hf_bf16.json) agree with the
// rest of the toolkit: their prompt ids are what //tokenizer encodes, their text_out is
// what it decodes, their weights digest is what //weights computes over the same GGUF,
// and every step is the greedy choice of the logits they record.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "verify/goldens.h"
#include "weights/weights.h"

namespace dk::verify {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

class Smollm2GoldensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    runfiles_.reset(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
    gguf_ = runfiles_->Rlocation("smollm2_135m/model.gguf");
    absl::StatusOr<Goldens> g =
        LoadGoldens(runfiles_->Rlocation("decodekit/models/smollm2_135m/goldens/hf_bf16.json"));
    ASSERT_TRUE(g.ok()) << g.status();
    goldens_ = *std::move(g);
  }

  std::unique_ptr<Runfiles> runfiles_;
  std::string gguf_;
  Goldens goldens_;
};

TEST_F(Smollm2GoldensTest, ShapeOfTheFullAndFastGate) {
  EXPECT_EQ(goldens_.model, "smollm2_135m");
  EXPECT_EQ(goldens_.new_tokens, 32);
  ASSERT_EQ(goldens_.prompts.size(), 8u);
  // The fast gate's two prompts come first.
  EXPECT_EQ(goldens_.prompts[0].text, "The capital of France is");
  EXPECT_EQ(goldens_.prompts[1].text, "def fibonacci(n):");
  // HF's first greedy token for the canonical prompt is " Paris".
  EXPECT_EQ(goldens_.prompts[0].sequence.steps[0].id, 7042u);
}

TEST_F(Smollm2GoldensTest, PromptIdsAndTextMatchTokenizer) {
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::Load(gguf_);
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const GoldenPrompt& p : goldens_.prompts) {
    absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(p.text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(std::vector<uint32_t>(ids->begin(), ids->end()), p.prompt_ids) << p.text;
    std::vector<int32_t> out;
    for (const StepRecord& s : p.sequence.steps) out.push_back(static_cast<int32_t>(s.id));
    absl::StatusOr<std::string> text = (*tok)->Decode(out);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, p.text_out) << p.text;
  }
}

TEST_F(Smollm2GoldensTest, WeightsDigestMatchesGgufLoader) {
  absl::StatusOr<weights::Weights> w = weights::LoadGguf(gguf_);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->Digest(), goldens_.weights_digest)
      << "the goldens were recorded on other weights than //weights loads from " << gguf_;
}

// The goldens are a greedy decode: at every step the chosen token is the recorded
// top-1, and the top-5 are ordered by (-logit, id) as verify/goldens.h defines. A file
// that breaks this (a re-recording with sampling on, a hand edit, a top-5 cut from
// another step) would make the gate compare against tokens no greedy decoder picks.
TEST_F(Smollm2GoldensTest, EveryStepIsTheGreedyChoiceOfItsRecordedLogits) {
  int steps = 0;
  for (const GoldenPrompt& p : goldens_.prompts) {
    ASSERT_EQ(p.sequence.steps.size(), static_cast<size_t>(goldens_.new_tokens)) << p.text;
    for (size_t i = 0; i < p.sequence.steps.size(); ++i) {
      const StepRecord& s = p.sequence.steps[i];
      ASSERT_EQ(s.top5.size(), 5u) << p.text << " step " << i;
      ASSERT_EQ(s.top5_logits.size(), 5u) << p.text << " step " << i;
      EXPECT_EQ(s.id, s.top5[0]) << p.text << " step " << i << ": the chosen token is not the top-1";
      for (size_t k = 0; k + 1 < 5; ++k) {
        EXPECT_TRUE(std::isfinite(s.top5_logits[k])) << p.text << " step " << i;
        const bool ordered = s.top5_logits[k] > s.top5_logits[k + 1] ||
                             (s.top5_logits[k] == s.top5_logits[k + 1] && s.top5[k] < s.top5[k + 1]);
        EXPECT_TRUE(ordered) << p.text << " step " << i << " rank " << k << ": " << s.top5[k] << " ("
                             << s.top5_logits[k] << ") before " << s.top5[k + 1] << " (" << s.top5_logits[k + 1]
                             << ")";
      }
      ++steps;
    }
  }
  EXPECT_EQ(steps, 8 * 32);
}

}  // namespace
}  // namespace dk::verify
