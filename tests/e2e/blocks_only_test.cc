// A GGUF stage's weights loaded as blocks only (runtime::ReadWeightsSpec for the
// program: the tensors decode_gguf reads only as the file's own blocks are never
// dequantized to bf16) decode exactly as the full load does: the same tokens, top-k
// ids and logits, on SmolLM2's Q4_1 / Q8_0 file and Gemma 3's Q4_K_M one (their
// embeddings too: rows dequantized when embedded), through
// OpenOwning (which frees the rest as it is placed).
#include <memory>
#include <string>
#include <vector>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "runtime/greedy.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace dk {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

std::vector<runtime::StepResult> Generate(const elf::Program& program, weights::Weights w) {
  auto session = runtime::CpuSession::OpenOwning(program, "test.elf", std::move(w), {});
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  std::vector<uint32_t> prompt;
  for (uint32_t i = 0; i < 40; ++i) prompt.push_back((1 + 7919u * i) % program.model().vocab());
  std::vector<runtime::StepResult> steps;
  runtime::GreedyOptions greedy;
  greedy.max_new_tokens = 8;
  auto run = runtime::GenerateGreedy((*session)->decoder(), prompt, greedy,
                                     [&](int, const runtime::StepResult& s) {
                                       steps.push_back(s);
                                       return absl::OkStatus();
                                     });
  EXPECT_TRUE(run.ok()) << run.status();
  return steps;
}

TEST(BlocksOnlyTest, SameTokensAndLogitsAsTheFullLoad) {
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest());
  ASSERT_NE(runfiles, nullptr);
  for (const std::string model : {"smollm2_135m", "gemma3_270m"}) {
    SCOPED_TRACE(model);
    const std::string gguf = runfiles->Rlocation(model + "/model.gguf");
    auto program = elf::ReadElfFile(runfiles->Rlocation("decodekit/models/" + model + "/decode_gguf.elf"));
    ASSERT_TRUE(program.ok()) << program.status();
    auto full = runtime::ReadWeightsSpec(gguf, program->model());
    ASSERT_TRUE(full.ok()) << full.status();
    auto blocks = runtime::ReadWeightsSpec(gguf, *program);
    ASSERT_TRUE(blocks.ok()) << blocks.status();
    // Most tensors carry no bf16 values, the embedding neither (the host dequantizes
    // the rows it embeds from the file's blocks).
    int without = 0;
    for (const std::string& name : blocks->Names()) without += blocks->Find(name)->data.size() == 0;
    EXPECT_GT(without, static_cast<int>(blocks->Names().size()) / 2);
    EXPECT_EQ(blocks->Find("model.embed_tokens.weight")->data.size(), 0u);
    const auto a = Generate(*program, *std::move(full));
    const auto b = Generate(*program, *std::move(blocks));
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].token, b[i].token) << "token " << i;
      EXPECT_EQ(a[i].top_ids, b[i].top_ids) << "token " << i;
      EXPECT_EQ(a[i].top_logits, b[i].top_logits) << "token " << i;
    }
  }
}

}  // namespace
}  // namespace dk
