// The prefill plan (elf/prefill_plan.h) of the tiny model's cpu and npu2 programs,
// and the prompt chunk the CPU device takes for them.
#include "elf/prefill_plan.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "elf/stats.h"
#include "gtest/gtest.h"
#include "optimizations/testing/tiny.h"
#include "registry/registry.h"
#include "runtime/cpu/session.h"

namespace dk {
namespace {

using opt::testing::BuildChain;
using opt::testing::TinyShape;

const std::vector<std::string> kMerged = {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"};

elf::ModelShape Shape(int ffn) {
  elf::ModelShape shape = TinyShape(2);
  shape.set_name("tiny_npu");
  shape.set_ffn(ffn);
  shape.set_vocab(512);
  shape.set_max_context(256);
  return shape;
}

const registry::TargetConstraints& Target(const elf::Program& p) {
  auto target = elf::ProgramTarget(p);
  EXPECT_TRUE(target.ok()) << target.status();
  return **target;
}

// "name: group, group" for each run of layer 0 and the model-wide ones.
std::vector<std::string> Layer0(const elf::PrefillPlan& plan) {
  std::vector<std::string> runs;
  for (const elf::PrefillRun& r : plan.runs) {
    if (r.layer <= 0) runs.push_back(r.name + ": " + absl::StrJoin(r.groups, ", "));
  }
  return runs;
}

// O's K (64) and down's K (96) are no multiples of the K-split chunk: the decode plan
// runs O, gate, up and down apart (down alone: K 96 is no multiple of npu2's GEMV K
// multiple 64, its add after it); the prefill's GEMMs need no K-split, so O .. up run
// as one, and the down GEMM (K 96, no multiple of 512) leads a run of its own.
TEST(PrefillPlan, Npu2JoinsTheKSplitPartsAndLetsAnUnalignedDownLead) {
  auto p = BuildChain(Shape(96), kMerged, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(elf::RunsPerToken(*p), 2 * 6 + 1);
  auto plan = elf::PlanPrefill(*p, Target(*p), 512, /*merged=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->herd, 8);
  EXPECT_EQ(Layer0(*plan), (std::vector<std::string>{
                               "L0.rms_gemms_rope: L0.rms_gemv_rope",
                               "L0.o_ffn_head: L0.o_gemv_ffn.part0, L0.o_gemv_ffn.part1, L0.o_gemv_ffn.part2",
                               "L0.down_add: L0.down_proj, L0.o_gemv_ffn.part3",
                               "lm_head: lm_head",
                           }));
  EXPECT_EQ(elf::DescribePrefill(*plan, 2),
            "npu2, chunks of 512 rows as GEMMs in herds of 8 x 64 rows: 3 per layer (all 2 layers) + 1 "
            "model-wide = 7 per chunk");
  // The merge's lineage says so.
  EXPECT_NE(p->lineage(p->lineage_size() - 1).reason().find("prefill npu2, chunks of 512 rows"), std::string::npos)
      << p->lineage(p->lineage_size() - 1).reason();
}

// Down's K 512: the whole O + FFN merge is one prefill run.
TEST(PrefillPlan, Npu2RunsOAndFfnAsOneWhenTheDownGemmIsAligned) {
  auto p = BuildChain(Shape(512), kMerged, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  auto plan = elf::PlanPrefill(*p, Target(*p), 192, /*merged=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->herd, 1);  // 3 tiles of 64 rows: neither 8, 4 nor 2 divide them
  EXPECT_EQ(Layer0(*plan)[1],
            "L0.o_ffn: L0.o_gemv_ffn.part0, L0.o_gemv_ffn.part1, L0.o_gemv_ffn.part2, L0.o_gemv_ffn.part3");
  EXPECT_EQ(elf::PrefillRunsPerLayer(*plan, 2), (std::map<int, int>{{-1, 1}, {0, 2}, {1, 2}}));
  // A target of at most 3 launch bodies per run splits it again: O, add, norm; gate,
  // up, SiLU*mul; down and its add.
  registry::TargetConstraints tight = Target(*p);
  tight.set_max_launches_per_group(3);
  auto split = elf::PlanPrefill(*p, tight, 192, /*merged=*/true);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(Layer0(*split), (std::vector<std::string>{
                                "L0.rms_gemms_rope: L0.rms_gemv_rope",
                                "L0.o_ffn.part0: L0.o_gemv_ffn.part0",
                                "L0.o_ffn.part1: L0.o_gemv_ffn.part1, L0.o_gemv_ffn.part2",
                                "L0.o_ffn.part2: L0.o_gemv_ffn.part3",
                                "lm_head: lm_head",
                            }));
}

TEST(PrefillPlan, Npu2RefusesAChunkOfNoWholeRowTilesAndADownGemmInsideAGroup) {
  auto p = BuildChain(Shape(96), kMerged, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  auto odd = elf::PlanPrefill(*p, Target(*p), 100, /*merged=*/true);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(odd.status().message().find("the chunk must be a multiple of 64, not 100"), std::string::npos)
      << odd.status();
  // The unaligned down GEMM moved behind the up GEMM inside one decode group: no plan.
  elf::Program moved = *p;
  for (int s = 0; s + 1 < moved.steps_size(); ++s) {
    if (!moved.steps(s).has_group() || moved.steps(s).group().name() != "L0.o_gemv_ffn.part2") continue;
    auto* g = moved.mutable_steps(s)->mutable_group();
    for (const auto& l : moved.steps(s + 1).group().launches()) *g->add_launches() = l;
    moved.mutable_steps()->DeleteSubrange(s + 1, 1);
    break;
  }
  auto inside = elf::PlanPrefill(moved, Target(moved), 512, /*merged=*/true);
  EXPECT_EQ(inside.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(inside.status().message().find("L0.o_gemv_ffn.part2: its down GEMM (K=96, no multiple of 512) must "
                                           "lead a npu2 prefill run"),
            std::string::npos)
      << inside.status();
}

// A cpu program runs a chunk of any rows through its decode groups; so does an npu2
// program before merge_multi_launch (its groups are no merge's).
TEST(PrefillPlan, CpuAndUnmergedProgramsRunTheDecodeGroups) {
  auto p = BuildChain(Shape(96), kMerged, "cpu");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(elf::DecodeMerged(*p));
  auto plan = elf::PlanPrefill(*p, Target(*p), 7, /*merged=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->herd, 0);
  EXPECT_EQ(elf::PrefillRunsPerLayer(*plan, 2), elf::RunsPerLayer(*p));
  auto unmerged = BuildChain(Shape(96), {"layout_alignment", "buffer_object_reuse"}, "npu2");
  ASSERT_TRUE(unmerged.ok()) << unmerged.status();
  ASSERT_FALSE(elf::DecodeMerged(*unmerged));
  auto alone = elf::PlanPrefill(*unmerged, Target(*unmerged), 64, elf::DecodeMerged(*unmerged));
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->herd, 1);
  EXPECT_EQ(elf::PrefillRunsPerLayer(*alone, 2), elf::RunsPerLayer(*unmerged));
}

// The CPU device takes an npu2 program's chunk in whole row tiles: the default rounded
// down to them, a requested chunk of no whole tiles refused.
TEST(PrefillPlan, TheCpuDeviceTakesAnNpu2ChunkInWholeRowTiles) {
  auto p = BuildChain(Shape(96), kMerged, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  auto weights = runtime::LoadWeightsSpec("synthetic:1", p->model());
  ASSERT_TRUE(weights.ok()) << weights.status();
  runtime::SessionOptions options;
  options.max_context = 200;
  options.validate = true;
  auto s = runtime::CpuSession::Open(*p, "tiny_npu2.elf", *weights, options);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->decoder().prefill_rows(), 192);
  options.prefill_rows = 100;
  auto odd = runtime::CpuSession::Open(*p, "tiny_npu2.elf", *weights, options);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(odd.status().message().find("npu2 runs a prompt chunk as GEMMs over tiles of 64 token rows"),
            std::string::npos)
      << odd.status();
  options.max_context = 40;  // shorter than one tile: one chunk of the context
  options.prefill_rows = 0;
  auto small = runtime::CpuSession::Open(*p, "tiny_npu2.elf", *weights, options);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)->decoder().prefill_rows(), 40);
}

}  // namespace
}  // namespace dk
