#include "tokenizer/stop_strings.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dk::tokenizer {
namespace {

using ::testing::ElementsAre;

struct Pushed {
  std::vector<std::string> shown;  // what each Push returned
  std::string finish;
  bool stopped = false;
  std::string All() const {
    std::string all;
    for (const std::string& s : shown) all += s;
    return all + finish;
  }
};

Pushed PushAll(StopStrings& stops, const std::vector<std::string>& pieces) {
  Pushed run;
  for (const std::string& p : pieces) {
    bool stopped = false;
    run.shown.push_back(stops.Push(p, &stopped));
    if (stopped) run.stopped = true;
    EXPECT_EQ(stopped, run.stopped) << "a stop is final";
  }
  run.finish = stops.Finish();
  return run;
}

// `text` pushed whole, byte by byte, and in pieces of 2 and 3 bytes: the same text is
// shown and the same stop reached whatever the split.
void ExpectSplitIndependent(const std::vector<std::string>& stop_list, const std::string& text,
                            const std::string& shown, bool stopped) {
  for (size_t piece : {text.size(), size_t{1}, size_t{2}, size_t{3}}) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size(); at += std::max<size_t>(piece, 1)) {
      pieces.push_back(text.substr(at, piece));
    }
    StopStrings stops(stop_list);
    const Pushed run = PushAll(stops, pieces);
    EXPECT_EQ(run.All(), shown) << "pieces of " << piece;
    EXPECT_EQ(run.stopped, stopped) << "pieces of " << piece;
    if (stopped) EXPECT_EQ(run.finish, "");
  }
}

TEST(StopStringsTest, StopSplitAcrossManyPushes) {
  StopStrings stops({"<|user|>"});
  const Pushed run = PushAll(stops, {"Hi", " there<", "|us", "e", "r|", ">more", "ignored"});
  EXPECT_THAT(run.shown, ElementsAre("Hi", " there", "", "", "", "", ""));
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.finish, "");
}

TEST(StopStringsTest, HeldBackPrefixThatIsNoStopIsReleased) {
  StopStrings stops({"STOP"});
  const Pushed run = PushAll(stops, {"a ST", "O", "P?", "x ST"});
  // "ST", then "STO", is held; "P?" completes the stop.
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.All(), "a ");

  StopStrings other({"STOP"});
  const Pushed released = PushAll(other, {"a ST", "O", "RM", " ST"});
  EXPECT_THAT(released.shown, ElementsAre("a ", "", "STORM", " "));
  EXPECT_FALSE(released.stopped);
  EXPECT_EQ(released.finish, "ST");  // the tail held at the end comes out of Finish
}

TEST(StopStringsTest, TextAfterTheStopInTheSamePieceIsDropped) {
  StopStrings stops({"\n\n"});
  const Pushed run = PushAll(stops, {"one\n", "\ntwo\n\nthree"});
  EXPECT_THAT(run.shown, ElementsAre("one", ""));
  EXPECT_TRUE(run.stopped);
}

TEST(StopStringsTest, EarliestCompletedMatchWins) {
  // "ab" completes before "abc" can.
  ExpectSplitIndependent({"abc", "ab"}, "xabcd", "x", true);
  // "b" completes (at byte 3) before "abc" (at byte 4), though "abc" starts earlier.
  ExpectSplitIndependent({"abc", "b"}, "xabcd", "xa", true);
  // Both complete at the same byte: the longer one, so nothing of either is shown.
  ExpectSplitIndependent({"bc", "abc"}, "xabcd", "x", true);
  // Overlapping prefixes held at once: "aab" needs the held "aa", "abx" only "a".
  ExpectSplitIndependent({"aab", "abx"}, "zaabx", "z", true);
  ExpectSplitIndependent({"aab", "abx"}, "zaay", "zaay", false);
  ExpectSplitIndependent({"aab", "abx"}, "zaaabx", "za", true);
}

TEST(StopStringsTest, MultipleStopStrings) {
  const std::vector<std::string> list = {"<|im_end|>", "\nUser:", "###"};
  ExpectSplitIndependent(list, "The answer is 4.\nUser: next", "The answer is 4.", true);
  ExpectSplitIndependent(list, "a <|im_e b ## c\nUse ###", "a <|im_e b ## c\nUse ", true);
  ExpectSplitIndependent(list, "no stop <|im_end| here #", "no stop <|im_end| here #", false);
}

TEST(StopStringsTest, Utf8Multibyte) {
  // "。" is E3 80 82; "——" is E2 80 94 twice. Pieces cut inside characters still give
  // whole characters when the stop is found or ruled out.
  const std::vector<std::string> list = {"。\n", "——"};
  ExpectSplitIndependent(list, "你好。世界。\n再见", "你好。世界", true);
  ExpectSplitIndependent(list, "a—b—c", "a—b—c", false);
  ExpectSplitIndependent(list, "é—ü——ñ", "é—ü", true);
  // The held tail is whole characters: "。" held, then released with what follows.
  StopStrings stops(list);
  bool stopped = false;
  EXPECT_EQ(stops.Push("你好。", &stopped), "你好");
  EXPECT_EQ(stops.Push("世", &stopped), "。世");
  EXPECT_FALSE(stopped);
}

TEST(StopStringsTest, NoStopsAndEmptyStops) {
  StopStrings none({});
  bool stopped = true;
  EXPECT_EQ(none.Push("anything <|im_end|>", &stopped), "anything <|im_end|>");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(none.Finish(), "");
  // An empty stop string would stop before the first byte: it is ignored.
  ExpectSplitIndependent({"", "zz"}, "abc", "abc", false);
}

TEST(StopStringsTest, FinishResetsForTheNextGeneration) {
  StopStrings stops({"END"});
  bool stopped = false;
  EXPECT_EQ(stops.Push("xEND", &stopped), "x");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(stops.Push("more", &stopped), "");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(stops.Finish(), "");
  EXPECT_EQ(stops.Push("yE", &stopped), "y");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(stops.Finish(), "E");
}

}  // namespace
}  // namespace dk::tokenizer
