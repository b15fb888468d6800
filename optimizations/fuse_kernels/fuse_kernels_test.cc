#include "optimizations/fuse_kernels/fuse_kernels.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "optimizations/common/program_util.h"
#include "optimizations/testing/tiny.h"
#include "registry/registry.h"

namespace dk::opt::fuse_kernels {
namespace {

using testing::BuildChain;
using testing::TinyShape;

const std::vector<std::string> kBefore = {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"};

std::vector<std::string> With(std::vector<std::string> chain, const std::string& pass) {
  chain.push_back(pass);
  return chain;
}

// Per group: "name: kernel id, kernel id, ...".
std::vector<std::string> Kernels(const elf::Program& p) {
  std::vector<std::string> out;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    std::string line = s.group().name() + ":";
    for (const auto& l : s.group().launches()) line += " " + (*KernelOf(l))->id();
    out.push_back(line);
  }
  return out;
}

const elf::LineageEntry& Last(const elf::Program& p) { return p.lineage(p.lineage_size() - 1); }

TEST(FuseKernels, MatchesGoldens) {
  const auto cases = testing::GoldenCasesOf(kName);
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) EXPECT_TRUE(testing::CheckGolden(c).ok()) << testing::CheckGolden(c);
}

TEST(FuseKernels, FusesEveryGemvWithItsNeighboursAfterTheMerge) {
  auto p = BuildChain(TinyShape(2), With(kBefore, kName));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Kernels(*p), (std::vector<std::string>{
                             "L0.rms_gemv_rope: rms_gemv3 rope rope",
                             "L0.o_gemv_ffn: gemv_add rms_gemv_silu_mul gemv_add",
                             "L1.rms_gemv_rope: rms_gemv3 rope rope",
                             "L1.o_gemv_ffn: gemv_add rms_gemv_silu_mul gemv_add",
                             // the tiny LM head is split into 3 partitions
                             "lm_head: rms_gemv3",
                         }));
  const auto& rec = Last(*p);
  EXPECT_EQ(rec.pass(), kName);
  EXPECT_TRUE(rec.applied());
  EXPECT_TRUE(absl::StrContains(rec.reason(), "launches per token 32 -> 13, GEMV passes 17 -> 9")) << rec.reason();
  EXPECT_TRUE(absl::StrContains(rec.reason(), "gemv_add x4, rms_gemv3 x3, rms_gemv_silu_mul x2")) << rec.reason();
  // The values fused away are gone with their BOs; the ones the host reads stay.
  for (const auto& b : p->bos()) {
    for (const char* gone : {"L0.attn_norm.y", "L0.o_proj.y", "L0.gate_proj.y", "L0.up_proj.y",
                             "L0.down_proj.y", "final_norm.y"}) {
      EXPECT_NE(b.name(), gone);
    }
  }
  // Each fused launch binds the parent's weights, in the parent's layout.
  int packed = 0;
  for (const auto& s : p->steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) packed += absl::StrContains(l.kernel_symbol(), "_bf16_packed");
  }
  EXPECT_EQ(packed, 9);
  EXPECT_TRUE(elf::ValidateProgram(*p).ok());
}

TEST(FuseKernels, TheFusionsOptionPicksThem) {
  auto p = testing::BuildChain(TinyShape(), kBefore);
  ASSERT_TRUE(p.ok()) << p.status();
  auto target = registry::FindTarget("cpu");
  ASSERT_TRUE(target.ok());
  auto result = fuse_kernels::Run(*p, **target, Options{{"gemv_add"}});
  ASSERT_TRUE(result.ok() && result->changed) << result.status();
  EXPECT_EQ(Kernels(*p), (std::vector<std::string>{
                             "L0.rms_gemv_rope: rmsnorm gemv gemv gemv rope rope",
                             "L0.o_gemv_ffn: gemv_add rmsnorm gemv gemv silu_mul gemv_add",
                             "lm_head: rmsnorm gemv gemv gemv",
                         }));
  EXPECT_FALSE(fuse_kernels::Run(*p, **target, Options{{"no_such"}}).ok());
}

TEST(FuseKernels, NothingToFuseBeforeTheMerge) {
  auto p = BuildChain(TinyShape(), {"layout_alignment", "buffer_object_reuse"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto target = registry::FindTarget("cpu");
  auto result = fuse_kernels::Run(*p, **target);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->changed);
  EXPECT_TRUE(absl::StrContains(result->summary, "run merge_multi_launch")) << result->summary;
}

TEST(FuseKernels, AValueTheHostReadsIsNotFusedAway) {
  auto p = testing::BuildChain(TinyShape(), kBefore);
  ASSERT_TRUE(p.ok()) << p.status();
  // The host reads the attention norm's output: q/k/v cannot take the norm in.
  for (auto& b : *p->mutable_bos()) {
    if (b.name() == "L0.attn_norm.y") {
      b.set_category(elf::OUTPUT);
      b.set_host_value("L0.xn");
    }
  }
  auto target = registry::FindTarget("cpu");
  auto result = fuse_kernels::Run(*p, **target);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Kernels(*p)[0], "L0.rms_gemv_rope: rmsnorm gemv gemv gemv rope rope");
  EXPECT_TRUE(absl::StrContains(result->summary, "left unfused: L*.rms_gemv_rope rmsnorm: its output leaves the group"))
      << result->summary;
}

TEST(FuseKernels, QuantizedWeightsFuseIntoTheirFormatsVariant) {
  auto p = BuildChain(TinyShape(), {"layout_alignment", "buffer_object_reuse", "merge_multi_launch",
                                    "quantize_weights", kName});
  ASSERT_TRUE(p.ok()) << p.status();
  // q8_0 keeps the LM head bf16 (packed): its partitions fuse into the bf16 variant.
  std::vector<std::string> symbols;
  for (const auto& s : p->steps()) {
    if (s.has_group()) symbols.push_back(s.group().launches(0).kernel_symbol());
  }
  EXPECT_EQ(symbols, (std::vector<std::string>{"dk_rms_gemv3_q8_0_rowmajor", "dk_gemv_add_q8_0_rowmajor",
                                               "dk_rms_gemv3_bf16_packed"}));
}

TEST(FuseKernels, NpuPlansFuseToo) {
  auto p = BuildChain(TinyShape(), With(kBefore, kName), "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(Last(*p).applied()) << Last(*p).reason();
  EXPECT_EQ(Last(*p).target(), "npu2");
}

}  // namespace
}  // namespace dk::opt::fuse_kernels
