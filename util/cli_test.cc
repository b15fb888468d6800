#include "util/cli.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dk::cli {
namespace {

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d ? d : "/tmp";
}

TEST(Cli, RequireFlagNamesTheFlag) {
  EXPECT_TRUE(RequireFlag("elf", "a.elf").ok());
  const absl::Status s = RequireFlag("goldens", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--goldens is required");
}

TEST(Cli, PathsExistAndAreOfTheRightKind) {
  const std::string dir = TempDir(), file = dir + "/f.txt";
  std::ofstream(file) << "x";
  EXPECT_TRUE(RequireFile("elf", file).ok());
  EXPECT_TRUE(RequireDirectory("weights", dir).ok());
  EXPECT_TRUE(RequirePath("tokenizer", dir, PathKind::kFileOrDirectory).ok());
  EXPECT_TRUE(RequirePath("tokenizer", file, PathKind::kFileOrDirectory).ok());

  absl::Status s = RequireFile("elf", dir);
  EXPECT_EQ(s.message(), "--elf: " + dir + " is a directory, not a file");
  s = RequireDirectory("weights", file);
  EXPECT_EQ(s.message(), "--weights: " + file + " is not a directory");
  s = RequirePath("weights", dir + "/missing", PathKind::kFileOrDirectory);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "--weights: " + dir + "/missing does not exist");
  EXPECT_EQ(RequireFile("elf", "").message(), "--elf is required");
}

TEST(Cli, WeightsSpecIsSyntheticOrAPath) {
  EXPECT_TRUE(RequireWeightsSpec("weights", "synthetic").ok());
  EXPECT_TRUE(RequireWeightsSpec("weights", "synthetic:7").ok());
  EXPECT_TRUE(RequireWeightsSpec("weights", TempDir()).ok());
  absl::Status s = RequireWeightsSpec("weights", TempDir() + "/no_such_checkpoint");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "--weights: " + TempDir() + "/no_such_checkpoint does not exist");
}

TEST(Cli, RequireRange) {
  EXPECT_TRUE(RequireRange("max_new_tokens", 0, 0, 10).ok());
  EXPECT_TRUE(RequireRange("max_new_tokens", 10, 0, 10).ok());
  EXPECT_EQ(RequireRange("max_new_tokens", -1, 0, 10).message(),
            "--max_new_tokens -1 is outside [0, 10]");
  EXPECT_FALSE(RequireRange("max_context", 11, 0, 10).ok());
}

}  // namespace
}  // namespace dk::cli
