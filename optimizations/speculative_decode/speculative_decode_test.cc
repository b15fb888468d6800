#include "optimizations/speculative_decode/speculative_decode.h"

#include "elf/elf.h"
#include "graph/baseline.h"
#include "gtest/gtest.h"
#include "optimizations/testing/tiny.h"
#include "absl/strings/str_cat.h"
#include "registry/registry.h"

namespace dk::opt::speculative_decode {
namespace {

TEST(SpeculativeDecode, MatchesGoldens) {
  const auto cases = testing::GoldenCasesOf(kName);
  ASSERT_EQ(cases.size(), 1u);
  for (const auto& c : cases) EXPECT_TRUE(testing::CheckGolden(c).ok()) << testing::CheckGolden(c);
}

TEST(SpeculativeDecode, SetsTheDraftAndKeepsTheSteps) {
  auto base = graph::BuildBaseline(testing::TinyShape(2));
  ASSERT_TRUE(base.ok());
  elf::Program p = *base;
  Options o;
  o.max_draft = 6;
  auto r = speculative_decode::Run(p, **registry::FindTarget("cpu"), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(p.speculative().draft(), "prompt_lookup");
  EXPECT_EQ(p.speculative().max_draft(), 6);
  EXPECT_EQ(p.speculative().max_ngram(), 8);
  EXPECT_NE(r->summary.find("checks them in one run of 7 token rows"), std::string::npos) << r->summary;
  elf::Program without = p;
  without.clear_speculative();
  EXPECT_EQ(testing::ProgramDiff(without, *base), "");  // nothing else changed
  EXPECT_TRUE(elf::ValidateProgram(p).ok());
  // Twice: the second says the parent drafts already.
  auto again = speculative_decode::Run(p, **registry::FindTarget("cpu"), o);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
}

// Analysis-time refusals: the build fails naming the option and its range.
TEST(SpeculativeDecode, OptionsOutOfRangeAreRefused) {
  auto base = graph::BuildBaseline(testing::TinyShape(2));
  ASSERT_TRUE(base.ok());
  for (int bad : {0, -1, 16}) {
    elf::Program p = *base;
    Options o;
    o.max_draft = bad;
    auto r = speculative_decode::Run(p, **registry::FindTarget("cpu"), o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(absl::StrCat("max_draft ", bad, " is outside [1, 15]")), std::string::npos)
        << r.status();
  }
  elf::Program p = *base;
  Options o;
  o.draft = "second_model";
  EXPECT_NE(speculative_decode::Run(p, **registry::FindTarget("cpu"), o).status().message().find("unknown draft \"second_model\""),
            std::string::npos);
  for (int bad : {1, 9}) {
    o = Options{};
    o.max_ngram = bad;
    EXPECT_NE(speculative_decode::Run(p, **registry::FindTarget("cpu"), o)
                  .status()
                  .message()
                  .find(absl::StrCat("max_ngram ", bad, " is outside [2, 8]")),
              std::string::npos);
  }
  // A match of n tokens drafts at most 2^(n - 2): max_draft 6 needs n-grams of 5.
  o = Options{};
  o.max_draft = 6;
  o.max_ngram = 4;
  EXPECT_NE(speculative_decode::Run(p, **registry::FindTarget("cpu"), o)
                .status()
                .message()
                .find("max_draft 6 is never reached with max_ngram 4 (a match of n tokens drafts at most 2^(n - 2), "
                      "here 4): raise max_ngram to 5 or lower max_draft"),
            std::string::npos);
  o.max_ngram = 5;
  EXPECT_TRUE(speculative_decode::Run(p, **registry::FindTarget("cpu"), o).ok());
  p.clear_speculative();
  // And a program that says so is refused by validation.
  p.mutable_speculative()->set_draft("prompt_lookup");
  p.mutable_speculative()->set_max_draft(99);
  p.mutable_speculative()->set_max_ngram(3);
  EXPECT_NE(elf::ValidateProgram(p).message().find("speculative: max_draft 99 is outside [1, 15]"), std::string::npos);
}

}  // namespace
}  // namespace dk::opt::speculative_decode
