// The scalar reference decoder against the CPU runtime's baseline decode, on a tiny
// model of each architecture the five models have (Llama with and without Llama 3
// RoPE scaling, Qwen2's q/k/v biases, Qwen3's per-head q/k norms with an untied LM
// head, Gemma 3's features together). Each feature is then switched off in the
// reference alone: the comparison must fail, so the reference covers it, and covers
// it in a way the logits show.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "elf/elf.h"
#include "graph/baseline.h"
#include "gtest/gtest.h"
#include "optimizations/testing/tiny.h"
#include "runtime/cpu/session.h"
#include "verify/reference/reference_decoder.h"
#include "tests/e2e/tiny_weights.h"

namespace dk {
namespace {

elf::ModelShape Llama() { return opt::testing::TinyShape(2); }

elf::ModelShape Llama3Rope() {
  elf::ModelShape m = Llama();
  auto* s = m.mutable_rope_scaling();
  s->set_type("llama3");
  s->set_factor(8);
  s->set_low_freq_factor(1);
  s->set_high_freq_factor(4);
  s->set_original_max_position(64);
  return m;
}

elf::ModelShape Qwen2() {
  elf::ModelShape m = Llama();
  m.set_family(elf::ModelShape::QWEN2);
  m.set_attention_bias(true);
  return m;
}

elf::ModelShape Qwen3() {
  elf::ModelShape m = Llama();
  m.set_family(elf::ModelShape::QWEN3);
  m.set_qk_norm(true);
  m.set_tied_embeddings(false);
  return m;
}

// Gemma 3: layer 0 sliding (window 4 of the 12 positions run), layer 1 full.
elf::ModelShape Gemma3() {
  elf::ModelShape m = Llama();
  m.set_family(elf::ModelShape::GEMMA3);
  m.set_qk_norm(true);
  m.set_ffn_activation(elf::ModelShape::GELU_TANH);
  m.set_norm_plus_one(true);
  m.set_sandwich_norms(true);
  m.set_embedding_scale(true);
  m.set_query_pre_attn_scalar(256);
  m.add_layer_types(elf::ModelShape::SLIDING_ATTENTION);
  m.add_layer_types(elf::ModelShape::FULL_ATTENTION);
  m.set_sliding_window(4);
  m.set_rope_theta(1000000);
  m.set_rope_local_theta(10);
  return m;
}

// The runtime's logits for 12 steps of varied tokens (a greedy run of a tiny model
// soon repeats one token, and attention over equal values hides what it weighs).
struct Run {
  std::vector<uint32_t> tokens, chosen;
  std::vector<std::vector<float>> logits;
};

Run RunCpu(const elf::ModelShape& m, std::shared_ptr<const weights::Weights> w) {
  Run run;
  auto program = graph::BuildBaseline(m);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return run;
  runtime::SessionOptions options;
  options.validate = true;
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w, options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return run;
  for (int step = 0; step < 12; ++step) {
    const uint32_t token = static_cast<uint32_t>((17 + 101 * step) % m.vocab());
    auto got = (*session)->decoder().Step(token);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return run;
    const float* logits = (*session)->decoder().logits();
    EXPECT_EQ(got->top_ids.size(), 5u);
    if (!got->top_ids.empty()) EXPECT_EQ(got->top_ids[0], got->token);
    run.tokens.push_back(token);
    run.chosen.push_back(got->token);
    run.logits.emplace_back(logits, logits + m.vocab());
  }
  return run;
}

// The largest |runtime - reference| over the run, as a multiple of the tolerance
// (0.2% of the step's largest reference logit: the two round at the same places, and
// the smallest feature, GELU-tanh against SiLU, shows as ~4x that): below 1 is a match.
// With `check_choice`, the runtime's choice must be among the reference's best three
// (exact ties aside).
double WorstExcess(const Run& run, const elf::ModelShape& ref_shape, const weights::Weights& w,
                   bool check_choice = false) {
  verify::ReferenceDecoder ref(ref_shape, w);
  double worst = 0;
  for (size_t step = 0; step < run.tokens.size(); ++step) {
    const std::vector<double> want = ref.Step(run.tokens[step]);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    EXPECT_GT(scale, 0.5) << "logits should be spread out";
    for (size_t i = 0; i < want.size(); ++i) {
      const double excess = std::fabs(run.logits[step][i] - want[i]) / (0.002 * scale + 1e-4);
      worst = std::max(worst, std::isnan(excess) ? INFINITY : excess);
    }
    if (!check_choice) continue;
    int better = 0;  // reference logits above the chosen token's
    for (double v : want) better += v > want[run.chosen[step]];
    EXPECT_LT(better, 3) << "step " << step << ": the runtime chose " << run.chosen[step];
  }
  return worst;
}

struct Ablation {
  const char* feature;
  std::function<void(elf::ModelShape&)> drop;
};

void Check(const elf::ModelShape& m, const std::vector<Ablation>& ablations) {
  ASSERT_TRUE(graph::ValidateModelShape(m).ok()) << graph::ValidateModelShape(m);
  const auto w = testing::ScaledWeights(m, 25.0f, /*spread_norms=*/true);
  const Run run = RunCpu(m, w);
  ASSERT_EQ(run.tokens.size(), 12u);
  const double full = WorstExcess(run, m, *w, /*check_choice=*/true);
  std::printf("%s: worst difference %.4f of the tolerance\n",
              elf::FamilyName(m.family()).c_str(), full);
  EXPECT_LT(full, 1.0) << "the reference and the runtime differ";
  for (const Ablation& a : ablations) {
    elf::ModelShape without = m;
    a.drop(without);
    const double excess = WorstExcess(run, without, *w);
    std::printf("  without %s: %.3f\n", a.feature, excess);
    EXPECT_GT(excess, 1.0) << "the reference without " << a.feature << " still matches the runtime";
  }
}

TEST(ReferenceDecoder, Llama) { Check(Llama(), {}); }

TEST(ReferenceDecoder, Llama3RopeScaling) {
  Check(Llama3Rope(), {{"llama3 rope scaling", [](auto& m) { m.clear_rope_scaling(); }}});
}

TEST(ReferenceDecoder, Qwen2AttentionBias) {
  Check(Qwen2(), {{"q/k/v biases", [](auto& m) { m.set_attention_bias(false); }}});
}

TEST(ReferenceDecoder, Qwen3QkNormAndUntiedHead) {
  Check(Qwen3(), {{"q/k norms", [](auto& m) { m.set_qk_norm(false); }},
                  {"the untied lm_head", [](auto& m) { m.set_tied_embeddings(true); }}});
}

TEST(ReferenceDecoder, Gemma3) {
  Check(Gemma3(),
        {{"q/k norms", [](auto& m) { m.set_qk_norm(false); }},
         {"GELU-tanh", [](auto& m) { m.set_ffn_activation(elf::ModelShape::SILU); }},
         {"(1 + w) norms", [](auto& m) { m.set_norm_plus_one(false); }},
         {"sandwich norms", [](auto& m) { m.set_sandwich_norms(false); }},
         {"the embedding scale", [](auto& m) { m.set_embedding_scale(false); }},
         {"query_pre_attn_scalar", [](auto& m) { m.set_query_pre_attn_scalar(0); }},
         {"the sliding window", [](auto& m) { m.set_sliding_window(1000); }},
         {"rope_local_theta", [](auto& m) { m.set_rope_local_theta(m.rope_theta()); }}});
}

}  // namespace
}  // namespace dk
