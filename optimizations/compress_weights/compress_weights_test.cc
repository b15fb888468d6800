#include "optimizations/compress_weights/compress_weights.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "optimizations/common/program_util.h"
#include "optimizations/testing/tiny.h"
#include "registry/registry.h"

namespace dk::opt::compress_weights {
namespace {

using testing::BuildChain;
using testing::TinyShape;

const std::vector<std::string> kFused = {"layout_alignment", "buffer_object_reuse", "merge_multi_launch",
                                         "fuse_kernels"};

std::vector<std::string> With(std::vector<std::string> chain, const std::string& pass) {
  chain.push_back(pass);
  return chain;
}

const elf::LineageEntry& Last(const elf::Program& p) { return p.lineage(p.lineage_size() - 1); }

// Weight BO layouts by name.
std::map<std::string, std::string> Layouts(const elf::Program& p) {
  std::map<std::string, std::string> out;
  for (const auto& b : p.bos()) {
    if (!b.weight_tensor().empty() && b.shape_size() == 2) out[b.name()] = b.layout();
  }
  return out;
}

TEST(CompressWeights, MatchesGoldens) {
  const auto cases = testing::GoldenCasesOf(kName);
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) EXPECT_TRUE(testing::CheckGolden(c).ok()) << testing::CheckGolden(c);
}

TEST(CompressWeights, EveryPackedWeightAndItsLaunchesSwitch) {
  auto parent = BuildChain(TinyShape(2), kFused);
  ASSERT_TRUE(parent.ok()) << parent.status();
  auto p = BuildChain(TinyShape(2), With(kFused, kName));
  ASSERT_TRUE(p.ok()) << p.status();
  // Every weight the parent held packed is x12 now, with the x12 layout's size.
  int weights = 0;
  for (const auto& [name, layout] : Layouts(*parent)) {
    if (layout != registry::kPackedPanelV1) continue;
    ++weights;
    EXPECT_EQ(Layouts(*p).at(name), registry::kPackedPanelX12V1) << name;
  }
  EXPECT_EQ(weights, 2 * 7 + 3);  // q k v o gate up down per layer, 3 LM-head partitions
  for (const auto& b : p->bos()) {
    if (b.layout() == registry::kPackedPanelX12V1) EXPECT_EQ(b.size_bytes(), *elf::BoBytes(b)) << b.name();
  }
  // Each launch that read them reads the x12 variant of its kernel, nothing else changed.
  int launches = 0;
  ASSERT_EQ(p->steps_size(), parent->steps_size());
  for (int s = 0; s < p->steps_size(); ++s) {
    if (!p->steps(s).has_group()) continue;
    const auto& g = p->steps(s).group();
    const auto& pg = parent->steps(s).group();
    ASSERT_EQ(g.launches_size(), pg.launches_size());
    for (int i = 0; i < g.launches_size(); ++i) {
      const std::string& was = pg.launches(i).kernel_symbol();
      const std::string& now = g.launches(i).kernel_symbol();
      if (!absl::StrContains(was, "_bf16_packed")) {
        EXPECT_EQ(now, was);
        continue;
      }
      ++launches;
      EXPECT_TRUE(absl::StrContains(now, "_bf16_x12")) << now;
      EXPECT_EQ((*KernelOf(g.launches(i)))->id(), (*KernelOf(pg.launches(i)))->id());
      EXPECT_EQ(g.launches(i).bindings_size(), pg.launches(i).bindings_size());
    }
  }
  EXPECT_EQ(launches, 2 * 4 + 1);  // rms_gemv3, gemv_add, rms_gemv_silu_mul, gemv_add per layer; the LM head
  const auto& rec = Last(*p);
  EXPECT_EQ(rec.pass(), kName);
  EXPECT_TRUE(rec.applied());
  EXPECT_TRUE(absl::StrContains(rec.reason(), "17 GEMV weights")) << rec.reason();
  // The floor's numerator: the compact blocks' bytes, 784 of each 1024 (0.77x; the
  // tiny FFN's 96 columns pad to two 64-column blocks).
  EXPECT_LT(elf::WeightBytesPerToken(*p), elf::WeightBytesPerToken(*parent) * 0.85);
  EXPECT_GT(elf::WeightBytesPerToken(*p), elf::WeightBytesPerToken(*parent) * 0.7);
  EXPECT_TRUE(elf::ValidateProgram(*p).ok());
}

TEST(CompressWeights, UnfusedLaunchesSwitchToo) {
  auto p = BuildChain(TinyShape(), {"layout_alignment", "buffer_object_reuse", kName});
  ASSERT_TRUE(p.ok()) << p.status();
  int x12 = 0, packed = 0;
  for (const auto& s : p->steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      x12 += absl::StrContains(l.kernel_symbol(), "dk_gemv_bf16_x12");
      packed += absl::StrContains(l.kernel_symbol(), "_packed");
    }
  }
  EXPECT_EQ(x12, 7 + 3);
  EXPECT_EQ(packed, 0);
}

TEST(CompressWeights, RowMajorOrQuantizedWeightsStay) {
  // The baseline's weights are row-major: nothing to do.
  elf::Program p = *BuildChain(TinyShape(), {});
  auto changed = testing::RunPass(kName, p);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_TRUE(absl::StrContains(Last(p).reason(), "nothing to do")) << Last(p).reason();
  // After quantize_weights (keep lm_head): only the bf16 LM head compresses.
  auto q = BuildChain(TinyShape(), With(kFused, "quantize_weights"));
  ASSERT_TRUE(q.ok()) << q.status();
  auto c = testing::RunPass(kName, *q);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(*c);
  for (const auto& [name, layout] : Layouts(*q)) {
    EXPECT_EQ(layout == registry::kPackedPanelX12V1, absl::StrContains(name, "lm_head")) << name << " " << layout;
  }
}

TEST(CompressWeights, AWeightStaysWhenOneOfItsLaunchesCannotSwitch) {
  auto p = BuildChain(TinyShape(), kFused);
  ASSERT_TRUE(p.ok()) << p.status();
  // Make one q/k/v launch read f32 x: the x12 kernels take bf16 x.
  std::string qkv_weight;
  for (auto& s : *p->mutable_steps()) {
    if (!s.has_group()) continue;
    for (auto& l : *s.mutable_group()->mutable_launches()) {
      if ((*KernelOf(l))->id() != "rms_gemv3") continue;
      for (auto& b : l.bindings()) {
        if (b.param() == "w0") qkv_weight = b.bo();
      }
      // A plain GEMV of the same weight next to it, reading an f32 x.
      elf::Launch* extra = s.mutable_group()->add_launches();
      *extra = l;
      extra->clear_bindings();
      extra->set_kernel_symbol("dk_gemv_bf16_packed");
      (*extra->mutable_params()).clear();
      (*extra->mutable_params())["rows"] = 64;
      (*extra->mutable_params())["cols"] = 64;
      elf::BufferObject* x = p->add_bos();
      x->set_name("probe.x");
      x->set_dtype(elf::F32);
      x->add_shape(64);
      x->set_size_bytes(256);
      x->set_category(elf::WRITE);
      elf::BufferObject* y = p->add_bos();
      *y = *x;
      y->set_name("probe.y");
      y->set_category(elf::OUTPUT);
      for (auto [param, bo] : std::vector<std::pair<std::string, std::string>>{
               {"w", qkv_weight}, {"x", "probe.x"}, {"y", "probe.y"}}) {
        auto* b = extra->add_bindings();
        b->set_param(param);
        b->set_bo(bo);
      }
      break;
    }
    if (!qkv_weight.empty()) break;
  }
  ASSERT_FALSE(qkv_weight.empty());
  auto changed = testing::RunPass(kName, *p);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const auto layouts = Layouts(*p);
  EXPECT_EQ(layouts.at(qkv_weight), registry::kPackedPanelV1);
  // Its fused partners stay with it (one launch reads one layout); the other layers' switch.
  int x12 = 0, packed = 0;
  for (const auto& [name, layout] : layouts) (layout == registry::kPackedPanelX12V1 ? x12 : packed) += 1;
  EXPECT_EQ(packed, 3);
  EXPECT_EQ(x12, 4 + 3);
  EXPECT_TRUE(absl::StrContains(Last(*p).reason(), "kept packed_panel_v1 (f32 x): gemv")) << Last(*p).reason();
  EXPECT_TRUE(absl::StrContains(Last(*p).reason(), "(fused with a weight that stays): rms_gemv3"))
      << Last(*p).reason();
}

TEST(CompressWeights, Npu2HasNoX12Layout) {
  auto p = BuildChain(TinyShape(), kFused, "npu2");
  ASSERT_TRUE(p.ok()) << p.status();
  auto changed = testing::RunPass(kName, *p, "npu2");
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(Last(*p).reason(), "npu2 has no packed_panel_x12_v1 weight layout");
}

}  // namespace
}  // namespace dk::opt::compress_weights
