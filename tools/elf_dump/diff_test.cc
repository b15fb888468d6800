#include "tools/elf_dump/diff.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "optimizations/passes.h"
#include "registry/registry.h"
#include "optimizations/testing/tiny.h"

namespace dk::elf_dump {
namespace {

using opt::testing::BuildChain;
using opt::testing::TinyShape;

std::string Diff(const std::vector<std::string>& a, const std::vector<std::string>& b, int layers = 1,
                 const std::string& target = "cpu") {
  auto pa = BuildChain(TinyShape(layers), a, target);
  auto pb = BuildChain(TinyShape(layers), b, target);
  EXPECT_TRUE(pa.ok() && pb.ok());
  return DiffPrograms(*pa, *pb, "a.elf", "b.elf");
}

void ExpectHas(const std::string& text, const std::string& line) {
  EXPECT_NE(text.find(line), std::string::npos) << "no \"" << line << "\" in:\n" << text;
}

TEST(Diff, SameProgramHasNoDifferences) {
  const std::string d = Diff({"layout_alignment"}, {"layout_alignment"});
  EXPECT_EQ(d,
            "--- a.elf (baseline -> layout_alignment)\n+++ b.elf (baseline -> layout_alignment)\n"
            "no differences\n");
}

TEST(Diff, LayoutAlignmentShowsLayoutsSymbolsAndTheLmHeadSplit) {
  const std::string d = Diff({}, {"layout_alignment"});
  ExpectHas(d, "lineage added: layout_alignment [cpu] applied: 10 GEMV weights");
  ExpectHas(d, "runs per token: 16 -> 18 (launches 16 -> 18, host steps 5 -> 5)\n");
  ExpectHas(d, "groups:\n  split: lm_head -> lm_head.part0 + lm_head.part1 + lm_head.part2\n");
  ExpectHas(d, "layouts changed:\n  L0.q_proj.w: row_major -> packed_panel_v1\n");
  ExpectHas(d, "BOs removed (2): lm_head.w, lm_head.y\n");
  ExpectHas(d, "BOs added (6): lm_head.w.part* [WRITE, packed_panel_v1] (x3), lm_head.y.part* [OUTPUT] (x3)\n");
  ExpectHas(d, "kernel symbols:\n  dk_gemv_bf16_rowmajor -> dk_gemv_bf16_packed: 10 launches\n"
               "  - dk_gemv_bf16_rowmajor (no longer linked)\n  + dk_gemv_bf16_packed (newly linked)\n");
  EXPECT_EQ(d.find("BO categories changed"), std::string::npos) << d;
}

TEST(Diff, BufferObjectReuseShowsCategoriesByPattern) {
  const std::string d = Diff({"layout_alignment"}, {"layout_alignment", "buffer_object_reuse"}, 2);
  ExpectHas(d, "host writes per token: ");
  ExpectHas(d, "BOs: 98 -> 59 (WRITE 66 -> 5, STATIC 0 -> 22, INTERMEDIATE 0 -> 23, OUTPUT 32 -> 9)\n");
  ExpectHas(d, "BO categories changed:\n  L*.attn_norm.w: WRITE -> STATIC  (x2)\n"
               "  L*.attn_norm.y: OUTPUT -> INTERMEDIATE  (x2)\n");
  ExpectHas(d, "  lm_head.w.part*: WRITE -> STATIC  (x3)\n");
  ExpectHas(d, "BOs removed (39): L*.q_proj.x (x2), ");
  // Groups and kernels are untouched by this pass.
  EXPECT_EQ(d.find("groups:"), std::string::npos) << d;
  EXPECT_EQ(d.find("runs per token"), std::string::npos) << d;
  EXPECT_EQ(d.find("kernel symbols"), std::string::npos) << d;
}

TEST(Diff, MergeShowsWhichGroupsBecameWhich) {
  const std::string d = Diff({"layout_alignment", "buffer_object_reuse"},
                             {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"}, 2);
  ExpectHas(d, "runs per token: 32 -> 5 (launches 32 -> 32, host steps 7 -> 7)\n");
  ExpectHas(d, "groups:\n"
               "  merged: L*.rms_gemv_rope <- L*.attn_norm + L*.q_proj + L*.k_proj + L*.v_proj + L*.rope_q + "
               "L*.rope_k  (x2)\n"
               "  merged: L*.o_gemv_ffn <- L*.o_proj + L*.attn_add + L*.ffn_norm + L*.gate_proj + L*.up_proj + "
               "L*.silu_mul + L*.down_proj + L*.ffn_add  (x2)\n"
               "  merged: lm_head <- final_norm + lm_head.part0 + lm_head.part1 + lm_head.part2\n");
}

TEST(Diff, Npu2SplitsAndRenamesAreNamed) {
  const std::string d = Diff({}, {"merge_multi_launch"}, 1, "npu2");
  // O's K (64) is no multiple of npu2's K-split chunk: O + FFN runs one group per GEMV.
  ExpectHas(d, "  merged: L0.o_gemv_ffn.part0 <- L0.o_proj + L0.attn_add + L0.ffn_norm\n");
  ExpectHas(d, "  renamed: L0.gate_proj -> L0.o_gemv_ffn.part1\n");
  ExpectHas(d, "  merged: L0.o_gemv_ffn.part2 <- L0.up_proj + L0.silu_mul\n");
  ExpectHas(d, "  renamed: L0.ffn_add -> L0.o_gemv_ffn.part3\n");
  ExpectHas(d, "  renamed: final_norm -> lm_head.part0\n");
  // down_proj runs alone, as before: no group line names it.
  const size_t begin = d.find("groups:\n"), end = d.find("\nBOs: ");
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos) << d;
  EXPECT_EQ(d.substr(begin, end - begin).find("L0.down_proj"), std::string::npos) << d;
}

TEST(Diff, UnrelatedLineageIsCalledOut) {
  const std::string d = Diff({"merge_multi_launch"}, {"buffer_object_reuse"});
  ExpectHas(d, "lineage: b.elf is not derived from a.elf (first difference at entry 1)\n"
               "  - merge_multi_launch [cpu] applied: ");
  ExpectHas(d, "  + buffer_object_reuse [cpu] applied: ");
}

// A gguf stage after a q8_0 one: the block formats, and that the blocks are the
// file's own, show in the layouts.
TEST(Diff, BlockFormatsAndBlocksAsStoredShow) {
  auto q8 = BuildChain(TinyShape(1), {"quantize_weights"});
  ASSERT_TRUE(q8.ok()) << q8.status();
  elf::Program gguf = *q8;
  std::vector<std::string> stored;
  for (const auto& b : q8->bos()) {
    if (!b.weight_tensor().empty()) stored.push_back(absl::StrCat(b.weight_tensor(), "=Q4_1"));
  }
  auto changed = opt::RunPass("quantize_weights", gguf, **registry::FindTarget("cpu"),
                              {"scheme=gguf", absl::StrCat("stored=", absl::StrJoin(stored, ","))});
  ASSERT_TRUE(changed.ok() && *changed) << changed.status();
  const std::string d = DiffPrograms(*q8, gguf, "a.elf", "b.elf");
  ExpectHas(d, "L0.q_proj.w: row_major q8_0 -> row_major q4_1 (as stored)\n");
  ExpectHas(d, "lm_head.w: row_major -> row_major q4_1 (as stored)\n");
}

TEST(Compact, GroupsLinesThatDifferInLayerOrPartitionNumbers) {
  EXPECT_EQ(Compact({"L0.q.w: A -> B", "L1.q.w: A -> B", "x.part0", "x.part1", "L10.k", "FL0.k"}),
            "  L*.q.w: A -> B  (x2)\n  x.part*  (x2)\n  L10.k\n  FL0.k\n");
}

}  // namespace
}  // namespace dk::elf_dump
