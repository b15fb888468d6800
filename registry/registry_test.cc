#include "registry/registry.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dk::registry {
namespace {

TEST(Registry, CompiledInDataParses) {
  const Registry& r = Get();
  EXPECT_GE(r.kernels_size(), 8);
  for (const char* id : {"gemv", "rmsnorm", "rope", "silu_mul", "add", "embedding",
                         "attention", "topk"}) {
    EXPECT_TRUE(FindKernel(id).ok()) << id;
  }
  EXPECT_TRUE((*FindKernel("attention"))->host_only());
  EXPECT_FALSE((*FindKernel("gemv"))->host_only());
}

TEST(Registry, TwoKSpecializationsAreDistinctSymbols) {
  auto k2048 = SelectVariant("gemv", kRowMajor, 2048);
  auto k8192 = SelectVariant("gemv", kRowMajor, 8192);
  ASSERT_TRUE(k2048.ok() && k8192.ok());
  EXPECT_EQ((*k2048)->symbol(), "dk_gemv_bf16_rowmajor_k2048");
  EXPECT_EQ((*k8192)->symbol(), "dk_gemv_bf16_rowmajor_k8192");
  // No specialization for K=1000: the generic variant.
  EXPECT_EQ((*SelectVariant("gemv", kRowMajor, 1000))->symbol(), "dk_gemv_bf16_rowmajor");
  EXPECT_EQ((*SelectVariant("gemv", kPackedPanelV1, 2048))->symbol(), "dk_gemv_bf16_packed_k2048");
  const Kernel* kernel = nullptr;
  ASSERT_TRUE(FindSymbol("dk_gemv_bf16_packed_k8192", &kernel).ok());
  EXPECT_EQ(kernel->id(), "gemv");
  EXPECT_EQ(FindSymbol("dk_gemv_bf16_k3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(SelectVariant("nope", "", 0).ok());
}

TEST(Registry, BlockFormatVariantsAreSelectedOnlyByTheirFormat) {
  for (const char* format : {"q8_0", "q4_0", "q4_1", "q5_0", "q4_k", "q6_k"}) {
    SCOPED_TRACE(format);
    auto v = SelectVariant("gemv", kRowMajor, 576, format);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ((*v)->block_format(), format);
    EXPECT_EQ((*v)->symbol(), absl::StrCat("dk_gemv_", format, "_rowmajor"));
  }
  // No packed block-format variant; the plain bf16 choice never lands on a block one.
  EXPECT_FALSE(SelectVariant("gemv", kPackedPanelV1, 576, "q8_0").ok());
  EXPECT_EQ((*SelectVariant("gemv", kRowMajor, 1000, ""))->block_format(), "");
  EXPECT_FALSE(Parse(R"pb(kernels { id: "g" variants { symbol: "s" block_format: "q5_k" } })pb").ok());
}

TEST(Registry, CpuTargetHasNoLimits) {
  auto cpu = FindTarget("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE(CheckGemv(**cpu, 128256, 2048).ok());
  EXPECT_TRUE(CheckGemv(**cpu, 2048, 8192).ok());
  EXPECT_TRUE(CheckGroupSize(**cpu, 100).ok());
}

TEST(Registry, Npu2GemvLimitsFromTheReferenceDeployment) {
  auto npu = FindTarget("npu2");
  ASSERT_TRUE(npu.ok());
  // herd_m 8: tile_m <= 8 at K=2048 (8*8*2048*2 + 8*8*2 = 262272 <= 512 KiB;
  // tile_m 16 would need 524544 > 524288).
  auto q = CheckGemv(**npu, 2048, 2048);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->tile_m, 8);
  auto kv = CheckGemv(**npu, 512, 2048);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->tile_m, 8);
  // K=8192 (down projection) exceeds the DMA-repeat limit.
  auto down = CheckGemv(**npu, 2048, 8192);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(down.status().message().find("K=8192 exceeds npu2 K_max 8160"), std::string::npos)
      << down.status();
  // Tall LM heads must be partitioned into <= 16384-row launches.
  EXPECT_FALSE(CheckGemv(**npu, 128256, 2048).ok());
  EXPECT_TRUE(CheckGemv(**npu, 16384, 2048).ok());
  EXPECT_FALSE(CheckGemv(**npu, 2048, 2000).ok());  // K % 64
  EXPECT_TRUE(CheckGroupSize(**npu, 8).ok());
  EXPECT_FALSE(CheckGroupSize(**npu, 9).ok());
}

TEST(Registry, Npu2PrefillChunksAreWholeRowTilesInTheLargestHerd) {
  auto npu = FindTarget("npu2");
  ASSERT_TRUE(npu.ok());
  // tile_m 64: 512 rows are a herd of 8 tiles, 192 of 1 (3 tiles: 2 does not divide
  // them), 128 of 2, 2048 of 8.
  const std::pair<int64_t, int64_t> herds[] = {{512, 8}, {2048, 8}, {192, 1}, {128, 2}, {64, 1}, {256, 4}};
  for (const auto& [rows, herd] : herds) {
    auto got = CheckPrefillRows(**npu, rows);
    ASSERT_TRUE(got.ok()) << rows << ": " << got.status();
    EXPECT_EQ(*got, herd) << rows;
  }
  auto odd = CheckPrefillRows(**npu, 100);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(odd.status().message().find("npu2 runs a prompt chunk as GEMMs over tiles of 64 token rows: the "
                                        "chunk must be a multiple of 64, not 100"),
            std::string::npos)
      << odd.status();
  EXPECT_FALSE(CheckPrefillRows(**npu, 0).ok());
  // Every K of the five models' GEMMs is a multiple of the L1 K tile 32; 1000 is not.
  for (int64_t k : {576, 640, 896, 1536, 4864, 8192}) EXPECT_TRUE(CheckPrefillGemm(**npu, k).ok()) << k;
  EXPECT_FALSE(CheckPrefillGemm(**npu, 1000).ok());
  // The cpu target runs any chunk through its decode groups.
  auto cpu = FindTarget("cpu");
  ASSERT_TRUE(cpu.ok());
  auto any = CheckPrefillRows(**cpu, 7);
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(*any, 0);
}

TEST(Registry, Npu2KSplitGemvReducesK512AtATime) {
  auto npu = FindTarget("npu2");
  ASSERT_TRUE(npu.ok());
  // The down projection of Llama-3.2-1B: K=8192 > K_max, 16 chunks of 512; the tiles
  // are sized for K=512, so tile_m 32 fits (8*32*512*2 + 8*32*2 = 262656 bytes).
  auto down = CheckKSplitGemv(**npu, 2048, 8192);
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_EQ(down->k_chunk, 512);
  EXPECT_EQ(down->tile_m, 32);
  // Qwen2.5-0.5B's O (K=896) and down (K=4864): no multiple of 512.
  for (int64_t k : {896, 4864}) {
    auto st = CheckKSplitGemv(**npu, 896, k).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find(absl::StrCat("K=", k, " is not a multiple of npu2's K-split chunk 512")),
              std::string::npos)
        << st;
  }
  EXPECT_FALSE(CheckKSplitGemv(**npu, 2048, 8000).ok());  // K % 64 first
  // The cpu target has no K-split GEMV (it has no K limit either).
  auto cpu = FindTarget("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_NE(CheckKSplitGemv(**cpu, 2048, 8192).status().message().find("cpu has no K-split GEMV"),
            std::string::npos);
}

TEST(Registry, ParseRejectsBadData) {
  EXPECT_FALSE(Parse("kernels { id: \"a\" variants { symbol: \"x\" } }"
                     "kernels { id: \"a\" variants { symbol: \"y\" } }").ok());
  EXPECT_FALSE(Parse("kernels { id: \"a\" variants { symbol: \"x\" } }"
                     "kernels { id: \"b\" variants { symbol: \"x\" } }").ok());
  EXPECT_FALSE(Parse("kernels { id: \"a\" }").ok());
  const auto syntax = Parse("kernels { id: ").status();
  EXPECT_EQ(syntax.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(syntax.message().find("line"), std::string::npos) << syntax;
  EXPECT_EQ(FindTarget("tpu").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dk::registry
