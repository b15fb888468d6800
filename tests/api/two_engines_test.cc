// Two decodekit::Engines on two different models, on two threads at once, each from
// Open (the weights loaded at the same time) to its last token: each must give
// exactly the tokens it gives alone. An Engine owns its thread pool and its kernels'
// scratch (docs/architecture.md, "One context per engine"), so the two share no
// mutable state; .ci/run (step 5a) runs this test under ThreadSanitizer
// (--config=tsan), which reports any access the two make to the same memory without
// ordering and fails the test.
//   two_engines_test ELF_A WEIGHTS_A ELF_B WEIGHTS_B
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/decodekit.h"
#include "gtest/gtest.h"
#include "tests/e2e/run_together.h"

namespace {

struct Model {
  std::string elf, weights;
};
std::array<Model, 2> g_models;

constexpr int kContext = 128;
constexpr int kNewTokens = 6;
// Prompts long enough to take the prefill path as well as the decode step.
constexpr const char* kPrompts[2] = {"The capital of France is", "Once upon a time, in a small village by the sea,"};

decodekit::EngineOptions Options(const Model& m) {
  decodekit::EngineOptions o;
  o.elf = m.elf;
  o.weights = m.weights;
  o.max_context = kContext;
  o.threads = 2;  // a worker besides the caller in each engine's pool
  return o;
}

// Opens an engine for model `i` and completes its prompt greedily; the new tokens.
std::vector<int32_t> OpenAndComplete(int i) {
  auto engine = decodekit::Engine::Open(Options(g_models[i]));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  decodekit::GenerateOptions generate;
  generate.max_new_tokens = kNewTokens;
  auto result = (*engine)->Complete(kPrompts[i], generate);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  return result->tokens;
}

TEST(TwoEngines, EachGivesItsTokensAloneWhileTheOtherRuns) {
  std::array<std::vector<int32_t>, 2> alone;
  for (int i = 0; i < 2; ++i) {
    alone[i] = OpenAndComplete(i);
    ASSERT_EQ(alone[i].size(), static_cast<size_t>(kNewTokens)) << "model " << i;
  }
  // The two models differ, so a mix-up of their state would show in the tokens too.
  EXPECT_NE(alone[0], alone[1]);

  // Both start Open together, so that their loads overlap.
  const auto together = dk::testing::RunTogether([](int i) { return OpenAndComplete(i); });
  for (int i = 0; i < 2; ++i) EXPECT_EQ(together[i], alone[i]) << "model " << i;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc != 5) {
    fprintf(stderr, "usage: two_engines_test ELF_A WEIGHTS_A ELF_B WEIGHTS_B\n");
    return 2;
  }
  g_models = {Model{argv[1], argv[2]}, Model{argv[3], argv[4]}};
  return RUN_ALL_TESTS();
}
