// Runs `bazel run //tests/profile:profile` (the tiny model's chain, the last stage
// forced to fail the gate) as the user would, and checks the record it writes.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ProfileE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The working directory is the runfiles tree, as under bazel run.
    dir_ = new std::string(absl::StrCat(std::getenv("TEST_TMPDIR"), "/profile_out"));
    const std::string cmd = absl::StrCat(
        "tests/profile/profile.sh --out_dir=", *dir_, " --json_out=", *dir_,
        "/record.json --build_file=tests/profile/BUILD --bandwidth_mib=64 --nopng > ", *dir_,
        ".stdout 2> ", *dir_, ".stderr");
    status_ = std::system(cmd.c_str());
  }
  static std::string* dir_;
  static int status_;
};
std::string* ProfileE2eTest::dir_ = nullptr;
int ProfileE2eTest::status_ = 0;

TEST_F(ProfileE2eTest, ExitsWithRevertedStatus) {
  ASSERT_TRUE(WIFEXITED(status_)) << Read(*dir_ + ".stderr");
  EXPECT_EQ(WEXITSTATUS(status_), 3) << "3 = a stage was reverted\n" << Read(*dir_ + ".stderr");
}

TEST_F(ProfileE2eTest, JsonRecord) {
  const nlohmann::json j = nlohmann::json::parse(Read(*dir_ + "/record.json"));
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["package"], "tests/profile");
  EXPECT_EQ(j["prompt"], "What is the capital of France?");
  EXPECT_EQ(j["new_tokens"], 16);
  EXPECT_EQ(j["warmup"], 2);
  EXPECT_EQ(j["rounds"], 4);  // the default
  EXPECT_GT(j["machine"]["read_bandwidth_gbps"].get<double>(), 0);
  EXPECT_EQ(j["gate"]["prompts"], 2);
  // The launcher passes the target's files as "$PWD"/...; the record shows them as
  // before, relative to the runfiles tree.
  EXPECT_EQ(j["gate"]["goldens"], "tests/profile/goldens.json");
  // Which reference made the goldens: the reference decoder, not HF (:goldens).
  EXPECT_THAT(j["gate"]["reference"].get<std::string>(), HasSubstr("decodekit reference decoder"));
  EXPECT_EQ(j["weights"]["source"], "synthetic(seed=1)");
  ASSERT_EQ(j["plans"].size(), 2u);
  EXPECT_EQ(j["plans"][0]["name"], "decode_opt");
  EXPECT_EQ(j["plans"][0]["target"], "cpu");
  EXPECT_EQ(j["plans"][0]["runs_by_layer"]["L1"], 2);
  EXPECT_EQ(j["plans"][0]["runs_by_layer"]["model_wide"], 1);
  EXPECT_EQ(j["plans"][1]["name"], "npu2_opt");
  EXPECT_EQ(j["plans"][1]["target"], "npu2");
  EXPECT_THAT(j["plans"][1]["merge_reason"].get<std::string>(), HasSubstr("applied: "));
  ASSERT_EQ(j["stages"].size(), 5u);
  const char* names[] = {"decode", "decode_aligned", "decode_bo", "decode_opt", "decode_bad"};
  const char* statuses[] = {"baseline", "applied", "applied", "applied", "reverted"};
  const char* rules[] = {"decode_elf", "layout_alignment", "buffer_object_reuse", "merge_multi_launch",
                         "corrupt_lm_head"};
  for (int i = 0; i < 5; ++i) {
    const auto& s = j["stages"][i];
    SCOPED_TRACE(names[i]);
    EXPECT_EQ(s["name"], names[i]);
    if (std::string(statuses[i]) == "applied") {
      // Timing decides whether an applied stage is also "slower than its parent"
      // (tests run beside others on 2 cores); that it is applied does not depend on it.
      EXPECT_THAT(s["status"].get<std::string>(), ::testing::AnyOf("applied", "applied, slower than its parent"));
    } else {
      EXPECT_EQ(s["status"], statuses[i]);
    }
    EXPECT_EQ(s["rule"], rules[i]);
    EXPECT_EQ(s["src"], i == 0 ? "" : absl::StrCat(":", names[i - 1]));
    EXPECT_EQ(s["token_ms"].size(), 18u);
    EXPECT_EQ(s["warmup_tokens"], 2);
    // Every measured token is paired with the bandwidth read around it, in its round.
    ASSERT_EQ(s["token_gbps"].size(), 18u);
    ASSERT_EQ(s["token_round"].size(), 18u);
    for (int k = 0; k < 18; ++k) {
      if (k < 2) {
        EXPECT_EQ(s["token_round"][k], -1);
        continue;
      }
      EXPECT_GT(s["token_gbps"][k].get<double>(), 0) << k;
      EXPECT_EQ(s["token_round"][k], (k - 2) / 4) << k;  // 16 tokens in 4 rounds of 4
    }
    ASSERT_EQ(s["rounds"].size(), 4u);
    EXPECT_GT(s["ms_per_token"]["normalized_median"].get<double>(), 0);
    const auto& ms = s["ms_per_token"];
    EXPECT_GT(ms["median"].get<double>(), 0);
    EXPECT_LE(ms["min"].get<double>(), ms["median"].get<double>());
    EXPECT_GE(ms["max"].get<double>(), ms["median"].get<double>());
    EXPECT_TRUE(ms.contains("drift_pct"));
    EXPECT_GT(s["device_runs_per_token"].get<int>(), 0);
    EXPECT_GT(s["weight_bytes_read_per_token"].get<double>(), 0);
    EXPECT_GT(s["x_floor"].get<double>(), 0);
    EXPECT_FALSE(s["components"].empty());
    EXPECT_TRUE(s["gate"]["ran"].get<bool>());
    EXPECT_EQ(s["gate"]["passed"].get<bool>(), i < 4);
    EXPECT_FALSE(s["reason"].get<std::string>().empty());
    // Per-layer groups and host steps, and the LM head, are all there.
    bool attention = false, lm_head = false;
    for (const auto& c : s["components"]) {
      attention |= c["key"] == "attention" && c["host"].get<bool>() && c["per_layer"].get<bool>() &&
                   c["count"] == 2;
      lm_head |= c["key"] == "lm_head" && !c["host"].get<bool>() && !c["per_layer"].get<bool>();
    }
    EXPECT_TRUE(attention);
    EXPECT_TRUE(lm_head);
  }
  // Baseline: every launch its own run, weights rewritten per token; merged: 5 runs.
  EXPECT_GT(j["stages"][0]["device_runs_per_token"].get<int>(), 20);
  EXPECT_EQ(j["stages"][3]["device_runs_per_token"], 5);
  EXPECT_GT(j["stages"][0]["bo_bytes_written_per_token"].get<double>(),
            100 * j["stages"][2]["bo_bytes_written_per_token"].get<double>());
  EXPECT_EQ(j["stages"][1]["parent"], "decode");
  EXPECT_DOUBLE_EQ(j["stages"][1]["delta_vs_parent"]["ms"].get<double>(),
                   j["stages"][1]["ms_per_token"]["median"].get<double>() -
                       j["stages"][0]["ms_per_token"]["median"].get<double>());
  // The forced failure.
  const auto& bad = j["stages"][4];
  EXPECT_THAT(bad["gate"]["report"].get<std::string>(), HasSubstr("FAIL"));
  EXPECT_THAT(bad["reason"].get<std::string>(), HasSubstr("verify gate failed"));
  const std::string edit = bad["build_edit"];
  EXPECT_THAT(edit, HasSubstr("in tests/profile/BUILD: delete corrupt_lm_head(name = \"decode_bad\""));
  EXPECT_THAT(edit, HasSubstr("-corrupt_lm_head(\n-    name = \"decode_bad\",\n"));
  EXPECT_THAT(edit, HasSubstr("-    src = \":decode_opt\",\n-)\n"));
  // decode_profile names only the final stage: the edit points it at the parent.
  EXPECT_THAT(edit, HasSubstr("-    final = \":decode_bad\",\n+    final = \":decode_opt\",\n"));
  EXPECT_EQ(j["reverted"], nlohmann::json::array({"decode_bad"}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["stages"][i]["build_edit"], "");
  // Final figures from the last good stage.
  EXPECT_EQ(j["final"]["stage"], "decode_opt");
  EXPECT_DOUBLE_EQ(j["final"]["ms_per_token"].get<double>(),
                   j["stages"][3]["ms_per_token"]["median"].get<double>());
  EXPECT_NEAR(j["final"]["speedup"].get<double>(),
              j["stages"][0]["ms_per_token"]["normalized_median"].get<double>() /
                  j["final"]["normalized_ms_per_token"].get<double>(),
              1e-9);
  // The headline: the passing stage with the lowest time at equal bandwidth.
  double best = 1e300;
  std::string best_name;
  for (int i = 0; i < 4; ++i) {
    const double n = j["stages"][i]["ms_per_token"]["normalized_median"].get<double>();
    if (n < best) best = n, best_name = j["stages"][i]["name"];
  }
  EXPECT_EQ(j["best"]["stage"], best_name);
  EXPECT_GT(j["machine"]["reference_gbps"].get<double>(), 0);
}

// util/exit_codes.h: a bad flag is a usage error (2), found before anything is loaded.
TEST_F(ProfileE2eTest, BadFlagIsUsageError) {
  const int status = std::system("tests/profile/profile.sh --new_tokens=0 > /dev/null 2>&1");
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const int rounds = std::system("tests/profile/profile.sh --rounds=0 > /dev/null 2>&1");
  ASSERT_TRUE(WIFEXITED(rounds));
  EXPECT_EQ(WEXITSTATUS(rounds), 2);
}

// A flag given after the launcher's own (--weights=...) overrides it: Abseil keeps
// the last occurrence, so a user's --weights replaces the target's.
TEST_F(ProfileE2eTest, UserFlagOverridesLauncher) {
  const std::string err = absl::StrCat(std::getenv("TEST_TMPDIR"), "/override.stderr");
  const int status = std::system(absl::StrCat("tests/profile/profile.sh --weights=synthetic:7 --gate_prompts=0 "
                                              "--new_tokens=1 --warmup=0 --bandwidth_mib=8 --nopng "
                                              "--out_dir=", std::getenv("TEST_TMPDIR"), "/override > /dev/null 2> ",
                                              err)
                                     .c_str());
  ASSERT_TRUE(WIFEXITED(status)) << Read(err);
  EXPECT_THAT(Read(err), HasSubstr("weights synthetic(seed=7)"));
}

TEST_F(ProfileE2eTest, TablePrintedWithEdit) {
  const std::string out = Read(*dir_ + ".stdout");
  EXPECT_THAT(out, HasSubstr("ms/token median (min-max)"));
  EXPECT_THAT(out, HasSubstr("x floor"));
  EXPECT_THAT(out, HasSubstr(":decode_bad"));
  EXPECT_THAT(out, HasSubstr("REVERTED :decode_bad"));
  EXPECT_THAT(out, HasSubstr("-corrupt_lm_head("));
  EXPECT_THAT(out, HasSubstr("best: :"));
  EXPECT_THAT(out, HasSubstr("chain end strictly faster than baseline: "));
  // Each round's bandwidth and the mode it names, per stage.
  EXPECT_THAT(out, HasSubstr("rounds (median ms/token, read bandwidth paired with the tokens, mode"));
  EXPECT_THAT(out, ::testing::ContainsRegex(":decode_bad +[0-9.]+ ms, [0-9.]+ GB/s (fast|slow|-)"));
  const std::string err = Read(*dir_ + ".stderr");
  EXPECT_THAT(err, HasSubstr("loading weights"));
  EXPECT_THAT(err, HasSubstr("stage 5/5 :decode_bad"));
  EXPECT_THAT(err, HasSubstr("reference decodekit reference decoder"));
  // 4 rounds of 2 warm-up + 4 measured tokens, interleaved: every stage's first
  // round before any stage's second.
  EXPECT_THAT(err, HasSubstr("token 6/6"));
  const size_t last_first = err.find("stage 5/5 :decode_bad (corrupt_lm_head), round 1/4");
  const size_t first_second = err.find("stage 1/5 :decode (decode_elf), round 2/4");
  ASSERT_NE(last_first, std::string::npos) << err;
  ASSERT_NE(first_second, std::string::npos) << err;
  EXPECT_LT(last_first, first_second);
  EXPECT_NE(err.find("stage 5/5 :decode_bad (corrupt_lm_head), round 4/4"), std::string::npos);
}

TEST_F(ProfileE2eTest, Markdown) {
  const std::string md = Read(*dir_ + "/phase5_decode.md");
  EXPECT_THAT(md, HasSubstr("# Phase 5: decode optimization record, tiny"));
  EXPECT_THAT(md, HasSubstr("Generated by `./bazelw run //tests/profile:profile`"));
  EXPECT_THAT(md, HasSubstr("## Baseline: `:decode`"));
  EXPECT_THAT(md, HasSubstr("2 warm-up and 16 measured greedy decode tokens per stage, measured in 4 rounds "
                            "interleaved across the stages"));
  // "applied", or (timing-dependent) "**applied, slower than its parent**".
  EXPECT_THAT(md, ::testing::ContainsRegex("## 1\\. layout_alignment: \\**applied"));
  EXPECT_THAT(md, ::testing::ContainsRegex("## 2\\. buffer_object_reuse: \\**applied"));
  EXPECT_THAT(md, ::testing::ContainsRegex("## 3\\. merge_multi_launch: \\**applied"));
  EXPECT_THAT(md, HasSubstr("## 4. corrupt_lm_head: **reverted**"));
  EXPECT_THAT(md, HasSubstr("```diff\nin tests/profile/BUILD: delete corrupt_lm_head"));
  EXPECT_THAT(md, HasSubstr("## Final\n\nFastest stage that passes the gate: **`:"));
  EXPECT_THAT(md, HasSubstr("## Rounds\n\n"));
  EXPECT_THAT(md, ::testing::ContainsRegex("\\| :decode_opt \\| [0-9.]+ ms, [0-9.]+ GB/s (fast|slow|-) \\|"));
  EXPECT_THAT(md, HasSubstr("Reverted (excluded from the final figures): `:decode_bad`"));
  EXPECT_THAT(md, HasSubstr("group: rms_gemv_rope"));
  EXPECT_THAT(md, HasSubstr("host: attention"));
  // The plans: decode_opt (cpu) and npu2_opt, their device runs and merge reasons.
  EXPECT_THAT(md, HasSubstr("## Device plans by target"));
  EXPECT_THAT(md, HasSubstr("| `:decode_opt` | cpu | 2 per layer (all 2 layers) + 1 model-wide = 5 per token | applied: "));
  EXPECT_THAT(md, HasSubstr("| `:npu2_opt` | npu2 | "));
}

// The phase-4 record: every stage's prompt processing at the lengths that fit the
// tiny model's context of 128 (512 and 2048 are left out), beside its gate.
TEST_F(ProfileE2eTest, Phase4PrefillRecord) {
  const std::string md = Read(*dir_ + "/phase4_prefill.md");
  EXPECT_THAT(md, HasSubstr("# Phase 4: prompt processing, tiny"));
  EXPECT_THAT(md, HasSubstr("| stage | rule | gate | pp128 tokens/s | TTFT 128 (ms) | x decode (pp128) |"));
  EXPECT_THAT(md, Not(HasSubstr("pp512")));
  EXPECT_THAT(md, ::testing::ContainsRegex("\\| :decode \\| decode_elf \\| PASS[^|]* \\| [0-9.]+ \\| [0-9]+ \\| [0-9.]+x \\|"));
  EXPECT_THAT(md, ::testing::ContainsRegex("\\| :decode_opt \\| merge_multi_launch \\| PASS[^|]* \\| [0-9.]+ \\|"));
  EXPECT_THAT(md, ::testing::ContainsRegex("\\| :decode_bad \\| corrupt_lm_head \\| FAIL"));
}

TEST_F(ProfileE2eTest, HtmlIsSelfContained) {
  const std::string html = Read(*dir_ + "/phase5_decode.html");
  for (const char* id : {"<svg id=\"waterfall\"", "<svg id=\"breakdown\"", "<svg id=\"trend\""}) {
    EXPECT_THAT(html, HasSubstr(id));
  }
  EXPECT_FALSE(absl::StrContains(html, "<script"));
  EXPECT_FALSE(absl::StrContains(html, "http://www.w3.org/1999/xlink\" href"));
  EXPECT_FALSE(absl::StrContains(html, "https://"));
  EXPECT_FALSE(absl::StrContains(html, "<link"));
}

}  // namespace
