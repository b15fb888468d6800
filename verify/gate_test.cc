// The gate must be able to FAIL: divergence outside either top-5, altered reference
// top-5 sets, one failing prompt among passing ones; and PASS with ranks when a
// divergence stays within both top-5s. Structural problems are errors, not verdicts.
#include "verify/gate.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verify/goldens.h"

namespace dk::verify {
namespace {

using ::testing::HasSubstr;

constexpr int kTokens = 32;

// A step choosing `id`, runners-up `id+1..id+4` with descending logits.
StepRecord Step(uint32_t id) {
  return StepRecord{id, {id, id + 1, id + 2, id + 3, id + 4}, {10.f, 9.f, 8.f, 7.f, 6.f}};
}

// A 32-step sequence choosing 100, 200, 300, ...
Sequence Seq(const std::string& prompt) {
  Sequence s{prompt, {}};
  for (int i = 0; i < kTokens; ++i) s.steps.push_back(Step(100 * (i + 1)));
  return s;
}

std::string Decode(const std::vector<uint32_t>& ids) {
  return absl::StrCat("<", absl::StrJoin(ids, ","), ">");
}

TEST(GateTest, IdenticalSequencesPass) {
  std::vector<Sequence> ref = {Seq("a"), Seq("b")};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, ref, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed);
  ASSERT_EQ(r->prompts.size(), 2u);
  for (const PromptVerdict& v : r->prompts) {
    EXPECT_TRUE(v.passed);
    EXPECT_FALSE(v.divergence_step.has_value());
    EXPECT_EQ(v.agreed_ids.size(), 32u);
  }
  EXPECT_EQ(r->prompts[0].agreed_text.substr(0, 9), "<100,200,");
  std::string table = FormatGateReport(*r);
  EXPECT_THAT(table, HasSubstr("PASS (2/2 prompts)"));
  EXPECT_THAT(table, HasSubstr("none"));
}

TEST(GateTest, DivergenceOutsideReferenceTop5FailsAtThatStep) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  // Step 3: reference chose 400 (top-5 400..404); candidate picks 999, which is not in
  // it, though the candidate lists the reference's 400 as its runner-up.
  cand[0].steps[3] = StepRecord{999, {999, 400, 1, 2, 3}, {5.f, 4.f, 3.f, 2.f, 1.f}};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed);
  const PromptVerdict& v = r->prompts[0];
  EXPECT_FALSE(v.passed);
  ASSERT_TRUE(v.divergence_step.has_value());
  EXPECT_EQ(*v.divergence_step, 3);
  EXPECT_EQ(v.reference_choice, 400u);
  EXPECT_EQ(v.candidate_choice, 999u);
  EXPECT_FALSE(v.candidate_rank_in_reference.has_value());
  EXPECT_EQ(v.reference_rank_in_candidate, 2);
  EXPECT_EQ(v.agreed_ids, (std::vector<uint32_t>{100, 200, 300}));
  EXPECT_EQ(v.agreed_text, "<100,200,300>");
  std::string table = FormatGateReport(*r);
  EXPECT_THAT(table, HasSubstr("FAIL"));
  EXPECT_THAT(table, HasSubstr("step 3"));
  EXPECT_THAT(table, HasSubstr("400 -> 999"));
  EXPECT_THAT(table, HasSubstr("absent"));
  EXPECT_THAT(table, HasSubstr("FAIL (0/1 prompts)"));
}

TEST(GateTest, ReferenceChoiceAbsentFromCandidateTop5Fails) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  // Candidate picks the reference's runner-up 401, but its own top-5 lacks 400.
  cand[0].steps[5] = StepRecord{601, {601, 7, 8, 9, 10}, {5.f, 4.f, 3.f, 2.f, 1.f}};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed);
  EXPECT_EQ(r->prompts[0].divergence_step, 5);
  EXPECT_EQ(r->prompts[0].candidate_rank_in_reference, 2);
  EXPECT_FALSE(r->prompts[0].reference_rank_in_candidate.has_value());
}

TEST(GateTest, DivergenceWithinBothTop5PassesWithRanksAndStopsWalking) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  // Step 2: reference 300 (top-5 300..304); candidate 303 with 300 at rank 4.
  cand[0].steps[2] = StepRecord{303, {303, 5, 6, 300, 7}, {5.f, 4.f, 3.f, 2.f, 1.f}};
  // After the divergence the sequences differ wildly; that must not matter.
  for (int i = 3; i < kTokens; ++i) cand[0].steps[i] = Step(50000 + i * 10);
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed);
  const PromptVerdict& v = r->prompts[0];
  EXPECT_EQ(v.divergence_step, 2);
  EXPECT_EQ(v.candidate_rank_in_reference, 4);  // 303 is 4th in 300..304
  EXPECT_EQ(v.reference_rank_in_candidate, 4);
  EXPECT_EQ(v.agreed_text, "<100,200>");
  std::string table = FormatGateReport(*r);
  EXPECT_THAT(table, HasSubstr("#4/5"));
  EXPECT_THAT(table, HasSubstr("PASS (1/1 prompts)"));
}

TEST(GateTest, AlteredReferenceTop5TurnsPassIntoFail) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  cand[0].steps[7] = StepRecord{801, {801, 800, 1, 2, 3}, {5.f, 4.f, 3.f, 2.f, 1.f}};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed);
  // The same candidate against goldens whose step-7 top-5 no longer holds 801.
  ref[0].steps[7].top5 = {800, 11, 12, 13, 14};
  r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed);
  EXPECT_EQ(r->prompts[0].divergence_step, 7);
}

TEST(GateTest, DivergenceAtFirstStepHasEmptyPrefix) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  cand[0].steps[0] = StepRecord{101, {101, 100, 1, 2, 3}, {5.f, 4.f, 3.f, 2.f, 1.f}};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed);
  EXPECT_EQ(r->prompts[0].divergence_step, 0);
  EXPECT_TRUE(r->prompts[0].agreed_ids.empty());
  EXPECT_EQ(r->prompts[0].agreed_text, "<>");
}

TEST(GateTest, OneFailingPromptFailsTheGate) {
  std::vector<Sequence> ref = {Seq("a"), Seq("b"), Seq("c")};
  std::vector<Sequence> cand = ref;
  cand[1].steps[31] = StepRecord{77, {77, 78, 79, 80, 81}, {5.f, 4.f, 3.f, 2.f, 1.f}};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed);
  EXPECT_TRUE(r->prompts[0].passed);
  EXPECT_FALSE(r->prompts[1].passed);
  EXPECT_EQ(r->prompts[1].divergence_step, 31);
  EXPECT_TRUE(r->prompts[2].passed);
  EXPECT_THAT(FormatGateReport(*r), HasSubstr("FAIL (2/3 prompts)"));
}

TEST(GateTest, OnlyTheFirstNumTokensStepsCount) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  cand[0].steps[10] = Step(5);  // outside both top-5s, but past num_tokens = 8
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode, {5, 8});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed);
  EXPECT_EQ(r->prompts[0].agreed_ids.size(), 8u);
}

// Ties go to the smaller id: a tie broken the other way by the candidate is a
// divergence within both top-5s; an id tied with the 5th but larger is outside.
TEST(GateTest, TieHandling) {
  std::vector<Sequence> ref = {Seq("a")};
  ref[0].steps[4] = StepRecord{2, {2, 7, 9, 11, 12}, {5.f, 5.f, 4.f, 3.f, 3.f}};
  std::vector<Sequence> cand = ref;
  cand[0].steps[4] = StepRecord{7, {7, 2, 9, 11, 12}, {5.0f, 4.99f, 4.f, 3.f, 3.f}};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed);
  EXPECT_EQ(r->prompts[0].divergence_step, 4);
  EXPECT_EQ(r->prompts[0].candidate_rank_in_reference, 2);
  EXPECT_EQ(r->prompts[0].reference_rank_in_candidate, 2);

  // 13 ties with 12 at the reference's 5th place but lost the tie (larger id): absent.
  cand[0].steps[4] = StepRecord{13, {13, 2, 9, 11, 12}, {6.f, 5.f, 4.f, 3.f, 3.f}};
  r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->passed);
  EXPECT_FALSE(r->prompts[0].candidate_rank_in_reference.has_value());

  // A record that broke a tie towards the larger id is malformed, not a verdict.
  cand[0].steps[4] = StepRecord{7, {7, 2, 9, 11, 12}, {5.f, 5.f, 4.f, 3.f, 3.f}};
  r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("candidate prompt 0 \"a\" step 4"));
  EXPECT_THAT(r.status().message(), HasSubstr("ties must go to the smaller id"));
}

TEST(GateTest, MissingSequenceIsAnError) {
  std::vector<Sequence> ref = {Seq("a"), Seq("b")};
  std::vector<Sequence> cand = {Seq("a")};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("candidate is missing the sequence for prompt 1 \"b\""));
  EXPECT_FALSE(CheckLogprobsClose({}, {}, Decode).ok());
}

TEST(GateTest, ShortSequenceIsAnError) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  cand[0].steps.resize(20);
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("candidate sequence for prompt 0 \"a\" has 20 steps, the gate needs 32"));
  r = CheckLogprobsClose(cand, ref, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("reference sequence"));
}

TEST(GateTest, PromptMismatchIsAnError) {
  absl::StatusOr<GateReport> r = CheckLogprobsClose({Seq("a")}, {Seq("b")}, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("prompt 0 differs"));
}

TEST(GateTest, MalformedStepsAreErrors) {
  std::vector<Sequence> ref = {Seq("a")};
  std::vector<Sequence> cand = ref;
  cand[0].steps[1].top5.pop_back();
  cand[0].steps[1].top5_logits.pop_back();
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("step 1: top5 has 4 ids, expected 5"));

  cand = ref;
  cand[0].steps[2].id = 201;  // not the top-1 of its own record
  r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is not top5[0]"));

  cand = ref;
  cand[0].steps[2].top5_logits = {1.f, 2.f, 0.f, 0.f, 0.f};
  r = CheckLogprobsClose(ref, cand, Decode);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not sorted"));

  cand = ref;
  cand[0].steps[2].top5_logits.clear();  // a side may record no logits
  EXPECT_TRUE(CheckLogprobsClose(ref, cand, Decode).ok());
}

TEST(GateTest, NullDecodeCallbackPrintsIds) {
  std::vector<Sequence> ref = {Seq("a")};
  absl::StatusOr<GateReport> r = CheckLogprobsClose(ref, ref, nullptr, {5, 2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].agreed_text, "[100 200]");
}

TEST(GateTest, ReportEscapesNewlines) {
  std::vector<Sequence> ref = {Seq("line1\nline2")};
  absl::StatusOr<GateReport> r =
      CheckLogprobsClose(ref, ref, [](const std::vector<uint32_t>&) { return "x\ny"; });
  ASSERT_TRUE(r.ok()) << r.status();
  std::string table = FormatGateReport(*r);
  EXPECT_THAT(table, HasSubstr("\"line1\\nline2\""));
  EXPECT_THAT(table, HasSubstr("\"x\\ny\""));
  // Header, one row, verdict line.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);
}

TEST(CompareExactTest, SameTokens) {
  std::vector<Sequence> parent = {Seq("a"), Seq("b")};
  std::vector<Sequence> child = parent;
  // Top-5 sets may differ; only the chosen ids count.
  child[1].steps[3].top5 = {400, 1, 2, 3, 4};
  absl::StatusOr<ExactReport> r =
      CompareExact(parent, child, Decode, kTokens, "decode_aligned", "decode_bo");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->same);
  EXPECT_THAT(FormatExactReport(*r),
              HasSubstr("decode_bo vs decode_aligned: SAME tokens (2/2 prompts identical)"));
}

TEST(CompareExactTest, NamesFirstDifferingStep) {
  std::vector<Sequence> parent = {Seq("a"), Seq("b")};
  std::vector<Sequence> child = parent;
  child[1].steps[5] = Step(601);  // within top-5: the gate would pass, exact does not
  child[1].steps[9] = Step(5);
  absl::StatusOr<ExactReport> r =
      CompareExact(parent, child, Decode, kTokens, "decode_aligned", "decode_bo");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->same);
  EXPECT_TRUE(r->prompts[0].same);
  const ExactVerdict& v = r->prompts[1];
  EXPECT_FALSE(v.same);
  EXPECT_EQ(v.first_difference, 5);
  EXPECT_EQ(v.parent_id, 600u);
  EXPECT_EQ(v.child_id, 601u);
  EXPECT_EQ(v.agreed_text, "<100,200,300,400,500>");
  std::string table = FormatExactReport(*r);
  EXPECT_THAT(table, HasSubstr("step 5"));
  EXPECT_THAT(table, HasSubstr("600 -> 601"));
  EXPECT_THAT(table, HasSubstr("DIFFERENT tokens (1/2 prompts identical)"));
}

TEST(CompareExactTest, ShortOrMissingSequencesAreErrors) {
  std::vector<Sequence> parent = {Seq("a")};
  std::vector<Sequence> child = parent;
  child[0].steps.resize(3);
  absl::StatusOr<ExactReport> r = CompareExact(parent, child, Decode, kTokens, "p", "c");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("c sequence for prompt 0 \"a\" has 3 steps"));
  r = CompareExact(parent, {}, Decode, kTokens, "p", "c");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("c is missing the sequence for prompt 0"));
}

}  // namespace
}  // namespace dk::verify
