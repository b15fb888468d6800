// Not a test of this project: //tools/ci:skipped_tests_test runs it for the test.xml
// that this Debian's GoogleTest writes, one test passing, one skipping and one disabled,
// so that the parser is checked against the real format rather than a copy of it.
#include "gtest/gtest.h"

TEST(Fixture, Passes) { EXPECT_EQ(1 + 1, 2); }

TEST(Fixture, Skips) { GTEST_SKIP() << "no such feature here"; }

TEST(Fixture, DISABLED_NeverRuns) { FAIL(); }
