// The committed SmolLM2 goldens (models/smollm2_135m/goldens/hf_bf16.json) agree with the
// rest of the toolkit: their prompt ids are what //tokenizer encodes, their text_out is
// what it decodes, their weights digest is what //weights computes over the same GGUF,
// and they pass the gate against llama.cpp's greedy decode of the same file.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "verify/gate.h"
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

// The goldens against an independent record of the same GGUF: llama.cpp's greedy
// decode of the same prompt ids (goldens/llamacpp.json, tools/peer/record_goldens.py).
// Two engines on one file agree under the gate; goldens recorded on other weights,
// other prompts or with a broken reference would not. The control below swaps the
// record's continuations between prompts and must fail the same gate.
TEST_F(Smollm2GoldensTest, PassTheGateAgainstLlamaCppOnTheSameFile) {
  absl::StatusOr<Goldens> peer =
      LoadGoldens(runfiles_->Rlocation("decodekit/models/smollm2_135m/goldens/llamacpp.json"));
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->weights_digest, goldens_.weights_digest);
  ASSERT_EQ(peer->prompts.size(), goldens_.prompts.size());
  for (size_t i = 0; i < peer->prompts.size(); ++i) {
    EXPECT_EQ(peer->prompts[i].prompt_ids, goldens_.prompts[i].prompt_ids) << i;
  }
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::Load(gguf_);
  ASSERT_TRUE(tok.ok()) << tok.status();
  DecodeFn decode = [&](const std::vector<uint32_t>& ids) {
    absl::StatusOr<std::string> s = (*tok)->Decode(std::vector<int32_t>(ids.begin(), ids.end()));
    return s.ok() ? *s : absl::StrCat("<", s.status().ToString(), ">");
  };
  absl::StatusOr<GateReport> r = CheckLogprobsClose(goldens_.Sequences(), peer->Sequences(), decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed) << FormatGateReport(*r);
  std::cout << "HF goldens vs llama.cpp on the same GGUF:\n" << FormatGateReport(*r);

  std::vector<Sequence> swapped = peer->Sequences();
  for (size_t i = 0; i < swapped.size(); ++i) {
    swapped[i].steps = peer->prompts[(i + 1) % swapped.size()].sequence.steps;
  }
  absl::StatusOr<GateReport> control = CheckLogprobsClose(goldens_.Sequences(), swapped, decode);
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_FALSE(control->passed) << FormatGateReport(*control);
}

}  // namespace
}  // namespace dk::verify
