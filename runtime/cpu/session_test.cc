// The memory check a session's load makes before allocating, and which tensors of a
// GGUF it loads as blocks only (runtime/cpu/session.h).
#include "runtime/cpu/session.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "elf/program.pb.h"
#include "gtest/gtest.h"
#include "weights/weights.h"

namespace dk::runtime {
namespace {

elf::ModelShape Shape(int layers, int hidden, int ffn, int vocab, int context) {
  elf::ModelShape s;
  s.set_name("m");
  s.set_n_layers(layers);
  s.set_hidden(hidden);
  s.set_n_heads(4);
  s.set_n_kv_heads(2);
  s.set_head_dim(hidden / 4);
  s.set_ffn(ffn);
  s.set_vocab(vocab);
  s.set_rms_eps(1e-5f);
  s.set_rope_theta(10000.0f);
  s.set_tied_embeddings(true);
  s.set_max_context(context);
  return s;
}

elf::BufferObject* WeightBo(elf::Program& p, const std::string& tensor, int64_t bytes, bool stored) {
  elf::BufferObject* b = p.add_bos();
  b->set_name(tensor);
  b->set_weight_tensor(tensor);
  b->set_size_bytes(bytes);
  b->set_blocks_as_stored(stored);
  return b;
}

TEST(SessionMemoryTest, BlocksOnlyNamesTensorsReadOnlyAsTheFilesBlocks) {
  elf::Program p;
  *p.mutable_model() = Shape(1, 32, 64, 16, 128);
  WeightBo(p, "model.layers.0.mlp.up_proj.weight", 100, true);
  WeightBo(p, "model.layers.0.mlp.down_proj.weight", 100, true);
  WeightBo(p, "model.layers.0.mlp.down_proj.weight", 100, false);  // also read another way
  WeightBo(p, "model.embed_tokens.weight", 100, true);              // the host dequantizes its rows
  WeightBo(p, "model.layers.0.input_layernorm.weight", 64, false);
  const weights::BlocksOnly only = GgufBlocksOnly(p);
  ASSERT_NE(only, nullptr);
  EXPECT_TRUE(only("model.layers.0.mlp.up_proj.weight"));
  EXPECT_FALSE(only("model.layers.0.mlp.down_proj.weight"));
  EXPECT_TRUE(only("model.embed_tokens.weight"));
  EXPECT_FALSE(only("model.layers.0.input_layernorm.weight"));

  elf::Program bf16;
  *bf16.mutable_model() = p.model();
  WeightBo(bf16, "model.layers.0.mlp.up_proj.weight", 100, false);
  EXPECT_EQ(GgufBlocksOnly(bf16), nullptr);
}

TEST(SessionMemoryTest, EstimateCountsLoadedWeightsBosAndKvCache) {
  elf::Program p;
  *p.mutable_model() = Shape(1, 32, 64, 16, 128);
  WeightBo(p, "model.layers.0.mlp.up_proj.weight", 1000, true);
  p.add_bos()->set_size_bytes(77);  // an activation
  int64_t all = 0;
  for (const auto& [name, dims] : weights::ExpectedTensors(p.model())) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    all += 2 * n;
  }
  const SessionMemory full = EstimateSessionMemory(p, nullptr);
  EXPECT_EQ(full.loaded_weights, all);
  EXPECT_EQ(full.weight_bos, 1000);
  EXPECT_EQ(full.other_bos, 77);
  // K and V, bf16: 1 layer x 2 KV heads x 128 positions x head_dim 8.
  EXPECT_EQ(full.kv_cache, 2 * 2 * 1 * 2 * 128 * 8);
  EXPECT_EQ(EstimateSessionMemory(p, nullptr, 256).kv_cache, 2 * full.kv_cache);
  const SessionMemory blocks = EstimateSessionMemory(p, GgufBlocksOnly(p));
  // Neither up_proj [64, 32] nor (a GGUF stage) the embedding [16, 32] dequantized.
  EXPECT_EQ(blocks.loaded_weights, all - 2 * 64 * 32 - 2 * 16 * 32);
  // Not STATIC: a WRITE weight BO is rewritten from the loaded values, held beside it.
  EXPECT_FALSE(full.released);
  EXPECT_EQ(full.total(), all + 1000 + 77 + full.kv_cache);
  p.mutable_bos(0)->set_category(elf::STATIC);
  const SessionMemory released = EstimateSessionMemory(p, nullptr);
  EXPECT_TRUE(released.released);
  EXPECT_EQ(released.total(), std::max<int64_t>(all, 1000) + 77 + full.kv_cache);
}

TEST(SessionMemoryTest, TooBigIsRefusedBeforeAllocatingWithTheFigures) {
  SessionMemory need;
  need.loaded_weights = 16'000'000'000;
  need.weight_bos = 12'000'000'000;
  need.kv_cache = 4'000'000'000;
  EXPECT_TRUE(CheckSessionMemory(need, 21'000'000'000, "x").ok());
  EXPECT_TRUE(CheckSessionMemory(need, -1, "x").ok());  // MemAvailable unknown: not checked
  const absl::Status st = CheckSessionMemory(need, 19'000'000'000, "a session of model m");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  for (const char* part : {"a session of model m", "needs about 20 GB", "weights as loaded 16 GB",
                           "KV cache 4 GB", "MemAvailable 19 GB", "refused before allocating"}) {
    EXPECT_TRUE(absl::StrContains(st.message(), part)) << part << ": " << st;
  }
}

// A model no host can hold (1.7 TB of bf16) is refused by the load itself, before
// the synthetic weights are made.
TEST(SessionMemoryTest, ReadWeightsSpecRefusesAModelBiggerThanMemAvailable) {
  ASSERT_GT(MemAvailableBytes(), 0);
  elf::Program p;
  *p.mutable_model() = Shape(200, 16384, 65536, 32000, 4096);
  const auto w = ReadWeightsSpec("synthetic", p);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kResourceExhausted) << w.status();
  EXPECT_TRUE(absl::StrContains(w.status().message(), "MemAvailable")) << w.status();
}

}  // namespace
}  // namespace dk::runtime
