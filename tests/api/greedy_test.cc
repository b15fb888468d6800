// Greedy output through the public API (decodekit::Engine: Feed, then Generate) is
// verify's (verify::RunGreedy over a CpuSession): the same tokens for every prompt of
// the model's goldens, on the stage its verify chain ends at.
//   greedy_test --elf E --weights W --tokenizer T --goldens G --new_tokens N
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "api/decodekit.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "verify/goldens.h"
#include "verify/runner.h"

ABSL_FLAG(std::string, elf, "", "the stage's decode ELF");
ABSL_FLAG(std::string, weights, "synthetic", "weights spec");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer file");
ABSL_FLAG(std::string, goldens, "", "goldens JSON");
ABSL_FLAG(int, new_tokens, 16, "tokens per prompt");

namespace dk {
namespace {

TEST(ApiGreedy, SameTokensAsVerify) {
  const std::string elf_path = absl::GetFlag(FLAGS_elf);
  auto goldens = verify::LoadGoldens(absl::GetFlag(FLAGS_goldens));
  ASSERT_TRUE(goldens.ok()) << goldens.status();
  const int n = absl::GetFlag(FLAGS_new_tokens);

  std::vector<verify::Sequence> want;
  {
    auto program = elf::ReadElfFile(elf_path);
    ASSERT_TRUE(program.ok()) << program.status();
    auto weights = runtime::LoadWeightsSpec(absl::GetFlag(FLAGS_weights), program->model());
    ASSERT_TRUE(weights.ok()) << weights.status();
    auto session = runtime::CpuSession::Open(*program, elf_path, *weights);
    ASSERT_TRUE(session.ok()) << session.status();
    auto runs = verify::RunGreedy((*session)->decoder(), goldens->prompts, n);
    ASSERT_TRUE(runs.ok()) << runs.status();
    want = *runs;
  }

  decodekit::EngineOptions options;
  options.elf = elf_path;
  options.weights = absl::GetFlag(FLAGS_weights);
  options.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  auto engine = decodekit::Engine::Open(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  decodekit::GenerateOptions generate;
  generate.max_new_tokens = n;
  generate.stop_at_end_of_generation = false;  // verify runs every step
  int compared = 0;
  for (size_t p = 0; p < goldens->prompts.size(); ++p) {
    const std::vector<uint32_t>& ids = goldens->prompts[p].prompt_ids;
    (*engine)->Reset();
    ASSERT_TRUE((*engine)->Feed(std::vector<int32_t>(ids.begin(), ids.end())).ok());
    auto result = (*engine)->Generate(generate);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->tokens.size(), want[p].steps.size()) << "prompt " << p;
    for (size_t i = 0; i < want[p].steps.size(); ++i) {
      EXPECT_EQ(static_cast<uint32_t>(result->tokens[i]), want[p].steps[i].id) << "prompt " << p << " step " << i;
      ++compared;
    }
  }
  std::printf("%d tokens compared over %zu prompts (%s)\n", compared, goldens->prompts.size(),
              (*engine)->Describe().c_str());
  EXPECT_GT(compared, 0);
}

}  // namespace
}  // namespace dk

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
