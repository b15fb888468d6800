#include "optimizations/merge_multi_launch/merge_multi_launch.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "registry/registry.h"
#include "optimizations/common/program_util.h"
#include "optimizations/testing/tiny.h"
#include "graph/baseline.h"

namespace dk::opt::merge_multi_launch {
namespace {

using testing::BuildChain;
using testing::TinyShape;

struct GroupInfo {
  std::string name;
  int launches;
  bool operator==(const GroupInfo& o) const { return name == o.name && launches == o.launches; }
};
std::ostream& operator<<(std::ostream& os, const GroupInfo& g) { return os << g.name << "/" << g.launches; }

std::vector<GroupInfo> Groups(const elf::Program& p) {
  std::vector<GroupInfo> out;
  for (const auto& s : p.steps()) {
    if (s.has_group()) out.push_back({s.group().name(), s.group().launches_size()});
  }
  return out;
}

const elf::LineageEntry& Last(const elf::Program& p) { return p.lineage(p.lineage_size() - 1); }

// A tiny model npu2 can tile: O's K (n_heads x head_dim) and down's K (ffn) are
// set against npu2's K-split chunk (512) and K_max (8160).
elf::ModelShape NpuShape(int head_dim, int ffn, int vocab) {
  elf::ModelShape m = TinyShape();
  m.set_name("tiny_npu");
  m.set_head_dim(head_dim);
  m.set_ffn(ffn);
  m.set_vocab(vocab);
  return m;
}

// The launches of a program's groups that run `kernel_id`.
std::vector<const elf::Launch*> LaunchesOf(const elf::Program& p, const std::string& kernel_id) {
  std::vector<const elf::Launch*> out;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      auto kernel = KernelOf(l);
      if (kernel.ok() && (*kernel)->id() == kernel_id) out.push_back(&l);
    }
  }
  return out;
}

TEST(MergeMultiLaunch, MatchesGoldens) {
  const auto cases = testing::GoldenCasesOf(kName);
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) EXPECT_TRUE(testing::CheckGolden(c).ok()) << testing::CheckGolden(c);
}

TEST(MergeMultiLaunch, TwoGroupsPerLayerPlusTheLmHead) {
  auto p = BuildChain(TinyShape(), {kName});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{
                            {"L0.rms_gemv_rope", 6}, {"L0.o_gemv_ffn", 8}, {"lm_head", 2}}));
  EXPECT_EQ(RunsPerToken(*p), 3);
  // Host steps stay where they were: kv_write and attention between the groups.
  std::vector<std::string> kinds;
  for (const auto& s : p->steps()) kinds.push_back(s.has_group() ? "group" : elf::HostStepName(s.host().kind()));
  EXPECT_EQ(kinds, (std::vector<std::string>{"embedding", "rope_lookup", "group", "kv_write",
                                             "attention", "group", "group", "topk"}));
  for (const auto& s : p->steps()) {
    if (!s.has_group()) continue;
    EXPECT_EQ(s.group().entry_symbol(), absl::StrReplaceAll(s.group().name(), {{".", "_"}}));
  }
  // Produced and consumed inside a group: on the device only. Read by a host step
  // or by another group through the host: still read back.
  for (const auto& b : p->bos()) {
    if (b.host_value() == "L0.xn" || b.host_value() == "L0.h_mid" || b.host_value() == "L0.act") {
      ADD_FAILURE() << b.name() << " still mirrors " << b.host_value();
    }
    if (b.name() == "L0.attn_norm.y" || b.name() == "L0.silu_mul.y" || b.name() == "final_norm.y") {
      EXPECT_EQ(b.category(), elf::INTERMEDIATE) << b.name();
    }
    if (b.host_value() == "L0.q_rot" || b.host_value() == "logits") {
      EXPECT_EQ(b.category(), elf::OUTPUT);
    }
  }
  EXPECT_TRUE(Last(*p).applied());
  EXPECT_NE(Last(*p).reason().find("16 -> 3 device runs per token"), std::string::npos) << Last(*p).reason();
}

TEST(MergeMultiLaunch, OnlyTheSelectedGroups) {
  auto target = registry::FindTarget("cpu");
  auto p = graph::BuildBaseline(TinyShape());
  ASSERT_TRUE(p.ok());
  Options options;
  options.groups = {"rms_gemv_rope"};
  auto result = merge_multi_launch::Run(*p, **target, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->changed);
  EXPECT_EQ(RunsPerToken(*p), 1 + 8 + 2);
  EXPECT_EQ(Groups(*p).front(), (GroupInfo{"L0.rms_gemv_rope", 6}));
  EXPECT_NE(result->summary.find("o_gemv_ffn not selected by `groups`"), std::string::npos) << result->summary;
  EXPECT_TRUE(elf::ValidateProgram(*p).ok());
}

// As the reference deploys Llama-3.2-1B: O + FFN in one run on npu2, its O and down
// GEMVs K-split (here O K=512, down K=8192 > K_max 8160).
TEST(MergeMultiLaunch, Npu2MergesOAndFfnThroughKSplitGemvs) {
  auto p = BuildChain(NpuShape(128, 8192, 512), {kName}, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{
                            {"L0.rms_gemv_rope", 6}, {"L0.o_gemv_ffn", 8}, {"lm_head", 2}}));
  const auto ksplit = LaunchesOf(*p, "gemv_ksplit");
  ASSERT_EQ(ksplit.size(), 2u);  // O and down; q/k/v, gate, up and the LM head stay plain
  EXPECT_EQ(ksplit[0]->params().at("cols"), 512);
  EXPECT_EQ(ksplit[1]->params().at("cols"), 8192);
  for (const elf::Launch* l : ksplit) {
    EXPECT_EQ(l->params().at("k_chunk"), 512);
    EXPECT_EQ(l->kernel_symbol(), "dk_gemv_ksplit_bf16_rowmajor");
  }
  EXPECT_EQ(LaunchesOf(*p, "gemv").size(), 6u);
  EXPECT_EQ(Last(*p).target(), "npu2");
  EXPECT_TRUE(Last(*p).applied());
  EXPECT_NE(Last(*p).reason().find("16 -> 3 device runs per token"), std::string::npos) << Last(*p).reason();
  EXPECT_NE(Last(*p).reason().find("2 GEMVs K-split, e.g. L0.down_proj (O + FFN merge) 64x8192 as 16 "
                                   "chunks of K=512"),
            std::string::npos)
      << Last(*p).reason();
  EXPECT_TRUE(elf::ValidateProgram(*p).ok());
  // The same program on cpu: no limits, nothing K-split.
  auto cpu = BuildChain(NpuShape(128, 8192, 512), {kName}, "cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(RunsPerToken(*cpu), 3);
  EXPECT_TRUE(LaunchesOf(*cpu, "gemv_ksplit").empty());
}

// As the reference deploys Qwen2.5-0.5B: O's K (here 64) is no multiple of 512, so
// O + FFN runs as one group per GEMV, each elementwise launch with the GEMV before
// it; a down GEMV beyond K_max still runs K-split in its own group.
TEST(MergeMultiLaunch, Npu2SplitsOAndFfnPerGemvWhereKForbidsTheKSplit) {
  auto p = BuildChain(NpuShape(16, 8192, 512), {kName}, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{{"L0.rms_gemv_rope", 6},
                                                {"L0.o_gemv_ffn.part0", 3},
                                                {"L0.o_gemv_ffn.part1", 1},
                                                {"L0.o_gemv_ffn.part2", 2},
                                                {"L0.o_gemv_ffn.part3", 2},
                                                {"lm_head", 2}}));
  EXPECT_NE(Last(*p).reason().find("L0.o_gemv_ffn: npu2 merges O + FFN through K-split GEMVs, but the O GEMV "
                                   "(L0.o_proj): K=64 is not a multiple of npu2's K-split chunk 512; one "
                                   "group per GEMV"),
            std::string::npos)
      << Last(*p).reason();
  const auto ksplit = LaunchesOf(*p, "gemv_ksplit");
  ASSERT_EQ(ksplit.size(), 1u);
  EXPECT_EQ(ksplit[0]->params().at("cols"), 8192);
  EXPECT_NE(Last(*p).reason().find("1 GEMVs K-split, e.g. L0.down_proj (K=8192 > K_max 8160) 64x8192 as 16 "
                                   "chunks of K=512"),
            std::string::npos)
      << Last(*p).reason();
  EXPECT_TRUE(elf::ValidateProgram(*p).ok());
}

TEST(MergeMultiLaunch, Npu2KeepsAGemvNoKernelFitsSeparateUnderItsName) {
  // The tiny model: down's K=96 is no multiple of 64, and vocab 300 no multiple of
  // tile_m * herd_m. Those GEMVs run alone under their group's name; the final norm
  // left over must not take the LM head's name too.
  auto p = BuildChain(TinyShape(), {kName}, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{{"L0.rms_gemv_rope", 6},
                                                {"L0.o_gemv_ffn.part0", 3},
                                                {"L0.o_gemv_ffn.part1", 1},
                                                {"L0.o_gemv_ffn.part2", 2},
                                                {"L0.down_proj", 1},
                                                {"L0.o_gemv_ffn.part3", 1},
                                                {"lm_head.part0", 1},
                                                {"lm_head", 1}}));
  // The lineage names the first of the three notes (O + FFN per GEMV, down_proj and
  // lm_head alone).
  EXPECT_NE(Last(*p).reason().find("one group per GEMV (+2 more)"), std::string::npos) << Last(*p).reason();
  EXPECT_TRUE(elf::ValidateProgram(*p).ok());
}

TEST(MergeMultiLaunch, GroupLimitCountsDistinctLaunchBodies) {
  // npu2 with room for 4 distinct bodies per group. The attention input has 6
  // launches and 5 bodies (k and v are one GEMV body): split before rope_k, not after
  // v. The LM head, 16 partitions of 32 rows + the final norm, is 2 bodies: one group
  // of 17 launches (the reference runs its 19-partition LM head as one ELF).
  auto p = BuildChain(NpuShape(16, 128, 512), {"layout_alignment"}, "npu2", 32);
  ASSERT_TRUE(p.ok()) << p.status();
  registry::TargetConstraints target = **registry::FindTarget("npu2");
  target.set_max_launches_per_group(4);
  target.set_o_ffn_merge_needs_k_split(false);
  auto result = merge_multi_launch::Run(*p, target);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{{"L0.rms_gemv_rope.part0", 5},
                                                {"L0.rms_gemv_rope.part1", 1},
                                                {"L0.o_gemv_ffn.part0", 5},
                                                {"L0.o_gemv_ffn.part1", 3},
                                                {"lm_head", 17}}));
  EXPECT_NE(result->summary.find("more than 4 distinct launch bodies exceed npu2's limit per group; split"),
            std::string::npos)
      << result->summary;
  // Its down GEMM (K 128, no multiple of 512) follows other launches in part1: npu2's
  // prefill cannot lead a run with it, and the lineage says so.
  EXPECT_NE(result->summary.find("prefill not planned: L0.o_gemv_ffn.part1: its down GEMM (K=128"),
            std::string::npos)
      << result->summary;
  EXPECT_TRUE(registry::CheckGroupSize(target, 4).ok());
  EXPECT_FALSE(registry::CheckGroupSize(target, 5).ok());
}

TEST(MergeMultiLaunch, SecondRunChangesNothingAndSaysSo) {
  struct Case {
    elf::ModelShape shape;
    std::vector<std::string> chain;
    const char* target;
    int64_t rows;
  };
  for (const Case& c : {Case{TinyShape(2), {kName}, "cpu", 128},
                        Case{TinyShape(), {"layout_alignment", "buffer_object_reuse", kName}, "cpu", 128},
                        Case{NpuShape(128, 8192, 512), {kName}, "npu2", 128},
                        Case{NpuShape(16, 8192, 512), {kName}, "npu2", 128},
                        Case{TinyShape(), {kName}, "npu2", 128},
                        Case{NpuShape(16, 128, 512), {"layout_alignment", kName}, "npu2", 32}}) {
    SCOPED_TRACE(std::string(c.target) + " " + c.shape.name());
    auto p = BuildChain(c.shape, c.chain, c.target, c.rows);
    ASSERT_TRUE(p.ok()) << p.status();
    const elf::Program once = *p;
    auto changed = testing::RunPass(kName, *p, c.target);
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_FALSE(*changed);
    EXPECT_FALSE(Last(*p).applied());
    EXPECT_EQ(Last(*p).target(), c.target);
    EXPECT_TRUE(absl::StartsWith(Last(*p).reason(), "nothing")) << Last(*p).reason();
    p->mutable_lineage()->RemoveLast();
    EXPECT_EQ(testing::ProgramDiff(once, *p), "") << "a pass that reports no change changed the program";
  }
}

// Runs on the CPU device with the baseline's logits (cpu and npu2 programs):
// //tests/passes:runs_on_cpu_test.

}  // namespace
}  // namespace dk::opt::merge_multi_launch
