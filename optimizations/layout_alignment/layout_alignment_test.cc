#include "optimizations/layout_alignment/layout_alignment.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "registry/registry.h"
#include "optimizations/common/program_util.h"
#include "optimizations/testing/tiny.h"
#include "graph/baseline.h"

namespace dk::opt::layout_alignment {
namespace {

using testing::BuildChain;
using testing::TinyShape;

const elf::LineageEntry& Last(const elf::Program& p) { return p.lineage(p.lineage_size() - 1); }

// The LM head partitions of a program: [row_begin, row_end) and the logits
// offset each writes, in launch order.
struct Partition {
  int64_t begin, end, offset;
  bool operator==(const Partition& o) const { return begin == o.begin && end == o.end && offset == o.offset; }
};
std::ostream& operator<<(std::ostream& os, const Partition& p) {
  return os << "[" << p.begin << ", " << p.end << ") @" << p.offset;
}
std::vector<Partition> LmHead(const elf::Program& p) {
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p.bos()) bos[b.name()] = &b;
  std::vector<Partition> out;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      const elf::BufferObject *w = nullptr, *y = nullptr;
      for (const auto& b : l.bindings()) {
        if (b.param() == "w") w = bos.at(b.bo());
        if (b.param() == "y") y = bos.at(b.bo());
      }
      if (w == nullptr || w->weight_tensor() != "model.embed_tokens.weight") continue;
      const int64_t end = w->weight_row_end() ? w->weight_row_end() : p.model().vocab();
      EXPECT_EQ(l.params().at("rows"), end - w->weight_row_begin());
      out.push_back({w->weight_row_begin(), end, y->host_offset()});
    }
  }
  return out;
}

TEST(LayoutAlignment, MatchesGoldens) {
  const auto cases = testing::GoldenCasesOf(kName);
  ASSERT_EQ(cases.size(), 1u);
  for (const auto& c : cases) EXPECT_TRUE(testing::CheckGolden(c).ok()) << testing::CheckGolden(c);
}

TEST(LayoutAlignment, PacksEveryGemvWeightAndSplitsTheLmHead) {
  auto p = BuildChain(TinyShape(), {kName});
  ASSERT_TRUE(p.ok()) << p.status();
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p->bos()) bos[b.name()] = &b;
  int gemvs = 0;
  for (const auto& s : p->steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      const registry::Kernel* kernel = nullptr;
      auto variant = registry::FindSymbol(l.kernel_symbol(), &kernel);
      ASSERT_TRUE(variant.ok());
      for (const auto& b : l.bindings()) {
        const elf::BufferObject& bo = *bos.at(b.bo());
        if (kernel->id() == "gemv" && b.param() == "w") {
          ++gemvs;
          EXPECT_EQ(bo.layout(), registry::kPackedPanelV1) << bo.name();
          EXPECT_EQ((*variant)->layout(), registry::kPackedPanelV1) << l.kernel_symbol();
          EXPECT_EQ(bo.size_bytes(), *elf::BoBytes(bo)) << bo.name();
        } else {
          EXPECT_TRUE(bo.layout().empty() || bo.layout() == registry::kRowMajor) << bo.name();
        }
      }
    }
  }
  EXPECT_EQ(gemvs, 7 + 3);  // q, k, v, o, gate, up, down + 3 LM-head partitions
  // Vocab 300 in partitions of at most 128 rows: 3 of 104 rows (a multiple of the
  // 8-row panel), the last 92; each its own group, as the baseline has it.
  EXPECT_EQ(LmHead(*p), (std::vector<Partition>{{0, 104, 0}, {104, 208, 104}, {208, 300, 208}}));
  EXPECT_EQ(RunsPerToken(*p), 16 + 2);
  // Categories are buffer_object_reuse's job: untouched.
  auto base = BuildChain(TinyShape(), {});
  EXPECT_EQ(testing::CategoryCounts(*p).at("WRITE") - testing::CategoryCounts(*base).at("WRITE"), 2);
  EXPECT_TRUE(Last(*p).applied());
  EXPECT_NE(Last(*p).reason().find("LM head split into 3 vocab partitions of 104 rows"), std::string::npos)
      << Last(*p).reason();
}

TEST(LayoutAlignment, NoSplitWhenPartitionRowsIsZeroOnCpu) {
  auto p = BuildChain(TinyShape(), {kName}, "cpu", /*partition_rows=*/0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(LmHead(*p), (std::vector<Partition>{{0, 300, 0}}));
  EXPECT_EQ(RunsPerToken(*p), 16);
}

TEST(LayoutAlignment, NegativePartitionRowsAreRefused) {
  auto p = BuildChain(TinyShape(), {kName}, "cpu", /*partition_rows=*/-8);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("layout_alignment option lm_head_partition_rows -8 is negative"),
            std::string::npos)
      << p.status();
}

TEST(LayoutAlignment, AfterMergeThePartitionsStayInTheLmHeadGroup) {
  auto p = BuildChain(TinyShape(), {"merge_multi_launch", kName});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(RunsPerToken(*p), 3);
  EXPECT_EQ(LmHead(*p).size(), 3u);
  int lm_head_launches = 0;
  for (const auto& s : p->steps()) {
    if (s.has_group() && s.group().name() == "lm_head") lm_head_launches = s.group().launches_size();
  }
  EXPECT_EQ(lm_head_launches, 1 + 3);
}

TEST(LayoutAlignment, PartitionGroupNamesStayUniqueAfterAnNpu2Merge) {
  // On npu2 the tiny LM head (300 rows: no tile fits) runs alone as "lm_head" and
  // the final norm's group is "lm_head.part0"; the partitions take the next names.
  auto p = BuildChain(TinyShape(), {"merge_multi_launch", kName}, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> names;
  for (const auto& s : p->steps()) {
    if (s.has_group() && s.group().layer() < 0) names.push_back(s.group().name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"lm_head.part0", "lm_head.part1", "lm_head.part2",
                                             "lm_head.part3"}));
  EXPECT_EQ(LmHead(*p).size(), 3u);
}

TEST(LayoutAlignment, Npu2CapsLmHeadPartitionsAt16384Rows) {
  elf::ModelShape m = TinyShape();
  m.set_vocab(40000);
  for (int64_t requested : {int64_t{0}, int64_t{16384}, int64_t{100000}}) {
    SCOPED_TRACE(requested);
    auto p = BuildChain(m, {kName}, "npu2", requested);
    ASSERT_TRUE(p.ok()) << p.status();
    // 3 partitions of 13336 rows (the last 13328), each <= 16384.
    EXPECT_EQ(LmHead(*p), (std::vector<Partition>{{0, 13336, 0}, {13336, 26672, 13336}, {26672, 40000, 26672}}));
    EXPECT_EQ(Last(*p).target(), "npu2");
  }
  // On cpu the requested size alone decides.
  auto cpu = BuildChain(m, {kName}, "cpu", 100000);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(LmHead(*cpu).size(), 1u);
}

TEST(LayoutAlignment, SecondRunChangesNothingAndSaysSo) {
  for (const char* target : {"cpu", "npu2"}) {
    for (const std::vector<std::string>& chain :
         {std::vector<std::string>{kName}, {"buffer_object_reuse", "merge_multi_launch", kName}}) {
      SCOPED_TRACE(std::string(target) + " after " + chain.front());
      auto p = BuildChain(TinyShape(), chain, target);
      ASSERT_TRUE(p.ok()) << p.status();
      const elf::Program once = *p;
      // Even with a different partition size: an LM head that is already split stays.
      auto changed = testing::RunPass(kName, *p, target, 64);
      ASSERT_TRUE(changed.ok()) << changed.status();
      EXPECT_FALSE(*changed);
      EXPECT_FALSE(Last(*p).applied());
      EXPECT_NE(Last(*p).reason().find("nothing to do"), std::string::npos) << Last(*p).reason();
      p->mutable_lineage()->RemoveLast();
      EXPECT_EQ(testing::ProgramDiff(once, *p), "");
    }
  }
}

// Runs on the CPU device with the baseline's logits: //tests/passes:runs_on_cpu_test.

}  // namespace
}  // namespace dk::opt::layout_alignment
