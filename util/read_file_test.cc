#include "util/read_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dk {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ReadRegularFileTest, ReadsTheWholeFile) {
  const std::string path = TmpPath("plain.txt");
  std::string want(100000, 'x');
  want[5] = '\0';
  std::ofstream(path, std::ios::binary) << want;
  auto got = ReadRegularFile(path, "test file");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, want);
}

TEST(ReadRegularFileTest, EmptyFileIsEmpty) {
  const std::string path = TmpPath("empty.txt");
  std::ofstream(path, std::ios::binary).flush();
  auto got = ReadRegularFile(path, "test file");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "");
}

TEST(ReadRegularFileTest, DevZeroIsRefusedNotReadForever) {
  auto got = ReadRegularFile("/dev/zero", "goldens");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), "goldens /dev/zero is not a regular file");
}

TEST(ReadRegularFileTest, SymlinkToDevZeroIsRefused) {
  const std::string link = TmpPath("config.json");
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  auto got = ReadRegularFile(link, "config.json");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "config.json " + link + " is not a regular file");
}

TEST(ReadRegularFileTest, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = TmpPath("fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto got = ReadRegularFile(fifo, "decode ELF");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "decode ELF " + fifo + " is not a regular file");
}

TEST(ReadRegularFileTest, DirectoryIsRefused) {
  const std::string dir = TmpPath("");
  auto got = ReadRegularFile(dir, "tokenizer");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "tokenizer " + dir + " is a directory, not a file");
}

TEST(ReadRegularFileTest, MissingFileIsNotFound) {
  auto got = ReadRegularFile(TmpPath("no-such-file"), "goldens");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("cannot open goldens "), std::string::npos);
}

TEST(ReadRegularFileTest, FileAboveTheCapIsRefusedBeforeReading) {
  const std::string path = TmpPath("big.txt");
  std::ofstream(path, std::ios::binary) << std::string(11, 'x');
  auto got = ReadRegularFile(path, "config.json", 10);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "config.json " + path + " is 11 bytes, more than the 10 a config.json may have");
}

}  // namespace
}  // namespace dk
