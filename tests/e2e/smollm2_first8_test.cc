// The smollm2_135m baseline decode ELF, on the real GGUF weights, continues
// "The capital of France is" with exactly the first 8 tokens HuggingFace
// transformers produces in bf16 from the same GGUF. The HF ids were recorded with
//   .venv-ref/bin/python tools/hf_reference/first8.py \
//       --gguf "$(./bazelw info output_base)/external/smollm2_135m/model.gguf" \
//       --tokenizer tokenizer/testdata/smollm2_tokenizer.json
// (transformers 5.24.0, torch 2.15.0): " Paris.\n\nThe answer is:".
#include <memory>
#include <string>
#include <vector>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace dk {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

TEST(Smollm2, BaselineGreedyContinuationEqualsHfFirst8) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string gguf = runfiles->Rlocation("smollm2_135m/model.gguf");
  const std::string elf = runfiles->Rlocation("decodekit/models/smollm2_135m/decode.elf");

  auto tok = tokenizer::Tokenizer::Load(gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Encode("The capital of France is");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int32_t>{504, 3575, 282, 4649, 314}));  // HF's prompt ids, no BOS

  auto program = elf::ReadElfFile(elf);
  ASSERT_TRUE(program.ok()) << program.status();
  auto weights = runtime::LoadWeightsSpec(gguf, program->model());
  ASSERT_TRUE(weights.ok()) << weights.status();
  runtime::SessionOptions options;
  options.validate = true;
  auto session = runtime::CpuSession::Open(*program, elf, *weights, options);
  ASSERT_TRUE(session.ok()) << session.status();
  runtime::Decoder& decoder = (*session)->decoder();
  for (int32_t id : *ids) ASSERT_TRUE(decoder.Advance(static_cast<uint32_t>(id)).ok());
  std::vector<int32_t> generated;
  for (int i = 0; i < 8; ++i) {
    generated.push_back(static_cast<int32_t>(decoder.last().token));
    if (i < 7) ASSERT_TRUE(decoder.Advance(decoder.last().token).ok());
  }
  EXPECT_EQ(generated, (std::vector<int32_t>{7042, 30, 198, 198, 504, 2988, 314, 42}));
  auto text = (*tok)->Decode(generated);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, " Paris.\n\nThe answer is:");
}

}  // namespace
}  // namespace dk
