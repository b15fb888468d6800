// BuildModelElfs: byte-identical to what the rules build for the same shape (the
// smollm2_135m chain from its GGUF; qwen25_0_5b's from its config.json), and a
// cache that serves whole entries only.
#include "chain/model_elf.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "weights/test_util.h"

namespace dk::chain {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;
using ::testing::HasSubstr;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ModelElfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    runfiles_.reset(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
  }
  std::string Cache(const std::string& name) {
    const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
    return dir;
  }
  std::string Rules(const std::string& model, const std::string& stage) {
    return Slurp(runfiles_->Rlocation("decodekit/models/" + model + "/" + stage + ".elf"));
  }
  std::unique_ptr<Runfiles> runfiles_;
};

TEST_F(ModelElfTest, AGgufsChainIsByteIdenticalToTheRules) {
  const std::string gguf = runfiles_->Rlocation("smollm2_135m/model.gguf");
  ModelElfOptions options{.name = "smollm2_135m", .max_context = 2048, .cache_dir = Cache("gguf"), .up_to = ""};
  auto built = BuildModelElfs(gguf, options);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_TRUE(built->gguf);
  std::vector<std::string> names;
  for (const BuiltStage& s : built->stages) {
    names.push_back(s.name);
    EXPECT_FALSE(s.from_cache) << s.name;
    const std::string rules = Rules("smollm2_135m", s.name);
    ASSERT_FALSE(rules.empty()) << s.name;
    EXPECT_TRUE(Slurp(s.elf_path) == rules) << s.name << " differs from //models/smollm2_135m:" << s.name;
  }
  EXPECT_THAT(names, ::testing::ElementsAre("decode", "decode_aligned", "decode_bo", "decode_opt", "decode_fused",
                                            "decode_x12", "decode_q8", "decode_gguf", "decode_spec"));
  EXPECT_EQ(built->stages[built->best].name, "decode_gguf");
}

TEST_F(ModelElfTest, AConfigJsonsChainIsByteIdenticalToTheRules) {
  const std::string config = runfiles_->Rlocation("decodekit/models/qwen25_0_5b/config.json");
  ModelElfOptions options{.name = "qwen25_0_5b", .max_context = 2048, .cache_dir = Cache("hf"), .up_to = "decode_q8"};
  auto built = BuildModelElfs(config, options);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_FALSE(built->gguf);
  ASSERT_EQ(built->stages.size(), 7u);  // up to decode_q8
  for (const BuiltStage& s : built->stages) {
    EXPECT_TRUE(Slurp(s.elf_path) == Rules("qwen25_0_5b", s.name)) << s.name;
  }
  EXPECT_EQ(built->stages[built->best].name, "decode_x12");
}

TEST_F(ModelElfTest, TheCacheServesWholeEntriesAndRebuildsACorruptOne) {
  const std::string config = runfiles_->Rlocation("decodekit/models/qwen25_0_5b/config.json");
  ModelElfOptions options{.name = "q", .max_context = 256, .cache_dir = Cache("cache"), .up_to = "decode_opt"};
  auto first = BuildModelElfs(config, options);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = BuildModelElfs(config, options);
  ASSERT_TRUE(second.ok()) << second.status();
  for (size_t i = 0; i < second->stages.size(); ++i) {
    EXPECT_TRUE(second->stages[i].from_cache) << second->stages[i].name;
    EXPECT_EQ(second->stages[i].elf_path, first->stages[i].elf_path);
  }
  // Another context is another shape: another key.
  ModelElfOptions longer = options;
  longer.max_context = 512;
  auto other = BuildModelElfs(config, longer);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->stages[0].key, first->stages[0].key);
  EXPECT_FALSE(other->stages[0].from_cache);

  // One byte changed in decode_bo: rebuilt, never used, and whole again.
  const std::string path = first->stages[2].elf_path;
  const std::string good = Slurp(path);
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x20;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
  auto third = BuildModelElfs(config, options);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(third->stages[1].from_cache);
  EXPECT_FALSE(third->stages[2].from_cache);
  EXPECT_TRUE(third->stages[2].rebuilt_corrupt);
  EXPECT_TRUE(Slurp(path) == good);
  EXPECT_THAT(Describe(config, *third, 2), HasSubstr("rebuilt: the cached entry was corrupt"));
  // Another stage's whole ELF in its place (it parses; its digest does not match).
  std::ofstream(path, std::ios::binary | std::ios::trunc) << Slurp(first->stages[1].elf_path);
  auto swapped = BuildModelElfs(config, options);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_TRUE(swapped->stages[2].rebuilt_corrupt);
  EXPECT_TRUE(Slurp(path) == good);
  // A truncated entry too.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << good.substr(0, good.size() / 2);
  auto fourth = BuildModelElfs(config, options);
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_TRUE(fourth->stages[2].rebuilt_corrupt);
  EXPECT_TRUE(Slurp(path) == good);
}

// A GGUF whose q / k and v are stored in different block formats (as llama.cpp's
// Q4_K_M keeps attn_v in Q6_K in some layers): the fused q/k/v launch of decode_q8
// cannot take the file's blocks, so decode_gguf is made from decode_opt, then fused,
// and the stage says so. Only the header is read to build the ELFs.
TEST_F(ModelElfTest, MixedBlockFormatsAreQuantizedBeforeTheFusions) {
  constexpr uint32_t kF32 = 0, kQ4_0 = 2, kQ8_0 = 8;
  constexpr uint64_t kHidden = 64, kFfn = 128, kVocab = 64;
  const auto zeros = [](uint64_t elements, uint32_t type) {
    const uint64_t bytes = type == kF32 ? elements * 4 : type == kQ8_0 ? elements / 32 * 34 : elements / 32 * 18;
    return std::string(bytes, '\0');
  };
  weights::testing::GgufWriter w;
  w.KvString("general.architecture", "llama")
      .KvU32("llama.block_count", 1)
      .KvU32("llama.context_length", 256)
      .KvU32("llama.embedding_length", kHidden)
      .KvU32("llama.feed_forward_length", kFfn)
      .KvU32("llama.attention.head_count", 2)
      .KvU32("llama.attention.head_count_kv", 2)
      .KvF32("llama.rope.freq_base", 10000.0f)
      .KvF32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .KvU32("llama.vocab_size", kVocab);
  const auto tensor = [&](const std::string& name, uint64_t cols, uint64_t rows, uint32_t type) {
    w.Tensor(name, rows == 1 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows}, type,
             zeros(cols * rows, type));
  };
  tensor("token_embd.weight", kHidden, kVocab, kQ8_0);
  tensor("output_norm.weight", kHidden, 1, kF32);
  tensor("blk.0.attn_norm.weight", kHidden, 1, kF32);
  tensor("blk.0.attn_q.weight", kHidden, kHidden, kQ4_0);
  tensor("blk.0.attn_k.weight", kHidden, kHidden, kQ4_0);
  tensor("blk.0.attn_v.weight", kHidden, kHidden, kQ8_0);  // another format than q and k
  tensor("blk.0.attn_output.weight", kHidden, kHidden, kQ4_0);
  tensor("blk.0.ffn_norm.weight", kHidden, 1, kF32);
  tensor("blk.0.ffn_gate.weight", kHidden, kFfn, kQ4_0);
  tensor("blk.0.ffn_up.weight", kHidden, kFfn, kQ4_0);
  tensor("blk.0.ffn_down.weight", kFfn, kHidden, kQ8_0);
  const std::string path = Cache("mixed.gguf");
  weights::testing::WriteFile(path, w.Bytes());
  auto built = BuildModelElfs(path, {.name = "mixed", .max_context = 0, .cache_dir = Cache("mixed"), .up_to = ""});
  ASSERT_TRUE(built.ok()) << built.status();
  auto gguf = FindStage(*built, "decode_gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(*gguf, built->best);
  const std::string& how = built->stages[*gguf].how;
  EXPECT_THAT(how, HasSubstr("over decode_opt, then fuse_kernels"));
  EXPECT_THAT(how, HasSubstr("over decode_q8 it failed"));
  EXPECT_THAT(Describe(path, *built, *gguf), HasSubstr(how));
  // From the cache: the same account of how it was made.
  auto again = BuildModelElfs(path, {.name = "mixed", .max_context = 0, .cache_dir = Cache("mixed"), .up_to = ""});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->stages[*gguf].from_cache);
  EXPECT_EQ(again->stages[*gguf].how, how);
  // decode_spec runs over it.
  EXPECT_EQ(built->stages.back().name, "decode_spec");
}

TEST_F(ModelElfTest, BadRequestsAreClearErrors) {
  const std::string config = runfiles_->Rlocation("decodekit/models/qwen25_0_5b/config.json");
  // A cache directory that cannot be created: a path under a regular file.
  const std::string file = Cache("plain_file");
  std::ofstream(file) << "x";
  auto unwritable = BuildModelElfs(config, {.name = "", .max_context = 256, .cache_dir = file + "/elf", .up_to = ""});
  EXPECT_EQ(unwritable.status().code(), absl::StatusCode::kFailedPrecondition) << unwritable.status();
  EXPECT_THAT(unwritable.status().message(), HasSubstr(file));
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string ro = Cache("read_only");
    ::mkdir(ro.c_str(), 0555);
    auto denied = BuildModelElfs(config, {.name = "", .max_context = 256, .cache_dir = ro, .up_to = ""});
    EXPECT_EQ(denied.status().code(), absl::StatusCode::kFailedPrecondition) << denied.status();
  }
  auto unknown = BuildModelElfs(config, {.name = "", .max_context = 256, .cache_dir = Cache("u"), .up_to = "decode_gguf"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
  EXPECT_THAT(unknown.status().message(), HasSubstr("decode_x12"));  // names the chain's stages
  auto missing = BuildModelElfs(Cache("nothing.gguf"), {.name = "", .max_context = 0, .cache_dir = Cache("m"), .up_to = ""});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

}  // namespace
}  // namespace dk::chain
