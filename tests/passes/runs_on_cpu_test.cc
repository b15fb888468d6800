// Each pass's output runs on the CPU device with BO validation and gives exactly
// the baseline's logits (the GEMV kernels are bit-identical between layouts by
// design); the validator names a BO a pass (or an edit) mis-categorized.
#include <string>
#include <vector>

#include "elf/elf.h"
#include "elf/stats.h"
#include "gtest/gtest.h"
#include "optimizations/testing/tiny.h"
#include "tests/passes/cpu_run.h"

namespace dk::passes_test {
namespace {

using elf::RunsPerToken;
using opt::testing::BuildChain;
using opt::testing::TinyShape;

// --- buffer_object_reuse -----------------------------------------------------

TEST(BufferObjectReuse, RunsOnTheCpuDeviceWithTheBaselineLogits) {
  auto base = BuildChain(TinyShape(), {});
  ASSERT_TRUE(base.ok());
  const std::vector<uint32_t> tokens = {17, 250, 3};
  auto want = CpuLogits(*base, tokens);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const std::vector<std::string>& chain :
       {std::vector<std::string>{"buffer_object_reuse"},
        {"layout_alignment", "buffer_object_reuse"},
        {"merge_multi_launch", "buffer_object_reuse"}}) {
    auto p = BuildChain(TinyShape(), chain);
    ASSERT_TRUE(p.ok()) << p.status();
    auto got = CpuLogits(*p, tokens);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want) << chain.front();
  }
}

// The CPU backend's BO validation catches a mis-categorized BO in the pass output:
// an activation (the attention output the host writes every token) edited to
// STATIC is named on the second token, when its value changes.
TEST(BufferObjectReuse, ValidatorNamesAnActivationEditedToStatic) {
  auto p = BuildChain(TinyShape(), {"layout_alignment", "buffer_object_reuse"});
  ASSERT_TRUE(p.ok()) << p.status();
  bool edited = false;
  for (auto& b : *p->mutable_bos()) {
    if (b.host_value() == "L0.attn") {
      ASSERT_EQ(b.category(), elf::WRITE) << b.name();
      ASSERT_EQ(b.name(), "L0.o_proj.x");
      b.set_category(elf::STATIC);
      edited = true;
    }
  }
  ASSERT_TRUE(edited);
  ASSERT_TRUE(elf::ValidateProgram(*p).ok());
  auto session = OpenValidating(*p, "tiny_bo.elf");
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->decoder().Step(5).ok());
  auto second = (*session)->decoder().Step(6);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(
                "ELF 'tiny_bo.elf', group 'L0.o_proj': STATIC BO 'L0.o_proj.x' mirrors host value "
                "'L0.attn', which changed"),
            std::string::npos)
      << second.status();
}

// The same for an INTERMEDIATE mistake: a host-written activation edited to
// INTERMEDIATE is refused by the device on the first write.
TEST(BufferObjectReuse, ValidatorNamesAHostWrittenBoEditedToIntermediate) {
  auto p = BuildChain(TinyShape(), {"buffer_object_reuse"});
  ASSERT_TRUE(p.ok()) << p.status();
  for (auto& b : *p->mutable_bos()) {
    if (b.name() == "L0.rope_q.cos") b.set_category(elf::INTERMEDIATE);
  }
  auto session = OpenValidating(*p, "tiny_bo.elf");
  absl::Status s = session.ok() ? (*session)->decoder().Step(5).status() : session.status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("INTERMEDIATE BO 'L0.rope_q.cos'"), std::string::npos) << s;
}

// --- layout_alignment --------------------------------------------------------

TEST(LayoutAlignment, RunsOnTheCpuDeviceWithTheBaselineLogits) {
  const std::vector<uint32_t> tokens = {17, 250, 3};
  auto base = BuildChain(TinyShape(), {});
  ASSERT_TRUE(base.ok());
  auto want = CpuLogits(*base, tokens);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int64_t rows : {int64_t{0}, int64_t{64}, int64_t{128}, int64_t{296}}) {
    auto p = BuildChain(TinyShape(), {"layout_alignment"}, "cpu", rows);
    ASSERT_TRUE(p.ok()) << p.status();
    auto got = CpuLogits(*p, tokens);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want) << "partition rows " << rows;
  }
}

// --- merge_multi_launch ------------------------------------------------------

TEST(MergeMultiLaunch, RunsOnTheCpuDeviceWithTheBaselineLogits) {
  const std::vector<uint32_t> tokens = {17, 250, 3};
  for (int layers : {1, 2}) {
    auto base = BuildChain(TinyShape(layers), {});
    ASSERT_TRUE(base.ok());
    auto want = CpuLogits(*base, tokens);
    ASSERT_TRUE(want.ok()) << want.status();
    for (const std::vector<std::string>& chain :
         {std::vector<std::string>{"merge_multi_launch"},
          {"buffer_object_reuse", "merge_multi_launch"},
          {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"}}) {
      auto p = BuildChain(TinyShape(layers), chain);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(RunsPerToken(*p), 2 * layers + 1);
      auto got = CpuLogits(*p, tokens);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, *want) << chain.size() << " passes, " << layers << " layers";
    }
  }
}

// On npu2, a down GEMV with K = 8192 > K_max 8160 runs in a group of its own; the
// program still runs on the CPU device.
TEST(MergeMultiLaunch, Npu2ProgramRunsOnTheCpuDeviceWithTheBaselineLogits) {
  elf::ModelShape shape = TinyShape();
  shape.set_name("tiny_npu");
  shape.set_ffn(8192);
  shape.set_vocab(512);
  const std::vector<uint32_t> tokens = {17, 250};
  auto base = BuildChain(shape, {});
  auto p = BuildChain(shape, {"buffer_object_reuse", "merge_multi_launch"}, "npu2");
  ASSERT_TRUE(base.ok() && p.ok());
  auto want = CpuLogits(*base, tokens);
  auto got = CpuLogits(*p, tokens);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

}  // namespace
}  // namespace dk::passes_test
