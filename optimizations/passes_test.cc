#include "optimizations/passes.h"

#include <set>
#include <string>
#include <vector>

#include "graph/baseline.h"
#include "gtest/gtest.h"
#include "optimizations/testing/tiny.h"
#include "registry/registry.h"

namespace dk::opt {
namespace {

std::string ErrorOf(const absl::Status& s) { return std::string(s.message()); }

TEST(Passes, EveryEntryIsCompleteAndRunsWithItsDefaults) {
  std::set<std::string> names;
  std::vector<std::string> before;
  for (const Pass& pass : Passes()) {
    SCOPED_TRACE(pass.name);
    EXPECT_TRUE(names.insert(pass.name).second) << "two entries named " << pass.name;
    EXPECT_FALSE(pass.doc.empty());
    EXPECT_EQ(pass.doc.find('\n'), std::string::npos);
    ASSERT_TRUE(pass.run);
    for (const OptionSpec& spec : pass.options) {
      EXPECT_FALSE(spec.name.empty());
      EXPECT_FALSE(spec.doc.empty()) << spec.name;
    }
    auto found = FindPass(pass.name);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, &pass);
    // Every default parses, and the pass changes the tiny baseline with them after
    // the passes before it in the table (the models' chain order: fuse_kernels, for
    // one, fuses inside the groups merge_multi_launch makes).
    auto p = testing::BuildChain(testing::TinyShape(), before);
    ASSERT_TRUE(p.ok()) << p.status();
    before.push_back(pass.name);
    auto changed = RunPass(pass.name, *p, **registry::FindTarget("cpu"));
    ASSERT_TRUE(changed.ok()) << changed.status();
    EXPECT_TRUE(*changed);
    EXPECT_EQ(p->lineage(p->lineage_size() - 1).pass(), pass.name);
  }
  for (const char* name : {"buffer_object_reuse", "layout_alignment", "merge_multi_launch", "fuse_kernels"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
}

// The pipeline, not the pass, writes the lineage entry: from the pass's result,
// once per run, whether or not the pass changed anything; the no-op policy
// decides whether an unchanged program is an error.
TEST(Passes, ApplyPassRecordsTheResultAndAppliesTheNoopPolicy) {
  const Pass& layout = **FindPass("layout_alignment");
  const registry::TargetConstraints& cpu = **registry::FindTarget("cpu");
  auto options = ParseOptions(layout, {});
  ASSERT_TRUE(options.ok()) << options.status();
  auto p = testing::BuildChain(testing::TinyShape(), {});
  ASSERT_TRUE(p.ok()) << p.status();
  const int before = p->lineage_size();

  auto applied = ApplyPass(layout, *p, cpu, *options, NoopPolicy::kFail);
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_EQ(p->lineage_size(), before + 1);
  const elf::LineageEntry& entry = p->lineage(before);
  EXPECT_EQ(entry.pass(), "layout_alignment");
  EXPECT_EQ(entry.target(), "cpu");
  EXPECT_TRUE(entry.applied());
  EXPECT_NE(entry.reason().find("packed once at load"), std::string::npos) << entry.reason();
  EXPECT_EQ(applied->SerializeAsString(), entry.SerializeAsString());

  // Again: nothing left to pack. Allowed, the entry says why; refused, an error
  // carrying the same reason.
  auto skipped = ApplyPass(layout, *p, cpu, *options, NoopPolicy::kAllow);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  ASSERT_EQ(p->lineage_size(), before + 2);
  EXPECT_FALSE(p->lineage(before + 1).applied());
  EXPECT_EQ(p->lineage(before + 1).reason(), "nothing to do: every GEMV weight is already packed");
  auto refused = ApplyPass(layout, *p, cpu, *options, NoopPolicy::kFail);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrorOf(refused.status()),
            "changed nothing (nothing to do: every GEMV weight is already packed). An inert stage must not "
            "hide in the chain: remove it from BUILD, or set allow_noop = True");

  // A pass's error appends no entry.
  auto bad = ParseOptions(layout, {"lm_head_partition_rows=-1"});
  ASSERT_TRUE(bad.ok()) << bad.status();
  const int entries = p->lineage_size();
  EXPECT_FALSE(ApplyPass(layout, *p, cpu, *bad, NoopPolicy::kAllow).ok());
  EXPECT_EQ(p->lineage_size(), entries);
}

TEST(Passes, UnknownPassNamesTheKnownOnes) {
  auto pass = FindPass("fuse_everything");
  ASSERT_FALSE(pass.ok());
  std::string known;
  for (const Pass& p : Passes()) known += (known.empty() ? "" : ", ") + p.name;
  EXPECT_EQ(ErrorOf(pass.status()), "unknown pass 'fuse_everything' (known: " + known + ")");
}

TEST(Passes, OptionsTakeTheirDefaultsOrTheGivenValues) {
  const Pass& layout = **FindPass("layout_alignment");
  auto defaults = ParseOptions(layout, {});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->Int("lm_head_partition_rows"), 16384);
  auto given = ParseOptions(layout, {"lm_head_partition_rows=128"});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->Int("lm_head_partition_rows"), 128);

  const Pass& merge = **FindPass("merge_multi_launch");
  auto all = ParseOptions(merge, {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->StringList("groups").empty());
  auto two = ParseOptions(merge, {"groups=rms_gemv_rope,lm_head"});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->StringList("groups"), (std::vector<std::string>{"rms_gemv_rope", "lm_head"}));
  auto empty = ParseOptions(merge, {"groups="});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->StringList("groups").empty());
}

TEST(Passes, BadOptionsAreNamed) {
  const Pass& layout = **FindPass("layout_alignment");
  const Pass& reuse = **FindPass("buffer_object_reuse");
  const Pass& merge = **FindPass("merge_multi_launch");
  EXPECT_EQ(ErrorOf(ParseOptions(layout, {"rows=128"}).status()),
            "layout_alignment has no option 'rows' (its options: lm_head_partition_rows)");
  EXPECT_EQ(ErrorOf(ParseOptions(reuse, {"groups=lm_head"}).status()),
            "buffer_object_reuse has no option 'groups' (it takes none)");
  EXPECT_EQ(ErrorOf(ParseOptions(layout, {"lm_head_partition_rows=many"}).status()),
            "layout_alignment option lm_head_partition_rows: 'many' is not an integer");
  EXPECT_EQ(ErrorOf(ParseOptions(merge, {"groups=lm_head,everything"}).status()),
            "merge_multi_launch option groups: 'everything' is not one of rms_gemv_rope, "
            "o_gemv_ffn, lm_head");
  // A range the table declares is checked here, before the pass runs.
  const Pass& spec = **FindPass("speculative_decode");
  EXPECT_EQ(ErrorOf(ParseOptions(spec, {"max_draft=16"}).status()),
            "speculative_decode option max_draft: 16 is outside [1, 15]");
  EXPECT_EQ(ErrorOf(ParseOptions(spec, {"max_ngram=1"}).status()),
            "speculative_decode option max_ngram: 1 is outside [2, 8]");
  EXPECT_TRUE(ParseOptions(spec, {"max_ngram=2", "max_draft=1"}).ok());
  EXPECT_EQ(ErrorOf(ParseOptions(layout, {"lm_head_partition_rows"}).status()),
            "layout_alignment: option 'lm_head_partition_rows' is not key=value");
  EXPECT_EQ(ErrorOf(ParseOptions(layout, {"lm_head_partition_rows=1", "lm_head_partition_rows=2"})
                        .status()),
            "layout_alignment option lm_head_partition_rows given twice");
}

TEST(Passes, DescriptionListsEveryPassAndOption) {
  const std::string text = DescribePasses();
  for (const Pass& pass : Passes()) {
    EXPECT_NE(text.find("  " + pass.name + ": " + pass.doc + "\n"), std::string::npos) << text;
    for (const OptionSpec& spec : pass.options) {
      EXPECT_NE(text.find("      " + spec.name + "=<"), std::string::npos) << text;
    }
  }
  EXPECT_NE(text.find("lm_head_partition_rows=<int> (default '16384')"), std::string::npos) << text;
  EXPECT_NE(text.find("groups=<string list> (default ''; items: rms_gemv_rope, o_gemv_ffn, lm_head)"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace dk::opt
