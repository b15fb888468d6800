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

// On npu2, a down GEMV with K = 8192 > K_max 8160 cannot join a group.
elf::ModelShape NpuShape(int ffn, int vocab) {
  elf::ModelShape m = TinyShape();
  m.set_name("tiny_npu");
  m.set_ffn(ffn);
  m.set_vocab(vocab);
  return m;
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
  for (const auto& s : p->steps()) kinds.push_back(s.has_group() ? "group" : s.host().kind());
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
  auto changed = merge_multi_launch::Run(*p, **target, options);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(RunsPerToken(*p), 1 + 8 + 2);
  EXPECT_EQ(Groups(*p).front(), (GroupInfo{"L0.rms_gemv_rope", 6}));
  EXPECT_NE(Last(*p).reason().find("o_gemv_ffn not selected by `groups`"), std::string::npos)
      << Last(*p).reason();
  EXPECT_TRUE(elf::ValidateProgram(*p).ok());
}

TEST(MergeMultiLaunch, Npu2KeepsADownGemvBeyondKMaxSeparate) {
  auto p = BuildChain(NpuShape(8192, 512), {kName}, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{{"L0.rms_gemv_rope", 6},
                                                {"L0.o_gemv_ffn.part0", 6},
                                                {"L0.down_proj", 1},
                                                {"L0.o_gemv_ffn.part1", 1},
                                                {"lm_head", 2}}));
  EXPECT_EQ(Last(*p).target(), "npu2");
  EXPECT_TRUE(Last(*p).applied());
  EXPECT_NE(Last(*p).reason().find("L0.down_proj GEMV: K=8192 exceeds npu2 K_max 8160; kept as a "
                                   "separate group"),
            std::string::npos)
      << Last(*p).reason();
  // The same program on cpu has no such limit.
  auto cpu = BuildChain(NpuShape(8192, 512), {kName}, "cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(RunsPerToken(*cpu), 3);
}

TEST(MergeMultiLaunch, Npu2KeepsAnLmHeadNoTileFitsSeparateUnderADistinctName) {
  // Vocab 300 is no multiple of tile_m * herd_m: the LM-head GEMV runs alone and
  // keeps its group's name; the final norm left over must not take that name too.
  auto p = BuildChain(TinyShape(), {kName}, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{{"L0.rms_gemv_rope", 6},
                                                {"L0.o_gemv_ffn.part0", 6},
                                                {"L0.down_proj", 1},
                                                {"L0.o_gemv_ffn.part1", 1},
                                                {"lm_head.part0", 1},
                                                {"lm_head", 1}}));
  EXPECT_NE(Last(*p).reason().find("L0.down_proj GEMV: K=96 is not a multiple of 64 required by npu2"),
            std::string::npos)
      << Last(*p).reason();
}

TEST(MergeMultiLaunch, Npu2GroupsHoldAtMostEightLaunches) {
  // 16 LM-head partitions of 32 rows + the final norm = 17 launches: 8 + 8 + 1.
  auto p = BuildChain(NpuShape(128, 512), {"layout_alignment", kName}, "npu2", 32);
  ASSERT_TRUE(p.ok()) << p.status();
  auto target = registry::FindTarget("npu2");
  for (const auto& s : p->steps()) {
    if (!s.has_group()) continue;
    EXPECT_TRUE(registry::CheckGroupSize(**target, s.group().launches_size()).ok()) << s.group().name();
  }
  EXPECT_EQ(Groups(*p), (std::vector<GroupInfo>{{"L0.rms_gemv_rope", 6},
                                                {"L0.o_gemv_ffn", 8},
                                                {"lm_head.part0", 8},
                                                {"lm_head.part1", 8},
                                                {"lm_head.part2", 1}}));
  EXPECT_NE(Last(*p).reason().find("lm_head: more than 8 launches exceed npu2's limit per group; split"),
            std::string::npos)
      << Last(*p).reason();
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
                        Case{NpuShape(8192, 512), {kName}, "npu2", 128},
                        Case{NpuShape(128, 512), {"layout_alignment", kName}, "npu2", 32}}) {
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
