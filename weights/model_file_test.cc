// ShapeFromModelFile: one shape from a GGUF, a checkpoint directory or its
// config.json alone; the context capped; what it cannot take refused by name.
#include "weights/model_file.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "weights/test_util.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

using ::dk::weights::testing::GgufWriter;
using ::dk::weights::testing::TempDir;
using ::dk::weights::testing::WriteFile;
using ::testing::HasSubstr;

constexpr char kLlamaConfig[] = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
  "num_key_value_heads": 2, "num_hidden_layers": 3, "vocab_size": 100,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "max_position_embeddings": 131072,
  "tie_word_embeddings": true
})";

std::string LlamaGguf(uint32_t context) {
  GgufWriter w;
  w.KvString("general.architecture", "llama")
      .KvString("general.basename", "Tiny-Llama")
      .KvString("general.size_label", "1K")
      .KvU32("llama.block_count", 3)
      .KvU32("llama.context_length", context)
      .KvU32("llama.embedding_length", 256)
      .KvU32("llama.feed_forward_length", 512)
      .KvU32("llama.attention.head_count", 4)
      .KvU32("llama.attention.head_count_kv", 2)
      .KvF32("llama.rope.freq_base", 10000.0f)
      .KvF32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .KvU32("llama.vocab_size", 100);
  return w.Bytes();
}

TEST(ModelFileTest, ConfigJsonAloneAndItsDirectoryGiveOneShape) {
  TempDir("model_file");
  const std::string dir = TempDir("model_file/My-Model.1B");
  WriteFile(dir + "/config.json", kLlamaConfig);
  auto from_dir = ShapeFromModelFile(dir);
  auto from_file = ShapeFromModelFile(dir + "/config.json");
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_dir->DebugString(), from_file->DebugString());
  EXPECT_EQ(from_dir->name(), "my_model_1b");
  EXPECT_EQ(from_dir->n_layers(), 3);
  EXPECT_EQ(from_dir->n_kv_heads(), 2);
  // 131072 positions in the file, capped at the default.
  EXPECT_EQ(from_dir->max_context(), kDefaultMaxContext);
}

TEST(ModelFileTest, TheContextIsTheFilesOwnCappedByTheOption) {
  const std::string path = TempDir("model_file") + "/tiny.gguf";
  WriteFile(path, LlamaGguf(4096));
  auto shape = ShapeFromModelFile(path);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->max_context(), 4096);  // under the cap: the file's own
  EXPECT_EQ(shape->name(), "tiny_llama_1k");
  auto capped = ShapeFromModelFile(path, {.name = "mine", .max_context = 512});
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(capped->max_context(), 512);
  EXPECT_EQ(capped->name(), "mine");
  auto above = ShapeFromModelFile(path, {.name = "", .max_context = 100000});
  ASSERT_TRUE(above.ok()) << above.status();
  EXPECT_EQ(above->max_context(), 4096);  // a cap, never an extension
}

TEST(ModelFileTest, WhatItCannotTakeIsRefusedByName) {
  const std::string dir = TempDir("model_file_bad");
  auto missing = ShapeFromModelFile(dir + "/nothing.gguf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  auto no_config = ShapeFromModelFile(dir);
  EXPECT_EQ(no_config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_config.status().message(), HasSubstr("without a config.json"));
  WriteFile(dir + "/weights.bin", "not a model");
  auto not_model = ShapeFromModelFile(dir + "/weights.bin");
  EXPECT_THAT(not_model.status().message(), HasSubstr("not a GGUF file"));
  // An architecture the graph does not have: Unimplemented (tools exit 2), naming it.
  GgufWriter w;
  w.KvString("general.architecture", "mamba").KvU32("mamba.block_count", 2);
  WriteFile(dir + "/mamba.gguf", w.Bytes());
  auto mamba = ShapeFromModelFile(dir + "/mamba.gguf");
  EXPECT_EQ(mamba.status().code(), absl::StatusCode::kUnimplemented) << mamba.status();
  EXPECT_THAT(mamba.status().message(), HasSubstr("mamba"));
  const std::string gguf = dir + "/tiny.gguf";
  WriteFile(gguf, LlamaGguf(4096));
  auto bad_cap = ShapeFromModelFile(gguf, {.name = "", .max_context = -1});
  EXPECT_EQ(bad_cap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_cap.status().message(), HasSubstr("max_context"));
}

}  // namespace
}  // namespace dk::weights
