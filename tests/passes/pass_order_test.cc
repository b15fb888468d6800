// The three passes in every order on the tiny model: each stage is a valid
// program, the final programs agree on runs per token and BO categories, and every
// stage gives exactly the baseline's logits on the CPU device with BO validation.
// (The GEMV kernels are bit-identical between layouts by design, so "exactly" holds.)
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "elf/stats.h"
#include "gtest/gtest.h"
#include "optimizations/testing/tiny.h"
#include "tests/passes/cpu_run.h"

namespace dk::passes_test {
namespace {

using elf::RunsPerToken;
using opt::testing::BuildChain;
using opt::testing::CategoryCounts;
using opt::testing::TinyShape;

const std::vector<uint32_t> kTokens = {17, 250, 3, 99};

void CheckEveryOrder(const std::string& target, int want_runs) {
  auto baseline = BuildChain(TinyShape(), {});
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  auto want = CpuLogits(*baseline, kTokens);
  ASSERT_TRUE(want.ok()) << want.status();

  std::vector<std::string> order = {"buffer_object_reuse", "layout_alignment", "merge_multi_launch"};
  std::sort(order.begin(), order.end());
  int orders = 0;
  int first_runs = -1;
  std::map<std::string, int> first_categories;
  do {
    ++orders;
    SCOPED_TRACE(absl::StrJoin(order, " -> "));
    for (size_t n = 1; n <= order.size(); ++n) {
      const std::vector<std::string> prefix(order.begin(), order.begin() + n);
      SCOPED_TRACE(absl::StrCat("after ", prefix.back()));
      auto p = BuildChain(TinyShape(), prefix, target);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_TRUE(p->lineage(p->lineage_size() - 1).applied())
          << p->lineage(p->lineage_size() - 1).reason();
      auto got = CpuLogits(*p, kTokens);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), want->size());
      for (size_t t = 0; t < want->size(); ++t) {
        ASSERT_EQ((*got)[t], (*want)[t]) << "logits differ from the baseline's at token " << t;
      }
      if (n < order.size()) continue;
      const int runs = RunsPerToken(*p);
      const auto categories = CategoryCounts(*p);
      if (first_runs < 0) {
        first_runs = runs;
        first_categories = categories;
      }
      EXPECT_EQ(runs, want_runs);
      EXPECT_EQ(runs, first_runs);
      EXPECT_EQ(categories, first_categories);
    }
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 6);
}

// cpu: rms_gemv_rope, o_gemv_ffn, lm_head (the final norm and 3 partitions).
TEST(PassOrder, EveryOrderOnCpu) { CheckEveryOrder("cpu", 3); }

// npu2: O's K (64) is no multiple of the K-split chunk (512), so O + FFN runs one
// group per GEMV (O + add + norm, gate, up + SiLU*mul), and the down GEMV (K=96, no
// multiple of 64) alone, then its add: 1 + 5; the LM-head partitions (104 and 92
// rows: no tile fits) run alone too, next to the final norm: + 4.
TEST(PassOrder, EveryOrderOnNpu2) { CheckEveryOrder("npu2", 1 + 5 + 4); }

}  // namespace
}  // namespace dk::passes_test
