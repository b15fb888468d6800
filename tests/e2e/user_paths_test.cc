// Every loader of a user-given path, given what is not its file: a FIFO with no
// writer (must not block in open()), /dev/zero (must not read forever), a directory
// where a file is wanted, and a dangling symlink. Each is refused with a message
// naming the path. A loader that blocks fails here by the watchdog below, not by the
// test runner's timeout, and names itself.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "verify/goldens.h"
#include "weights/gguf.h"
#include "weights/safetensors.h"
#include "weights/weights.h"

namespace dk {
namespace {

using ::testing::HasSubstr;

struct Loader {
  std::string name;
  std::function<absl::Status(const std::string&)> load;
  // What its messages name: the path given, or (config.json) the file in the checkpoint.
  bool names_config_json = false;
};

// The message names the path the loader was given (config.json: the checkpoint's file).
std::string Named(const Loader& l, const std::string& path) {
  return l.names_config_json ? "ckpt_for_config/config.json" : path;
}

std::vector<Loader> Loaders() {
  return {
      {"decode ELF", [](const std::string& p) { return elf::ReadElfFile(p).status(); }},
      {"goldens", [](const std::string& p) { return verify::LoadGoldens(p).status(); }},
      {"tokenizer", [](const std::string& p) { return tokenizer::Tokenizer::Load(p).status(); }},
      {"chat template", [](const std::string& p) { return tokenizer::LoadChatTemplateText(p).status(); }},
      {"weights", [](const std::string& p) { return weights::LoadWeights(p).status(); }},
      {"GGUF", [](const std::string& p) { return weights::LoadGguf(p).status(); }},
      {"GGUF shape", [](const std::string& p) { return weights::GgufShape(p).status(); }},
      {"safetensors", [](const std::string& p) { return weights::SafetensorsFile::Open(p).status(); }},
      // config.json inside an otherwise empty checkpoint directory: the path given
      // is the config.json itself, linked into the directory.
      {"config.json",
       [](const std::string& p) {
         const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/ckpt_for_config");
         ::mkdir(dir.c_str(), 0700);
         const std::string config = dir + "/config.json";
         ::unlink(config.c_str());
         ::rmdir(config.c_str());
         if (::symlink(p.c_str(), config.c_str()) != 0) return absl::InternalError("symlink");
         return weights::LoadHfCheckpoint(dir).status();
       },
       true},
  };
}

// Runs `load` on another thread; a load that has not returned after 20 s is a hang:
// the test names it and exits (the thread cannot be cancelled).
absl::Status LoadOrDie(const Loader& loader, const std::string& path, const std::string& kind) {
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  std::thread([&loader, path, p = std::move(done)]() mutable { p.set_value(loader.load(path)); })
      .detach();
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    std::fprintf(stderr, "%s blocked on %s %s\n", loader.name.c_str(), kind.c_str(), path.c_str());
    std::_Exit(1);
  }
  return result.get();
}

std::string Tmp(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

TEST(UserPathsTest, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = Tmp("fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const Loader& l : Loaders()) {
    absl::Status s = LoadOrDie(l, fifo, "a FIFO");
    EXPECT_FALSE(s.ok()) << l.name;
    EXPECT_THAT(s.message(), HasSubstr(Named(l, fifo))) << l.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("not a regular file")) << l.name << ": " << s;
  }
}

TEST(UserPathsTest, DevZeroIsRefusedNotReadForever) {
  for (const Loader& l : Loaders()) {
    absl::Status s = LoadOrDie(l, "/dev/zero", "a device");
    EXPECT_FALSE(s.ok()) << l.name;
    EXPECT_THAT(s.message(), HasSubstr(Named(l, "/dev/zero"))) << l.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("not a regular file")) << l.name << ": " << s;
  }
}

TEST(UserPathsTest, DirectoryWhereAFileIsWantedIsRefused) {
  const std::string dir = Tmp("empty_dir");
  ::mkdir(dir.c_str(), 0700);
  for (const Loader& l : Loaders()) {
    absl::Status s = LoadOrDie(l, dir, "a directory");
    EXPECT_FALSE(s.ok()) << l.name;
    EXPECT_THAT(s.message(), HasSubstr(Named(l, dir))) << l.name << ": " << s;
  }
}

TEST(UserPathsTest, DanglingSymlinkIsNotFound) {
  const std::string link = Tmp("dangling");
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink(Tmp("no_such_target").c_str(), link.c_str()), 0);
  for (const Loader& l : Loaders()) {
    absl::Status s = LoadOrDie(l, link, "a dangling symlink");
    EXPECT_FALSE(s.ok()) << l.name;
    EXPECT_THAT(s.message(), HasSubstr(Named(l, link))) << l.name << ": " << s;
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << l.name << ": " << s;
  }
}

}  // namespace
}  // namespace dk
