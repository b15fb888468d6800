#include "util/printable.h"

#include "gtest/gtest.h"

namespace dk {
namespace {

TEST(PrintableTest, KeepsTextEscapesControlCharacters) {
  EXPECT_EQ(Printable("model.layers.0"), "model.layers.0");
  EXPECT_EQ(Printable("\xC4\xA0the"), "\xC4\xA0the");  // "Ġthe" stays readable
  EXPECT_EQ(Printable("a\x1b[2Jb\n\\"), "a\\x1b[2Jb\\x0a\\\\");
  EXPECT_EQ(Printable("\xff\xfe"), "\\xff\\xfe");  // not UTF-8: every byte escaped
}

}  // namespace
}  // namespace dk
