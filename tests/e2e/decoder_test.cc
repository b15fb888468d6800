// End to end on a tiny model: the baseline decode ELF on the CPU backend (with BO
// validation) against an independent scalar reference forward pass.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tests/e2e/reference_llama.h"
#include "graph/baseline.h"

namespace dk {
namespace {

elf::ModelShape Tiny(bool llama3_rope) {
  elf::ModelShape m;
  m.set_name("tiny");
  m.set_n_layers(2);
  m.set_hidden(64);
  m.set_n_heads(4);
  m.set_n_kv_heads(2);
  m.set_head_dim(16);
  m.set_ffn(96);
  m.set_vocab(300);
  m.set_rms_eps(1e-5f);
  m.set_rope_theta(10000);
  m.set_tied_embeddings(true);
  m.set_max_context(16);
  if (llama3_rope) {
    auto* s = m.mutable_rope_scaling();
    s->set_type("llama3");
    s->set_factor(8);
    s->set_low_freq_factor(1);
    s->set_high_freq_factor(4);
    s->set_original_max_position(64);
  }
  return m;
}

// Synthetic weights scaled up so that logits spread out (std 0.02 weights give
// near-uniform logits, where any rounding flips the argmax).
std::shared_ptr<const weights::Weights> Scaled(const elf::ModelShape& m, float scale) {
  weights::Weights w = weights::MakeSyntheticWeights(m, 7).value();
  weights::Weights out;
  out.set_source("synthetic(seed=7) x" + std::to_string(scale));
  out.set_shape(m);
  for (const std::string& name : w.Names()) {
    const weights::Tensor* t = w.Find(name);
    weights::Tensor copy;
    copy.shape = t->shape;
    copy.data = AlignedBuffer<bf16>(t->numel());
    const bool norm = t->shape.size() == 1;
    for (int64_t i = 0; i < t->numel(); ++i) {
      copy.data[i] = norm ? t->data[i] : F32ToBf16(Bf16ToF32(t->data[i]) * scale);
    }
    out.Add(name, std::move(copy));
  }
  return std::make_shared<const weights::Weights>(std::move(out));
}

void CheckAgainstReference(bool llama3_rope) {
  const elf::ModelShape m = Tiny(llama3_rope);
  auto program = graph::BuildBaseline(m);
  ASSERT_TRUE(program.ok()) << program.status();
  auto w = Scaled(m, 25.0f);
  runtime::SessionOptions options;
  options.validate = true;
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", w, options);
  ASSERT_TRUE(session.ok()) << session.status();
  testing::ReferenceLlama ref(m, *w);
  uint32_t token = 17;
  for (int step = 0; step < 12; ++step) {
    auto got = (*session)->decoder().Step(token);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<double> want = ref.Step(token);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 0.5) << "logits should be spread out";
    const float* logits = (*session)->decoder().logits();
    for (int i = 0; i < m.vocab(); ++i) {
      ASSERT_NEAR(logits[i], want[i], 0.03 * scale + 1e-3) << "step " << step << " logit " << i;
    }
    // Our choice is among the reference's best three (exact ties aside).
    std::vector<int> order(m.vocab());
    for (int i = 0; i < m.vocab(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return want[a] > want[b]; });
    EXPECT_TRUE(got->token == static_cast<uint32_t>(order[0]) || got->token == static_cast<uint32_t>(order[1]) ||
                got->token == static_cast<uint32_t>(order[2]))
        << "step " << step;
    ASSERT_EQ(got->top_ids.size(), 5u);
    EXPECT_EQ(got->top_ids[0], got->token);
    token = got->token;
  }
}

TEST(Decoder, BaselineMatchesScalarReference) { CheckAgainstReference(false); }
TEST(Decoder, BaselineMatchesScalarReferenceWithLlama3Rope) { CheckAgainstReference(true); }

TEST(Decoder, KvCacheOverflowIsAClearError) {
  const elf::ModelShape m = Tiny(false);
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
  const elf::ModelShape m = Tiny(false);
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
  const elf::ModelShape m = Tiny(false);
  auto program = graph::BuildBaseline(m);
  auto session = runtime::CpuSession::Open(*program, "tiny.elf", Scaled(m, NAN));
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
  elf::ModelShape huge = Tiny(false);
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
  const elf::ModelShape m = Tiny(false);
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
  const elf::ModelShape m = Tiny(false);
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
  const elf::ModelShape m = Tiny(false);
  auto program = graph::BuildBaseline(m);
  ASSERT_TRUE(program.ok());
  auto w = Scaled(m, 25.0f);
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
  options.stop_token = want[2];
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

  // The callback's error ends the run and is returned; an empty prompt is an error.
  run = runtime::GenerateGreedy(decoder, prompt, options,
                                [](int, const runtime::StepResult&) { return absl::CancelledError("stop"); });
  EXPECT_EQ(run.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(runtime::GenerateGreedy(decoder, {}, options, nullptr).ok());
}

}  // namespace
}  // namespace dk
