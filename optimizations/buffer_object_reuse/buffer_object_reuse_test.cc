#include "optimizations/buffer_object_reuse/buffer_object_reuse.h"

#include <map>
#include <set>
#include <string>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "registry/registry.h"
#include "optimizations/common/program_util.h"
#include "optimizations/testing/tiny.h"

namespace dk::opt::buffer_object_reuse {
namespace {

using testing::BuildChain;
using testing::TinyShape;

const elf::BufferObject* FindBo(const elf::Program& p, const std::string& name) {
  for (const auto& b : p.bos()) {
    if (b.name() == name) return &b;
  }
  return nullptr;
}

TEST(BufferObjectReuse, MatchesGoldens) {
  const auto cases = testing::GoldenCasesOf(kName);
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) EXPECT_TRUE(testing::CheckGolden(c).ok()) << testing::CheckGolden(c);
}

TEST(BufferObjectReuse, CategoriesOnTheBaseline) {
  auto before = BuildChain(TinyShape(), {});
  auto p = BuildChain(TinyShape(), {kName});
  ASSERT_TRUE(p.ok()) << p.status();
  // Every weight is one STATIC BO (one per tensor, shared by every launch).
  std::set<std::string> tensors;
  for (const auto& b : p->bos()) {
    if (b.weight_tensor().empty()) continue;
    EXPECT_EQ(b.category(), elf::STATIC) << b.name();
    EXPECT_TRUE(tensors.insert(b.weight_tensor()).second) << "two BOs for " << b.weight_tensor();
  }
  EXPECT_EQ(tensors.size(), 11u);  // 9 per layer, final norm, tied LM head
  // Only what the host produces is written per run; only what a host step reads
  // comes back; the rest stays on the device.
  std::map<std::string, elf::BoCategory> activations;
  for (const auto& b : p->bos()) {
    if (b.weight_tensor().empty()) activations[b.host_value().empty() ? b.name() : b.host_value()] = b.category();
  }
  for (const char* v : {"h0", "rope.cos", "rope.sin", "L0.attn"}) EXPECT_EQ(activations[v], elf::WRITE) << v;
  for (const char* v : {"L0.q_rot", "L0.k_rot", "L0.v", "logits"}) EXPECT_EQ(activations[v], elf::OUTPUT) << v;
  for (const char* bo : {"L0.attn_norm.y", "L0.q_proj.y", "L0.silu_mul.y", "L0.ffn_add.y", "final_norm.y"}) {
    ASSERT_NE(FindBo(*p, bo), nullptr) << bo;
    EXPECT_EQ(FindBo(*p, bo)->category(), elf::INTERMEDIATE) << bo;
    EXPECT_TRUE(FindBo(*p, bo)->host_value().empty()) << bo;
  }
  EXPECT_EQ(testing::CategoryCounts(*p),
            (std::map<std::string, int>{{"INTERMEDIATE", 12}, {"OUTPUT", 4}, {"STATIC", 11}, {"WRITE", 4}}));
  // Per token the host writes h0 (to 2 groups), cos and sin (2 groups each) and the
  // attention output: 2*128 + 4*16 + 128 bytes, down from every weight and activation.
  EXPECT_GT(BytesWrittenPerToken(*before), 100 * 1024);
  EXPECT_EQ(BytesWrittenPerToken(*p), 448);
  // Groups are untouched: that is merge_multi_launch's job.
  EXPECT_EQ(RunsPerToken(*p), RunsPerToken(*before));
  EXPECT_EQ(RunsPerToken(*p), 16);
  const auto& record = p->lineage(p->lineage_size() - 1);
  EXPECT_EQ(record.pass(), kName);
  EXPECT_TRUE(record.applied());
  EXPECT_NE(record.reason().find("11 weight BOs STATIC"), std::string::npos) << record.reason();
}

TEST(BufferObjectReuse, SecondRunChangesNothingAndSaysSo) {
  for (const char* target : {"cpu", "npu2"}) {
    auto p = BuildChain(TinyShape(), {"layout_alignment", kName}, target);
    ASSERT_TRUE(p.ok()) << p.status();
    const elf::Program once = *p;
    auto changed = testing::RunPass(kName, *p, target);
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_FALSE(*changed) << target;
    ASSERT_EQ(p->lineage_size(), once.lineage_size() + 1);
    const auto& record = p->lineage(p->lineage_size() - 1);
    EXPECT_EQ(record.pass(), kName);
    EXPECT_EQ(record.target(), target);
    EXPECT_FALSE(record.applied());
    EXPECT_NE(record.reason().find("nothing to do"), std::string::npos) << record.reason();
    p->mutable_lineage()->RemoveLast();
    EXPECT_EQ(testing::ProgramDiff(once, *p), "") << target;
  }
}

// Runs on the CPU device (baseline logits, the validator naming mis-categorized
// BOs): //tests/passes:runs_on_cpu_test.

}  // namespace
}  // namespace dk::opt::buffer_object_reuse
