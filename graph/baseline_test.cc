#include "graph/baseline.h"

#include <set>
#include <string>

#include "elf/elf.h"
#include "gtest/gtest.h"

namespace dk::graph {
namespace {

elf::ModelShape Llama32() {
  elf::ModelShape m;
  m.set_name("llama32_1b");
  m.set_n_layers(16);
  m.set_hidden(2048);
  m.set_n_heads(32);
  m.set_n_kv_heads(8);
  m.set_head_dim(64);
  m.set_ffn(8192);
  m.set_vocab(128256);
  m.set_rms_eps(1e-5f);
  m.set_rope_theta(500000);
  m.set_tied_embeddings(true);
  m.set_max_context(2048);
  return m;
}

TEST(Baseline, FourteenGroupsPerLayerPlusLmHead) {
  auto p = BuildBaseline(Llama32());
  ASSERT_TRUE(p.ok()) << p.status();
  int groups = 0, host = 0, write_weights = 0;
  for (const auto& s : p->steps()) {
    if (s.has_group()) {
      ++groups;
      EXPECT_EQ(s.group().launches_size(), 1) << s.group().name();
    } else {
      ++host;
    }
  }
  EXPECT_EQ(groups, 16 * 14 + 2);  // + final_norm and lm_head
  EXPECT_EQ(host, 2 + 16 * 2 + 1);  // embedding, rope_lookup, kv_write+attention, topk
  for (const auto& bo : p->bos()) {
    EXPECT_TRUE(bo.category() == elf::WRITE || bo.category() == elf::OUTPUT) << bo.name();
    if (!bo.weight_tensor().empty()) ++write_weights;
  }
  EXPECT_EQ(write_weights, 16 * 9 + 2);
  // The 2-K rename: K=2048 and K=8192 GEMVs link different symbols.
  std::set<std::string> symbols;
  for (const auto& s : p->steps()) {
    if (s.has_group()) symbols.insert(s.group().launches(0).kernel_symbol());
  }
  EXPECT_TRUE(symbols.count("dk_gemv_bf16_rowmajor_k2048"));
  EXPECT_TRUE(symbols.count("dk_gemv_bf16_rowmajor_k8192"));
  EXPECT_TRUE(elf::WriteElf(*p).ok());
}

TEST(Baseline, RejectsBadShapes) {
  auto m = Llama32();
  m.set_n_kv_heads(5);
  EXPECT_NE(BuildBaseline(m).status().message().find("not a multiple of n_kv_heads"),
            std::string::npos);
  m = Llama32();
  m.set_head_dim(63);
  EXPECT_FALSE(BuildBaseline(m).ok());
  m = Llama32();
  m.set_vocab(0);
  EXPECT_FALSE(BuildBaseline(m).ok());
}

}  // namespace
}  // namespace dk::graph
