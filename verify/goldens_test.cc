#include "verify/goldens.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dk::verify {
namespace {

using ::testing::HasSubstr;

// Two prompts, two steps each.
constexpr char kGoldens[] = R"({
 "model": "tiny",
 "weights_digest": "sha256:00ff",
 "transformers_version": "5.24.0",
 "torch_version": "2.15.0",
 "new_tokens": 2,
 "extra_field": "ignored",
 "prompts": [
  {"text": "Hello", "prompt_ids": [1, 2], "text_out": " world!",
   "steps": [
    {"id": 5, "top5": [5, 6, 7, 8, 9], "top5_logits": [3.5, 3.0, 2.0, 1.0, 0.5]},
    {"id": 9, "top5": [9, 1, 3, 2, 4], "top5_logits": [1.0, 0.5, 0.5, 0.25, 0.0]}]},
  {"text": "Bye", "prompt_ids": [3], "text_out": "!!",
   "steps": [
    {"id": 0, "top5": [0, 1, 2, 3, 4], "top5_logits": [1, 1, 1, 1, 1]},
    {"id": 0, "top5": [0, 1, 2, 3, 4], "top5_logits": [1, 0, -1, -2, -3]}]}
 ]
})";

absl::Status ParseError(const std::string& json) {
  return ParseGoldens(json, "test.json").status();
}

TEST(GoldensTest, Parses) {
  absl::StatusOr<Goldens> g = ParseGoldens(kGoldens, "test.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->model, "tiny");
  EXPECT_EQ(g->weights_digest, "sha256:00ff");
  EXPECT_EQ(g->new_tokens, 2);
  ASSERT_EQ(g->prompts.size(), 2u);
  const GoldenPrompt& p = g->prompts[0];
  EXPECT_EQ(p.text, "Hello");
  EXPECT_EQ(p.prompt_ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(p.text_out, " world!");
  EXPECT_EQ(p.sequence.prompt, "Hello");
  ASSERT_EQ(p.sequence.steps.size(), 2u);
  EXPECT_EQ(p.sequence.steps[1].id, 9u);
  EXPECT_EQ(p.sequence.steps[1].top5, (std::vector<uint32_t>{9, 1, 3, 2, 4}));
  EXPECT_FLOAT_EQ(p.sequence.steps[0].top5_logits[0], 3.5f);
  EXPECT_EQ(g->Sequences().size(), 2u);
  EXPECT_EQ(g->Sequences(1).size(), 1u);
  EXPECT_EQ(g->Sequences(1)[0].prompt, "Hello");
}

// Which reference made the goldens: the "reference" field, else from the versions.
TEST(GoldensTest, ReferenceNamesWhoRecordedThem) {
  absl::StatusOr<Goldens> g = ParseGoldens(kGoldens, "test.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->reference, "");
  EXPECT_EQ(g->Reference(), "transformers 5.24.0 bf16");  // older goldens: from the version
  const std::string with_field = absl::StrReplaceAll(
      kGoldens, {{R"("new_tokens": 2,)", R"j("new_tokens": 2, "reference": "decodekit reference decoder (x)",)j"}});
  g = ParseGoldens(with_field, "test.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->Reference(), "decodekit reference decoder (x)");
  const std::string llamacpp = absl::StrReplaceAll(
      kGoldens, {{R"("transformers_version": "5.24.0",)",
                  R"j("transformers_version": "none (llama.cpp record)", "generator": "record_goldens.py",)j"}});
  g = ParseGoldens(llamacpp, "test.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->Reference(), "record_goldens.py (none (llama.cpp record))");
  EXPECT_THAT(ParseError(absl::StrReplaceAll(kGoldens, {{R"("new_tokens": 2,)", R"("new_tokens": 2, "reference": 3,)"}}))
                  .message(),
              HasSubstr("reference: expected a string"));
}

TEST(GoldensTest, MissingFieldsNameThePath) {
  std::string no_top5 = absl::StrReplaceAll(kGoldens, {{R"("top5": [9, 1, 3, 2, 4], )", ""}});
  absl::Status s = ParseError(no_top5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("goldens test.json: prompts[0].steps[1].top5: missing field"));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{R"( "weights_digest": "sha256:00ff",)", ""}}));
  EXPECT_THAT(s.message(), HasSubstr("weights_digest: missing field"));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{R"("prompt_ids": [3], )", ""}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[1].prompt_ids: missing field"));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{R"("text": "Bye", )", ""}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[1].text: missing field"));
}

TEST(GoldensTest, WrongTypesAndShapes) {
  absl::Status s =
      ParseError(absl::StrReplaceAll(kGoldens, {{R"("new_tokens": 2)", R"("new_tokens": "2")"}}));
  EXPECT_THAT(s.message(), HasSubstr("new_tokens: expected an integer"));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{"[5, 6, 7, 8, 9]", "[5, 6, -7, 8, 9]"}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[0].steps[0].top5[2]: expected a token id"));

  // A prompt with fewer steps than new_tokens.
  s = ParseError(absl::StrReplaceAll(kGoldens, {{R"("new_tokens": 2)", R"("new_tokens": 3)"}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[0].steps: has 2 steps, new_tokens is 3"));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{"[5, 6, 7, 8, 9]", "[5, 6, 7, 8]"}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[0].steps[0]: top5 has 4 ids, expected 5"));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{R"("id": 9,)", R"("id": 1,)"}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[0].steps[1]: chosen id 1 is not top5[0]"));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{"sha256:00ff", "md5:00ff"}}));
  EXPECT_THAT(s.message(), HasSubstr("expected \"sha256:<hex>\""));

  s = ParseError(absl::StrReplaceAll(kGoldens, {{"\"prompts\": [", "\"prompts\": {"}}));
  EXPECT_THAT(s.message(), HasSubstr("not valid JSON"));

  s = ParseError("[1, 2]");
  EXPECT_THAT(s.message(), HasSubstr("<root>: not an object"));
}

// Found with //verify:goldens_fuzzer's invariant (every accepted logit is finite):
// 1e300 was read as inf, so two of them tied and passed as sorted.
TEST(GoldensTest, LogitsMustBeFiniteFloats) {
  absl::Status s = ParseError(absl::StrReplaceAll(
      kGoldens, {{"[3.5, 3.0, 2.0, 1.0, 0.5]", "[1e300, 1e300, 2.0, 1.0, 0.5]"}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("prompts[0].steps[0].top5_logits[0]: 1e+300 is not a finite float"));
  s = ParseError(absl::StrReplaceAll(kGoldens,
                                     {{"[1, 0, -1, -2, -3]", "[1, 0, -1, -2, -3.5e38]"}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[1].steps[1].top5_logits[4]: "));
  EXPECT_THAT(s.message(), HasSubstr("is not a finite float"));
  // The largest float is still a float.
  EXPECT_TRUE(ParseGoldens(absl::StrReplaceAll(kGoldens, {{"[3.5, 3.0, 2.0, 1.0, 0.5]",
                                                           "[3.4e38, 3.0, 2.0, 1.0, 0.5]"}}),
                           "test.json")
                  .ok());
}

TEST(GoldensTest, TiesMustGoToTheSmallerId) {
  // Step 1 of prompt 0 lists the tied 0.5s as ids 1, 3: fine. Swapped: malformed.
  absl::Status s =
      ParseError(absl::StrReplaceAll(kGoldens, {{"[9, 1, 3, 2, 4]", "[9, 3, 1, 2, 4]"}}));
  EXPECT_THAT(s.message(), HasSubstr("prompts[0].steps[1]: tied logits 0.5"));
  EXPECT_THAT(s.message(), HasSubstr("ties must go to the smaller id"));
}

TEST(GoldensTest, LoadMissingFileIsNotFound) {
  absl::StatusOr<Goldens> g = LoadGoldens("/nonexistent/goldens.json");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(g.status().message(), HasSubstr("/nonexistent/goldens.json"));
}

// /dev/zero as --goldens was read without bound until std::bad_alloc.
TEST(GoldensTest, LoadRefusesWhatIsNotARegularFile) {
  absl::StatusOr<Goldens> g = LoadGoldens("/dev/zero");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("goldens /dev/zero is not a regular file"));
}

TEST(ValidateStepTest, AcceptsRecordWithoutLogits) {
  EXPECT_TRUE(ValidateStep(StepRecord{4, {4, 3, 2, 1, 0}, {}}, 5, "s").ok());
  absl::Status s = ValidateStep(StepRecord{4, {4, 3, 2, 4, 0}, {}}, 5, "s");
  EXPECT_THAT(s.message(), HasSubstr("s: top5 ids are not distinct"));
}

}  // namespace
}  // namespace dk::verify
