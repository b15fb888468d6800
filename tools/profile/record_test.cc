#include "tools/profile/record.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/profile/render.h"

namespace dk::profile {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatsTest, Median) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

TEST(StatsTest, DriftComparesLastQuarterWithFirst) {
  // 8 tokens: first quarter {10, 10}, last quarter {12, 12}, median 11.
  EXPECT_NEAR(DriftPercent({10, 10, 10, 11, 11, 12, 12, 12}), (12.0 - 10.0) / 11.0 * 100, 1e-9);
  EXPECT_EQ(DriftPercent({5}), 0);
  EXPECT_NEAR(DriftPercent({10, 10, 10, 10}), 0, 1e-12);
}

elf::Program TwoLayerProgram() {
  elf::Program p;
  auto add_bo = [&](const std::string& name, int64_t bytes, const std::string& tensor) {
    auto* bo = p.add_bos();
    bo->set_name(name);
    bo->set_size_bytes(bytes);
    bo->set_weight_tensor(tensor);
  };
  add_bo("L0.w", 1000, "model.layers.0.w");
  add_bo("L1.w", 1000, "model.layers.1.w");
  add_bo("head.w", 500, "model.embed_tokens.weight");
  add_bo("x", 8, "");
  auto group = [&](const std::string& name, int layer, const std::string& w) {
    auto* g = p.add_steps()->mutable_group();
    g->set_name(name);
    g->set_layer(layer);
    auto* l = g->add_launches();
    auto* b = l->add_bindings();
    b->set_param("w");
    b->set_bo(w);
    b = l->add_bindings();
    b->set_param("x");
    b->set_bo("x");
  };
  auto host = [&](elf::HostStep::Kind kind, int layer) {
    auto* h = p.add_steps()->mutable_host();
    h->set_kind(kind);
    h->set_layer(layer);
  };
  host(elf::HostStep::EMBEDDING, -1);
  for (int l = 0; l < 2; ++l) {
    group("L" + std::to_string(l) + ".rms_gemv_rope", l, "L" + std::to_string(l) + ".w");
    host(elf::HostStep::ATTENTION, l);
    group("L" + std::to_string(l) + ".o_gemv_ffn", l, "L" + std::to_string(l) + ".w");
  }
  group("lm_head.part0", -1, "head.w");
  group("lm_head.part1", -1, "head.w");
  host(elf::HostStep::TOPK, -1);
  return p;
}

TEST(MapStepsTest, GroupsByKindAndLayer) {
  const StepMap map = MapSteps(TwoLayerProgram());
  EXPECT_EQ(map.device_runs, 6);
  EXPECT_EQ(map.weight_bytes, 2500);  // each weight BO once per token
  ASSERT_EQ(map.components.size(), 6u);
  EXPECT_EQ(map.components[0].key, "embedding");
  EXPECT_TRUE(map.components[0].host);
  EXPECT_FALSE(map.components[0].per_layer);
  EXPECT_EQ(map.components[1].key, "rms_gemv_rope");
  EXPECT_EQ(map.components[1].count, 2);
  EXPECT_TRUE(map.components[1].per_layer);
  EXPECT_EQ(map.components[2].key, "attention");
  EXPECT_TRUE(map.components[2].host);
  EXPECT_EQ(map.components[4].key, "lm_head");
  EXPECT_EQ(map.components[4].count, 2);
  EXPECT_FALSE(map.components[4].per_layer);
  EXPECT_EQ(map.component_of_step.size(), 10u);
}

TEST(MapStepsTest, AccumulatesPerTokenAverages) {
  const StepMap map = MapSteps(TwoLayerProgram());
  BreakdownAccumulator acc(map);
  std::vector<runtime::StepTiming> t(10);
  t[1] = {1000000, 2000000, 3000000, 100, 10};  // L0.rms_gemv_rope: 1 / 2 / 3 ms
  t[4] = {1000000, 2000000, 3000000, 100, 10};  // L1.rms_gemv_rope
  acc.Add(t);
  t[1].run_ns = 4000000;
  acc.Add(t);
  const auto c = acc.Components();
  EXPECT_DOUBLE_EQ(c[1].write_ms, 2.0);
  EXPECT_DOUBLE_EQ(c[1].run_ms, 5.0);  // (2 + 2 + 4 + 2) / 2 tokens
  EXPECT_DOUBLE_EQ(acc.BytesWrittenPerToken(), 200);
}

ProfileRecord Chain(bool fail_middle) {
  ProfileRecord r;
  r.model = "m";
  r.package = "models/m";
  r.bandwidth_gbps = 10;
  const char* names[] = {"decode", "decode_aligned", "decode_bo", "decode_opt"};
  const char* kinds[] = {"decode_elf", "layout_alignment", "buffer_object_reuse", "merge_multi_launch"};
  const double ms[] = {100, 90, 40, 30};
  for (int i = 0; i < 4; ++i) {
    StageRecord s;
    s.name = names[i];
    s.label = std::string("//models/m:") + names[i];
    s.kind = kinds[i];
    s.src = i ? std::string(":") + names[i - 1] : "";
    s.pass = i ? kinds[i] : "baseline";
    s.pass_reason = "did things";
    s.warmup = 1;
    s.token_ms = {500, ms[i], ms[i] + 1, ms[i] - 1};
    s.weight_bytes_per_token = 100000000;  // 10 ms at 10 GB/s
    s.gate_ran = true;
    s.gate_passed = !(fail_middle && i == 2);
    s.gate_report = s.gate_passed ? "verify gate: PASS" : "0  FAIL  \"x\"\nverify gate (k=5, 32 tokens): FAIL (1/2 prompts)";
    r.stages.push_back(s);
  }
  r.stages[1].pass_applied = false;
  return r;
}

constexpr char kBuild[] = R"(decode_elf(
    name = "decode",
    config = "config.textproto",
)

layout_alignment(
    name = "decode_aligned",
    src = ":decode",
)

buffer_object_reuse(
    name = "decode_bo",
    src = ":decode_aligned",
)

merge_multi_launch(
    name = "decode_opt",
    src = ":decode_bo",
)

verify_chain(
    stages = [
        ":decode",
        ":decode_aligned",
        ":decode_bo",
        ":decode_opt",
    ],
)
)";

// A stage that passes the gate but is slower than its parent beyond the noise is
// flagged, not presented like a win; within the noise it stays "applied". One round
// and no paired bandwidth: the tokens' own spread is the noise.
TEST(FinalizeTest, FlagsAStageSlowerThanItsParentBeyondNoise) {
  ProfileRecord r = Chain(false);
  r.stages[3].token_ms = {500, 44, 45, 43};  // decode_opt vs decode_bo's 40 +- 1: x1.1, noise 2/40 (IQR)
  Finalize(r, "");
  EXPECT_EQ(r.stages[3].status, kSlowerThanParent);
  EXPECT_TRUE(r.stages[3].slower_than_parent);
  EXPECT_DOUBLE_EQ(r.stages[3].vs_parent.ratio, 1.1);
  EXPECT_DOUBLE_EQ(r.stages[3].vs_parent.noise, 2.0 / 40);
  EXPECT_THAT(r.stages[3].reason, HasSubstr("at equal bandwidth x1.100 of its parent (noise +-5.0%): slower than its "
                                            "parent beyond the noise"));
  EXPECT_NE(Markdown(r, "cmd").find("## 3. merge_multi_launch: **applied, slower than its parent**"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(ToJson(r))["stages"][3]["slower_than_parent"]["slower"], true);
  EXPECT_EQ(r.final_stage, 3);  // still applied: the gate decides reverts
  EXPECT_EQ(r.best_stage, 2);   // the headline is the fastest passing stage
  EXPECT_THAT(Markdown(r, "cmd"), HasSubstr("Fastest stage that passes the gate: **`:decode_bo`, 40.00 ms/token**"));
  EXPECT_THAT(Markdown(r, "cmd"), HasSubstr("The chain's end, `:decode_opt`, is slower than that: 44.00 ms/token"));
  EXPECT_THAT(FormatTable(r), HasSubstr("chain end: :decode_opt 44.00 ms/token"));

  r.stages[3].token_ms = {500, 41.1, 41.1, 41.1};  // x1.0275: inside the noise (decode_bo's 2/40)
  Finalize(r, "");
  EXPECT_EQ(r.stages[3].status, "applied");
  EXPECT_DOUBLE_EQ(r.stages[3].vs_parent.noise, 0.05);
  // A noisy parent widens the band: 40 +- 5 (IQR 9) hides x1.1.
  r.stages[2].token_ms = {500, 40, 45, 35, 44, 36};
  r.stages[3].token_ms = {500, 44, 45, 43};
  Finalize(r, "");
  EXPECT_EQ(r.stages[3].status, "applied") << r.stages[3].vs_parent.noise;
}

TEST(ModeSplitTest, SplitsTwoModesAndNotOne) {
  EXPECT_NEAR(ModeSplit({33, 34, 33, 57, 56, 33, 57, 33, 34, 57}), std::sqrt(33.0 * 57), 1e-9);
  EXPECT_EQ(ModeSplit({48, 50, 47, 52, 49, 51}), 0);  // one mode
  EXPECT_EQ(ModeSplit({50}), 0);
}

TEST(CompareWithParentTest, MedianOfRoundRatiosAgainstHalfTheirRange) {
  auto rounds = [](std::vector<double> norm) {
    std::vector<RoundStat> out;
    for (size_t k = 0; k < norm.size(); ++k) out.push_back({static_cast<int>(k), 8, norm[k], norm[k], 40, "slow"});
    return out;
  };
  const std::vector<RoundStat> parent = rounds({50, 50, 50, 50});
  ParentComparison c = CompareWithParent(rounds({61, 62.5, 65, 60}), parent, {}, {});
  EXPECT_DOUBLE_EQ(c.ratio, 1.235);
  EXPECT_NEAR(c.noise, 0.05, 1e-12);  // (1.30 - 1.20) / 2
  EXPECT_TRUE(c.slower);
  EXPECT_FALSE(c.faster);
  c = CompareWithParent(rounds({48.5, 52.5, 50.5, 49.5}), parent, {}, {});
  EXPECT_DOUBLE_EQ(c.ratio, 1.0);
  EXPECT_NEAR(c.noise, kMinNoise, 1e-12);  // half the range, 0.04, is inside the floor
  EXPECT_FALSE(c.slower);
  EXPECT_FALSE(c.faster);
  c = CompareWithParent(rounds({49, 49.5, 50, 49}), parent, {}, {});  // tight rounds: the floor
  EXPECT_DOUBLE_EQ(c.noise, kMinNoise);
  EXPECT_FALSE(c.faster);
  // Rounds are matched by index: a round the parent missed is not compared.
  std::vector<RoundStat> gap = rounds({50, 50, 50});
  gap.erase(gap.begin() + 1);
  c = CompareWithParent(rounds({60, 99, 60}), gap, {}, {});
  EXPECT_EQ(c.round_ratios, (std::vector<double>{1.2, 1.2}));
}

// Fixed token times in two bandwidth modes (fast 60 GB/s, slow 30 GB/s; a token is
// its floor, 1 GB at the bandwidth, plus a part no bandwidth moves), rounds alternating
// stage by stage as a host that swings gives them. The verdict follows the time at
// equal bandwidth, both ways.
StageRecord Timed(const std::string& name, const std::string& src, double ms_at_30gbps,
                  const std::vector<double>& gbps_per_round) {
  StageRecord s;
  s.name = name;
  s.label = "//models/m:" + name;
  s.kind = src.empty() ? "decode_elf" : "merge_multi_launch";
  s.src = src;
  s.gate_ran = s.gate_passed = true;
  s.weight_bytes_per_token = 1000000000;  // 1 GB: 33.3 ms at 30 GB/s
  s.warmup = 1;
  s.token_ms = {900};
  s.token_gbps = {0};
  s.token_round = {-1};
  for (size_t round = 0; round < gbps_per_round.size(); ++round) {
    for (int t = 0; t < 8; ++t) {
      // the floor (1 GB at the round's bandwidth) plus the rest, which no bandwidth moves
      const double floor_ms = 1000 / gbps_per_round[round];
      s.token_ms.push_back((ms_at_30gbps - 1000.0 / 30 + floor_ms) * (1 + 0.001 * (t % 3)));
      s.token_gbps.push_back(gbps_per_round[round]);
      s.token_round.push_back(static_cast<int>(round));
    }
  }
  return s;
}

TEST(FinalizeTest, VerdictAtEqualBandwidthNotRawTime) {
  // The merge is as fast as its parent, but three of its four rounds ran in the slow
  // mode and three of the parent's in the fast one: raw, it looks 70% slower.
  ProfileRecord r;
  r.model = "m";
  r.package = "models/m";
  r.rounds = 4;
  r.stages.push_back(Timed("decode", "", 80, {30, 30, 30, 30}));
  r.stages.push_back(Timed("decode_bo", ":decode", 40, {60, 60, 60, 30}));
  r.stages.push_back(Timed("decode_opt", ":decode_bo", 40, {30, 30, 60, 30}));
  Finalize(r, "");
  EXPECT_GT(r.stages[2].delta_parent_pct, 50);  // raw
  EXPECT_NEAR(r.stages[2].vs_parent.ratio, 1.0, 1e-3);
  EXPECT_EQ(r.stages[2].status, "applied") << r.stages[2].reason;
  EXPECT_EQ(r.stages[2].rounds[0].mode, "slow");
  EXPECT_EQ(r.stages[1].rounds[0].mode, "fast");
  EXPECT_NEAR(r.stages[2].x_floor, 40 / (1000.0 / 30), 0.01);  // per token against its own pair
  EXPECT_THAT(FormatTable(r), HasSubstr("23.36 ms, 60.0 GB/s fast"));
  EXPECT_NEAR(r.mode_split_gbps, std::sqrt(30.0 * 60), 1e-9);
  // The baseline, far above its floor, is barely moved: 80 ms at 30 GB/s.
  EXPECT_NEAR(r.stages[0].norm_median_ms, 80.08, 0.01);

  // The other way: the merge is 25% slower at equal bandwidth, but ran in the fast
  // mode while its parent ran in the slow one: raw, it looks 17% faster.
  r.stages[2] = Timed("decode_opt", ":decode_bo", 50, {60, 60, 60, 60});
  r.stages[1] = Timed("decode_bo", ":decode", 40, {30, 30, 30, 30});
  Finalize(r, "");
  EXPECT_LT(r.stages[2].delta_parent_pct, -15);  // raw
  EXPECT_NEAR(r.stages[2].vs_parent.ratio, 1.25, 1e-3);
  EXPECT_EQ(r.stages[2].status, kSlowerThanParent);
  EXPECT_EQ(r.best_stage, 1);  // the fastest at equal bandwidth, not the fastest raw
  EXPECT_EQ(r.final_stage, 2);
  EXPECT_NEAR(r.speedup, 2.0, 1e-3);
  EXPECT_NEAR(r.final_speedup, 1.6, 1e-3);
  EXPECT_TRUE(r.final_faster);
}

TEST(FinalizeTest, StatusesDeltasAndFinal) {
  ProfileRecord r = Chain(false);
  Finalize(r, "");
  EXPECT_EQ(r.stages[0].status, "baseline");
  EXPECT_EQ(r.stages[1].status, "skipped");
  EXPECT_EQ(r.stages[2].status, "applied");
  EXPECT_EQ(r.stages[3].median_ms, 30);  // warm-up token excluded
  EXPECT_EQ(r.stages[3].max_ms, 31);
  EXPECT_DOUBLE_EQ(r.stages[2].delta_parent_ms, -50);
  EXPECT_NEAR(r.stages[2].delta_parent_pct, -50.0 / 90 * 100, 1e-9);
  EXPECT_DOUBLE_EQ(r.stages[3].delta_baseline_pct, -70);
  EXPECT_DOUBLE_EQ(r.stages[3].floor_ms, 10);
  EXPECT_DOUBLE_EQ(r.stages[3].x_floor, 3);
  EXPECT_EQ(r.final_stage, 3);
  EXPECT_NEAR(r.speedup, 100.0 / 30, 1e-9);
  EXPECT_TRUE(r.final_faster);
  EXPECT_TRUE(r.reverted.empty());
  EXPECT_THAT(r.stages[2].reason, HasSubstr("did things; measured -50.00 ms (-55.6%) per token vs :decode_aligned"));
}

TEST(FinalizeTest, RevertedMiddleStage) {
  ProfileRecord r = Chain(true);
  Finalize(r, kBuild);
  EXPECT_EQ(r.stages[2].status, "reverted");
  EXPECT_EQ(r.reverted, std::vector<int>{2});
  EXPECT_EQ(r.final_stage, 3);
  EXPECT_THAT(r.stages[2].reason, HasSubstr("verify gate failed (0  FAIL  \"x\")"));
  const std::string& edit = r.stages[2].build_edit;
  EXPECT_THAT(edit, HasSubstr("in models/m/BUILD: delete buffer_object_reuse(name = \"decode_bo\", "
                              "src = \":decode_aligned\", ...) and point the next stage's src (:decode_opt) "
                              "at \":decode_aligned\""));
  EXPECT_THAT(edit, HasSubstr("@@ -11,5 +10,0 @@\n-buffer_object_reuse(\n-    name = \"decode_bo\",\n"
                              "-    src = \":decode_aligned\",\n-)\n-\n"));
  EXPECT_THAT(edit, HasSubstr("-    src = \":decode_bo\",\n+    src = \":decode_aligned\",\n"));
  EXPECT_THAT(edit, HasSubstr("-        \":decode_bo\",\n"));
  EXPECT_THAT(edit, Not(HasSubstr("+        \":decode_bo\"")));
}

// Tokens that differ from the parent revert a stage, unless the stage changes the
// arithmetic (quantize_weights): then the gate alone decides, as in verify_chain.
TEST(FinalizeTest, ChangesNumericsStageIsGatedOnTheGoldensOnly) {
  ProfileRecord r = Chain(false);
  r.stages[3].same_as_parent = false;
  Finalize(r, "");
  EXPECT_EQ(r.stages[3].status, "reverted");
  EXPECT_THAT(r.stages[3].reason, HasSubstr("tokens differ from the parent stage"));

  r.stages[3].changes_numerics = true;
  Finalize(r, "");
  EXPECT_EQ(r.stages[3].status, "applied");
  EXPECT_TRUE(r.reverted.empty());
  EXPECT_EQ(r.final_stage, 3);

  r.stages[3].gate_passed = false;  // the gate still decides
  Finalize(r, "");
  EXPECT_EQ(r.stages[3].status, "reverted");
  EXPECT_EQ(r.final_stage, 2);
}

// One-line rules of the same kind, each with a trailing comment (the models' chains):
// the edit deletes exactly the failing stage's line and repoints what named it.
TEST(FinalizeTest, RevertedOneLineRuleAmongRulesOfItsKind) {
  ProfileRecord r = Chain(false);
  r.stages[3].kind = "quantize_weights";
  r.stages[3].name = "decode_q4";
  r.stages[3].src = ":decode_bo";
  r.stages[3].gate_passed = false;
  r.stages[2].kind = "quantize_weights";
  const std::string build =
      "quantize_weights(name = \"decode_bo\", src = \":decode_aligned\")  # comment (with parens) here\n"
      "quantize_weights(name = \"decode_q4\", src = \":decode_bo\", scheme = \"q4_0\")  # Q4_0 (x) here\n"
      "\n"
      "decode_generate(\n"
      "    name = \"generate\",\n"
      "    elf = \":decode_opt\",\n"
      ")\n"
      "verify_chain(\n"
      "    final = \":decode_q4\",\n"
      ")\n";
  Finalize(r, build);
  ASSERT_EQ(r.stages[3].status, "reverted");
  const std::string& edit = r.stages[3].build_edit;
  EXPECT_THAT(edit, HasSubstr("@@ -2,2 +1,0 @@\n-quantize_weights(name = \"decode_q4\", src = \":decode_bo\", "
                              "scheme = \"q4_0\")  # Q4_0 (x) here\n-\n"));
  EXPECT_THAT(edit, Not(HasSubstr("-quantize_weights(name = \"decode_bo\"")));
  EXPECT_THAT(edit, Not(HasSubstr("-decode_generate(")));
  EXPECT_THAT(edit, HasSubstr("-    final = \":decode_q4\",\n+    final = \":decode_bo\",\n"));
}

TEST(FinalizeTest, RevertedLastStageFallsBackToParent) {
  ProfileRecord r = Chain(false);
  r.stages[3].gate_passed = false;
  Finalize(r, "");
  EXPECT_EQ(r.final_stage, 2);
  EXPECT_NEAR(r.speedup, 100.0 / 40, 1e-9);
  EXPECT_THAT(r.stages[3].build_edit, HasSubstr("point what named \":decode_opt\" (the `final` of verify_chain and decode_profile"));
}

TEST(FinalizeTest, SlowerFinalIsNotFaster) {
  ProfileRecord r = Chain(false);
  r.stages[3].token_ms = {1, 200, 200, 200};
  Finalize(r, "");
  EXPECT_FALSE(r.final_faster);
}

TEST(RenderTest, JsonTableMarkdownHtml) {
  ProfileRecord r = Chain(true);
  Finalize(r, kBuild);
  const auto j = nlohmann::json::parse(ToJson(r));
  EXPECT_EQ(j["stages"][2]["status"], "reverted");
  EXPECT_EQ(j["final"]["stage"], "decode_opt");
  EXPECT_EQ(j["reverted"][0], "decode_bo");
  const std::string table = FormatTable(r);
  EXPECT_THAT(table, HasSubstr("REVERTED :decode_bo"));
  EXPECT_THAT(table, HasSubstr("30.00 (29.00-31.00)"));
  const std::string md = Markdown(r, "./bazelw run //models/m:profile");
  EXPECT_THAT(md, HasSubstr("## 2. buffer_object_reuse: **reverted**"));
  EXPECT_THAT(md, HasSubstr("## 1. layout_alignment: skipped"));
  EXPECT_THAT(md, Not(HasSubstr("- Speculative:")));
  // A speculative stage's checks and acceptance, in the markdown and the JSON.
  r.stages[3].spec_checks = 10;
  r.stages[3].spec_drafted = 30;
  r.stages[3].spec_accepted = 12;
  EXPECT_THAT(Markdown(r, "cmd"),
              HasSubstr("- Speculative: 10 draft checks, 12 of 30 drafts accepted (40%), 2.20 tokens per check"));
  EXPECT_EQ(nlohmann::json::parse(ToJson(r))["stages"][3]["speculative"]["accepted"], 12);
  const std::string html = Html(r, "./bazelw run //models/m:profile");
  EXPECT_THAT(html, HasSubstr("<svg id=\"waterfall\""));
  EXPECT_THAT(html, HasSubstr("class=\"bar reverted\""));
}

}  // namespace
}  // namespace dk::profile

namespace dk::profile {
namespace {

TEST(RenderTest, KldColumnOnlyWhenMeasured) {
  ProfileRecord r = Chain(true);
  Finalize(r, kBuild);
  EXPECT_THAT(FormatTable(r), Not(HasSubstr("KLD vs")));
  r.kld_text = "text.txt";
  r.kld_reference = "decode";
  r.kld_text_tokens = 11676;
  r.kld_window = 512;
  r.kld_windows = 22;
  r.kld_score_from = 256;
  r.kld_positions = 5610;
  r.kld_reference_ppl = 16.5961;
  StageRecord& s = r.stages[3];
  s.kld_ran = true;
  s.kld_mean = 0.005063;
  s.kld_p99 = 0.034848;
  s.kld_top1 = 0.959;
  s.kld_ppl = 16.5763;
  s.kld_ppl_ratio = 0.9988;
  r.stages[1].kld_error = "cannot open";
  const std::string table = FormatTable(r);
  EXPECT_THAT(table, HasSubstr("KLD vs :decode"));
  EXPECT_THAT(table, HasSubstr("0.00506 (p99 0.0348), top-1 95.9%, PPL x0.9988"));
  EXPECT_THAT(table, HasSubstr("ERROR"));
  const std::string md = Markdown(r, "cmd");
  EXPECT_THAT(md, HasSubstr("over `text.txt` (11676 tokens), 22 windows of 512 tokens, positions 256..510"));
  EXPECT_THAT(md, HasSubstr("- KLD vs `:decode`: 0.00506 (p99 0.0348), top-1 95.9%, PPL x0.9988"));
  const auto j = nlohmann::json::parse(ToJson(r));
  EXPECT_EQ(j["kld"]["positions"], 5610);
  EXPECT_EQ(j["stages"][3]["kld"]["ran"], true);
  EXPECT_DOUBLE_EQ(j["stages"][3]["kld"]["mean"], 0.005063);
  EXPECT_EQ(j["stages"][1]["kld"]["error"], "cannot open");
  EXPECT_THAT(Html(r, "cmd"), HasSubstr("0.00506 (p99 0.0348)"));
}

}  // namespace
}  // namespace dk::profile
