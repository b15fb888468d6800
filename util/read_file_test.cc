#include "util/read_file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
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

TEST(ReadRegularFileTest, DanglingSymlinkIsNotFound) {
  const std::string link = TmpPath("dangling.gguf");
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink(TmpPath("no-such-target").c_str(), link.c_str()), 0);
  auto got = ReadRegularFile(link, "GGUF");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("cannot open GGUF " + link), std::string::npos);
}

// A size within the cap that the machine cannot hold is an error, not an abort from
// std::bad_alloc. The child process gets an address-space limit far below the file's
// size (a sparse file: no disk is used).
TEST(ReadRegularFileTest, FileThatDoesNotFitInMemoryIsResourceExhausted) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan reserves terabytes of shadow address space, and its operator new reports an
  // out-of-memory instead of throwing: an address-space limit cannot be tested here.
  GTEST_SKIP() << "address-space limits do not apply under ASan";
#else
  const std::string path = TmpPath("huge.elf");
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{3} << 30), 0);
    ::close(fd);
  }
  const auto read_with_little_memory = [&path] {
    struct rlimit limit = {uint64_t{1} << 30, uint64_t{1} << 30};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(3);
    auto got = ReadRegularFile(path, "decode ELF", kMaxElfFileBytes);
    std::_Exit(!got.ok() && got.status().code() == absl::StatusCode::kResourceExhausted ? 0 : 1);
  };
  EXPECT_EXIT(read_with_little_memory(), ::testing::ExitedWithCode(0), "");
  ::unlink(path.c_str());
#endif
}

TEST(OpenUserPathTest, DirectoryWhereOneIsTaken) {
  const std::string dir = TmpPath("ckpt");
  ::mkdir(dir.c_str(), 0700);
  auto either = OpenUserPath(dir, "weights", PathKinds::kFileOrDirectory);
  ASSERT_TRUE(either.ok()) << either.status();
  EXPECT_TRUE(either->is_directory);
  auto only = OpenUserPath(dir, "checkpoint", PathKinds::kDirectory);
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_TRUE(only->is_directory);
}

TEST(OpenUserPathTest, FileWhereADirectoryIsWanted) {
  const std::string path = TmpPath("not_a_dir");
  std::ofstream(path) << "x";
  auto got = OpenUserPath(path, "checkpoint", PathKinds::kDirectory);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "checkpoint " + path + " is not a directory");
}

TEST(OpenUserPathTest, FifoIsRefusedWithoutBlockingWhereDirectoriesAreTakenToo) {
  const std::string fifo = TmpPath("weights_fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto got = OpenUserPath(fifo, "weights", PathKinds::kFileOrDirectory);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "weights " + fifo + " is not a regular file or directory");
  auto dev = OpenUserPath("/dev/zero", "weights", PathKinds::kFileOrDirectory);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpenUserPathTest, ReadHeadReadsAtMostNBytes) {
  const std::string path = TmpPath("head.bin");
  std::ofstream(path, std::ios::binary) << "GGUF\x03rest";
  auto f = OpenUserPath(path, "weights");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->size, 9u);
  auto head = ReadHead(*f, path, 4);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(*head, "GGUF");
  auto all = ReadHead(*f, path, 64);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 9u);
}

}  // namespace
}  // namespace dk
