// Two CPU sessions of two different models (a small Llama and a small Gemma 3, built
// in process by graph::BuildBaseline), each with its own thread pool, on two threads
// at once from the weights' load on: each must give exactly the tokens and logits it
// gives alone. The runtime's share of "two Engines at once" (tests/api:two_engines_test
// runs the trained models through the public API), with no pass chain or decode ELF
// rule in its closure. .ci/run's step 5a runs both under ThreadSanitizer
// (--config=tsan), which reports any access the two make to the same memory without
// ordering.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "elf/program.pb.h"
#include "graph/baseline.h"
#include "gtest/gtest.h"
#include "tests/e2e/run_together.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "util/thread_pool.h"

namespace dk {
namespace {

// Big enough that every GEMV and the attention split over a pool of 2 threads.
elf::ModelShape Llama() {
  elf::ModelShape m;
  m.set_name("small_llama");
  m.set_n_layers(2);
  m.set_hidden(256);
  m.set_n_heads(4);
  m.set_n_kv_heads(2);
  m.set_head_dim(64);
  m.set_ffn(512);
  m.set_vocab(1000);
  m.set_rms_eps(1e-5f);
  m.set_rope_theta(10000);
  m.set_tied_embeddings(true);
  m.set_max_context(64);
  return m;
}

// Gemma 3: layer 0 sliding (window 4), layer 1 full.
elf::ModelShape Gemma3() {
  elf::ModelShape m = Llama();
  m.set_name("small_gemma3");
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

struct Decoded {
  std::vector<uint32_t> tokens;
  std::vector<std::vector<float>> top_logits;
};

// Loads model `i`'s weights on a pool of its own, opens a session on that pool (with
// `given_pool` false: on none, so that the session makes its own), and decodes
// greedily from a prompt.
Decoded Decode(int i, bool given_pool = true) {
  const elf::ModelShape shape = i == 0 ? Llama() : Gemma3();
  Decoded run;
  auto program = graph::BuildBaseline(shape);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return run;
  ThreadPool pool(2);
  auto weights = runtime::ReadWeightsSpec(i == 0 ? "synthetic:7" : "synthetic:8", *program, 0, &pool);
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (!weights.ok()) return run;
  runtime::SessionOptions options;
  options.pool = given_pool ? &pool : nullptr;
  auto session = runtime::CpuSession::OpenOwning(*program, shape.name() + ".elf", *std::move(weights), options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return run;
  runtime::GreedyOptions greedy;
  greedy.max_new_tokens = 8;
  const std::vector<uint32_t> prompt = {3, 17, 42, 99, 512, 7};
  auto done = runtime::GenerateGreedy((*session)->decoder(), prompt, greedy,
                                      [&](int, const runtime::StepResult& step) {
                                        run.tokens.push_back(step.token);
                                        run.top_logits.push_back(step.top_logits);
                                        return absl::OkStatus();
                                      });
  EXPECT_TRUE(done.ok()) << done.status();
  return run;
}

TEST(TwoSessions, EachGivesItsTokensAloneWhileTheOtherRuns) {
  std::array<Decoded, 2> alone;
  for (int i = 0; i < 2; ++i) {
    alone[i] = Decode(i);
    ASSERT_EQ(alone[i].tokens.size(), 8u) << "model " << i;
  }
  // Both start together, so that their loads and decodes overlap.
  const std::array<Decoded, 2> together = dk::testing::RunTogether([](int i) { return Decode(i); });
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "model " << i;
    EXPECT_EQ(together[i].top_logits, alone[i].top_logits) << "model " << i;
  }
}

// Sessions opened with no pool: each must make one of its own. Were the runtime to
// fall back to a pool of the process's, the two would run it from two threads at once
// (ThreadSanitizer reports that; ThreadPool::Run takes one caller at a time).
TEST(TwoSessions, SessionsGivenNoPoolShareNone) {
  std::array<Decoded, 2> alone;
  for (int i = 0; i < 2; ++i) alone[i] = Decode(i, /*given_pool=*/false);
  const std::array<Decoded, 2> together = dk::testing::RunTogether([](int i) { return Decode(i, false); });
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(alone[i].tokens.size(), 8u) << "model " << i;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "model " << i;
    EXPECT_EQ(together[i].top_logits, alone[i].top_logits) << "model " << i;
  }
}

}  // namespace
}  // namespace dk
