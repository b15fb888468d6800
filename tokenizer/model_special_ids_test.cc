// The special ids a model's files name, against the tokenizer given beside them.
#include "tokenizer/model_special_ids.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace dk::tokenizer {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Rlocation(const std::string& path) {
  static Runfiles* runfiles = [] {
    std::string error;
    Runfiles* r = Runfiles::CreateForTest(&error);
    EXPECT_NE(r, nullptr) << error;
    return r;
  }();
  return runfiles->Rlocation(path);
}

std::string Tmp(const std::string& name) { return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name); }

// A checkpoint directory holding only `config_json` as config.json.
std::string Checkpoint(const std::string& name, const std::string& config_json) {
  const std::string dir = Tmp(name);
  ::mkdir(dir.c_str(), 0700);
  std::ofstream(dir + "/config.json") << config_json;
  return dir;
}

// A GGUF file of metadata only: tokenizer.ggml.bos_token_id and eos_token_id (uint32).
std::string GgufWithIds(const std::string& name, uint32_t bos, uint32_t eos) {
  std::string b;
  auto raw = [&b](const void* p, size_t n) { b.append(static_cast<const char*>(p), n); };
  auto u32 = [&raw](uint32_t v) { raw(&v, 4); };
  auto u64 = [&raw](uint64_t v) { raw(&v, 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    b += s;
  };
  u32(0x46554747);
  u32(3);
  u64(0);  // tensors
  u64(2);  // keys
  str("tokenizer.ggml.bos_token_id");
  u32(4);
  u32(bos);
  str("tokenizer.ggml.eos_token_id");
  u32(4);
  u32(eos);
  const std::string path = Tmp(name);
  std::ofstream(path, std::ios::binary) << b;
  return path;
}

std::unique_ptr<Tokenizer> Llama3Style() {
  // BOS <|begin_of_text|> = 0; <|end_of_text|> = 1 and <|eot_id|> = 4 end generation.
  auto t = Tokenizer::Load(Rlocation("decodekit/tokenizer/testdata/llama3_style_tokenizer.json"));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(ModelSpecialIdsTest, SyntheticWeightsNameNone) {
  auto ids = ReadModelSpecialIds("synthetic:3");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_FALSE(ids->has_value());
}

TEST(ModelSpecialIdsTest, CheckpointConfigsAreRead) {
  const std::string dir = Checkpoint("ckpt_read", R"({"bos_token_id": 0, "eos_token_id": [1, 4]})");
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": 7})";
  auto ids = ReadModelSpecialIds(dir);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(ids->has_value());
  EXPECT_EQ((*ids)->bos, 0);
  EXPECT_THAT((*ids)->eos, ElementsAre(1, 4, 7));
  EXPECT_THAT((*ids)->source, HasSubstr("config.json and "));
}

TEST(ModelSpecialIdsTest, TheModelsOwnTokenizerPasses) {
  const std::string dir = Checkpoint("ckpt_ok", R"({"bos_token_id": 0, "eos_token_id": 1})");
  EXPECT_TRUE(CheckTokenizerMatchesWeights(*Llama3Style(), "tok.json", dir).ok());
  // The real SmolLM2 GGUF with its own tokenizer.json (one file each, as a user has them).
  auto smol = Tokenizer::Load(Rlocation("decodekit/tokenizer/testdata/smollm2_tokenizer.json"));
  ASSERT_TRUE(smol.ok()) << smol.status();
  const std::string gguf = Rlocation("smollm2_135m/model.gguf");
  auto ids = ReadModelSpecialIds(gguf);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(ids->has_value());
  EXPECT_TRUE((*ids)->bos.has_value());
  EXPECT_FALSE((*ids)->eos.empty());
  absl::Status s = CheckTokenizerSpecialIds(**smol, **ids, "smollm2_tokenizer.json");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ModelSpecialIdsTest, AnotherBosIsRefused) {
  const std::string dir = Checkpoint("ckpt_bos", R"({"bos_token_id": 5, "eos_token_id": 1})");
  absl::Status s = CheckTokenizerMatchesWeights(*Llama3Style(), "tok.json", dir);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("tokenizer tok.json is not this model's: its BOS is id 0, "
                                     "the model's is 5 (model ids from " + dir + "/config.json)"));
  const std::string gguf = GgufWithIds("bos.gguf", 3, 1);
  s = CheckTokenizerMatchesWeights(*Llama3Style(), "tok.json", gguf);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("its BOS is id 0, the model's is 3 (model ids from " + gguf + ")"));
}

// The llama3-style tokenizer.json in a checkpoint directory whose tokenizer_config.json
// names its EOS, <|end_of_text|> (id 1).
std::unique_ptr<Tokenizer> Llama3StyleWithEos() {
  const std::string dir = Tmp("tok_with_eos");
  ::mkdir(dir.c_str(), 0700);
  std::ifstream in(Rlocation("decodekit/tokenizer/testdata/llama3_style_tokenizer.json"), std::ios::binary);
  std::ofstream(dir + "/tokenizer.json", std::ios::binary) << in.rdbuf();
  std::ofstream(dir + "/tokenizer_config.json") << R"({"eos_token": "<|end_of_text|>"})";
  auto t = Tokenizer::Load(dir);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(ModelSpecialIdsTest, NoSharedEndOfGenerationIdIsRefused) {
  std::unique_ptr<Tokenizer> tok = Llama3StyleWithEos();
  ASSERT_EQ(tok->eos_id(), 1);
  const std::string dir = Checkpoint("ckpt_eos", R"({"bos_token_id": 0, "eos_token_id": [9, 10]})");
  absl::Status s = CheckTokenizerMatchesWeights(*tok, "tok", dir);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("none of its end-of-generation ids [1, 4] is the model's EOS "
                                     "or end of turn [9, 10]"));
  // One shared id is enough: a model may name more end-of-turn ids than a tokenizer.
  const std::string some = Checkpoint("ckpt_some", R"({"eos_token_id": [4, 9]})");
  EXPECT_TRUE(CheckTokenizerMatchesWeights(*tok, "tok", some).ok());
  // A bare tokenizer.json names no EOS (only end-of-turn texts it knows): not judged.
  EXPECT_TRUE(CheckTokenizerMatchesWeights(*Llama3Style(), "tok.json", dir).ok());
}

TEST(ModelSpecialIdsTest, MalformedIdsNameTheFileAndKey) {
  const std::string dir = Checkpoint("ckpt_bad", R"({"bos_token_id": "<s>"})");
  auto ids = ReadModelSpecialIds(dir);
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(ids.status().message(), HasSubstr(dir + "/config.json: bos_token_id = \"<s>\" is not a token id"));
  const std::string neg = Checkpoint("ckpt_neg", R"({"eos_token_id": [1, -2]})");
  EXPECT_FALSE(ReadModelSpecialIds(neg).ok());
}

}  // namespace
}  // namespace dk::tokenizer
