#include "tools/review/chain.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/review/record.h"

namespace dk::review {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kMultiLine[] = R"BUILD(
load("//rules:defs.bzl", "buffer_object_reuse", "layout_alignment")

# A comment with "quotes", (parens and src = ":nope".
decode_elf(
    name = "decode",
    config = "config.textproto",
)

layout_alignment(
    name = "decode_aligned",
    src = "//models/m:decode",  # a full label
    target = "npu2",
)

buffer_object_reuse(
    name = 'decode_opt',
    src = ":decode_aligned",
)

decode_profile(
    name = "profile",
    stages = [
        ":decode",
        ":decode_aligned",
        ":decode_opt",
    ],
)
)BUILD";

constexpr char kOneLine[] = R"BUILD(
decode_elf(name = "decode", config = "config.textproto")
layout_alignment(name = "decode_aligned", src = ":decode", target = "cpu")
buffer_object_reuse(name = "decode_opt", src = ":decode")
verify_chain(name = "verify", final = ":decode_opt", prompts = {"a": "b)"})
)BUILD";

TEST(ParseChainTest, MultiLineRulesAndStagesList) {
  auto chain = ParseChain(kMultiLine, "m");
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_EQ(chain->stages.size(), 3u);
  EXPECT_EQ(chain->stages[0].name, ":decode");
  EXPECT_EQ(chain->stages[0].src, "");
  EXPECT_EQ(chain->stages[1].src, ":decode");
  EXPECT_EQ(chain->stages[1].other.at("target"), "\"npu2\"");
  EXPECT_EQ(chain->stages[2].name, ":decode_opt");
  EXPECT_EQ(chain->final_stage, ":decode_opt");
  EXPECT_THAT(chain->Path(), ElementsAre(":decode", ":decode_aligned", ":decode_opt"));
}

TEST(ParseChainTest, OneLineRulesAndFinal) {
  auto chain = ParseChain(kOneLine, "m");
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_EQ(chain->stages.size(), 3u);
  EXPECT_EQ(chain->final_stage, ":decode_opt");
  EXPECT_THAT(chain->final_from, HasSubstr("verify_chain final"));
  EXPECT_THAT(chain->Path(), ElementsAre(":decode", ":decode_opt"));
}

TEST(ParseChainTest, FinalIsTheChainEndWithoutProfile) {
  auto chain = ParseChain("decode_elf(name = \"d\")\nx(name = \"e\", src = \":d\")\n", "m");
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->final_stage, ":e");
}

TEST(ChainChangesTest, RemovedRepointedAttribute) {
  auto base = ParseChain(kMultiLine, "m");
  auto work = ParseChain(kOneLine, "m");
  ASSERT_TRUE(base.ok() && work.ok());
  EXPECT_THAT(ChainChanges(*base, *work),
              ElementsAre("~ attribute changed: :decode_aligned target \"npu2\" -> \"cpu\"",
                          "~ re-pointed: :decode_opt src \":decode_aligned\" -> \":decode\""));
  EXPECT_THAT(ChainChanges(*work, *base), ::testing::Contains("~ re-pointed: :decode_opt src \":decode\" -> "
                                                              "\":decode_aligned\""));
  EXPECT_TRUE(ChainChanges(*base, *base).empty());
  Chain empty;
  EXPECT_THAT(ChainChanges(*base, empty),
              ElementsAre("- removed: :decode = decode_elf()",
                          "- removed: :decode_aligned = layout_alignment(src = \":decode\")",
                          "- removed: :decode_opt = buffer_object_reuse(src = \":decode_aligned\")",
                          "~ final stage: :decode_opt -> (none)"));
}

TEST(ParseChainTest, ErrorsNotCrashes) {
  for (const std::string& text : std::vector<std::string>{
           "decode_elf(name = \"d\"",                             // never closed
           "decode_elf(name = \"d)",                              // unterminated string
           "decode_elf(name = \"d\"]",                            // wrong bracket
           ")",                                                   // stray close
           "x(name = \"a\", src = [\":b\"])",                     // src not a string
           "x(src = \":b\")",                                     // no name
           "decode_elf(name = \"d\")\ndecode_elf(name = \"d\")",  // twice
           "decode_elf(name = \"d\")\np = decode_profile(final = \":gone\")",
           "a(name = \"a\", src = \":b\")\nb(name = \"b\", src = \":a\")",  // a cycle
           "\"\"\"",
       }) {
    auto chain = ParseChain(text, "m");
    EXPECT_FALSE(chain.ok()) << text;
  }
  EXPECT_TRUE(ParseChain("", "m").ok());
  EXPECT_TRUE(ParseChain("# nothing\nexports_files([\"a\"])\n", "m")->stages.empty());
}

TEST(NormalizeLabelTest, Forms) {
  EXPECT_EQ(NormalizeLabel("decode", "m"), ":decode");
  EXPECT_EQ(NormalizeLabel(":decode", "m"), ":decode");
  EXPECT_EQ(NormalizeLabel("//models/m:decode", "m"), ":decode");
  EXPECT_EQ(NormalizeLabel("//models/other:decode", "m"), "//models/other:decode");
}

TEST(RecordTest, ParsesTableAndFinal) {
  const std::string md =
      "# x\n\n## Final\n\n**7.70 ms/token** at `:o`.\n\n## All stages\n\n"
      "| stage | status | ms/token median (min-max) | runs/token | x floor | gate |\n"
      "| --- | --- | --- | --- | --- | --- |\n"
      "| :d | baseline | 35.46 (33.90-88.68) | 422 | 5.74x | PASS |\n"
      "| :o | applied | 7.70 (7.44-9.08) | 61 | 1.34x | PASS |\n\n## Next\n| a |\n";
  auto r = ParseRecord(md);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->stages.size(), 2u);
  EXPECT_EQ(r->stages[0].ms, "35.46");
  EXPECT_EQ(r->stages[1].runs, "61");
  EXPECT_EQ(r->stages[1].x_floor, "1.34x");
  EXPECT_EQ(r->final_line, "7.70 ms/token at `:o`.");
  Record other = *r;
  other.stages.erase(other.stages.begin() + 1);
  other.stages.push_back({":n", "applied", "9.00", "70", "1.50x", "FAIL"});
  const std::string side = SideBySide(&*r, &other);
  EXPECT_THAT(side, HasSubstr("| :o (base only) | applied -> - | 7.70 -> - |"));
  EXPECT_THAT(
      side,
      HasSubstr("| :n (working tree only) | - -> applied | - -> 9.00 | - -> 70 | - -> 1.50x | - -> FAIL |"));
  EXPECT_FALSE(ParseRecord("# no table\n").ok());
  EXPECT_FALSE(ParseRecord("## All stages\n\n| stage | status |\n| --- | --- |\n").ok());
}

}  // namespace
}  // namespace dk::review
