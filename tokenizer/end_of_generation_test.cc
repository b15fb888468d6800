// End-of-generation ids on each model family's files: the real GGUFs, the family-style
// tokenizer.json files of testdata/, checkpoint directories (testdata/eog/), malformed
// configs, and GGUF metadata keys built in memory.
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/mini_gguf.h"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace dk::tokenizer {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::string Rlocation(const std::string& path) {
  static Runfiles* runfiles = [] {
    std::string error;
    Runfiles* r = Runfiles::CreateForTest(&error);
    EXPECT_NE(r, nullptr) << error;
    return r;
  }();
  return runfiles->Rlocation(path);
}

std::string Testdata(const std::string& name) {
  return Rlocation("decodekit/tokenizer/testdata/" + name);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh checkpoint directory `name` holding `tokenizer_json` as tokenizer.json and the
// config files of testdata/eog/`configs` (none when empty).
std::string Checkpoint(const std::string& name, const std::string& tokenizer_json,
                       const std::string& configs,
                       std::vector<std::string> files = {"tokenizer_config.json",
                                                         "generation_config.json"}) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
  ::mkdir(dir.c_str(), 0700);
  Write(dir + "/tokenizer.json", tokenizer_json);
  for (const std::string& file : configs.empty() ? std::vector<std::string>() : files) {
    Write(dir + "/" + file, ReadAll(Testdata("eog/" + configs + "/" + file)));
  }
  return dir;
}

std::vector<int32_t> EogIds(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(path);
  EXPECT_TRUE(tok.ok()) << tok.status();
  if (!tok.ok()) return {};
  const absl::Span<const int32_t> ids = (*tok)->end_of_generation_ids();
  return std::vector<int32_t>(ids.begin(), ids.end());
}

// The GGUF files of the two real models: their eos_token_id plus the control tokens with an
// end-of-turn text (checked with gguf-py: SmolLM2 eos 2 <|im_end|>, control 0
// <|endoftext|>; Gemma 3 eos 1 <eos>, control 106 <end_of_turn>, no eot key). llama.cpp's
// llama_vocab_is_eog also takes SmolLM2's <reponame> (4, which it reads as a fill-in-the-
// middle separator) and Gemma 3's user-defined "</s>" (212): no end of a chat turn, so not
// here.
TEST(EndOfGenerationTest, RealGgufs) {
  auto smollm2 = Tokenizer::Load(Rlocation("smollm2_135m/model.gguf"));
  ASSERT_TRUE(smollm2.ok()) << smollm2.status();
  EXPECT_EQ((*smollm2)->eos_id(), 2);
  EXPECT_THAT((*smollm2)->end_of_generation_ids(), ElementsAre(0, 2));
  EXPECT_TRUE((*smollm2)->IsEndOfGeneration(2));
  EXPECT_FALSE((*smollm2)->IsEndOfGeneration(1));  // <|im_start|>

  auto gemma3 = Tokenizer::Load(Rlocation("gemma3_270m/model.gguf"));
  ASSERT_TRUE(gemma3.ok()) << gemma3.status();
  EXPECT_EQ((*gemma3)->eos_id(), 1);
  EXPECT_EQ(*(*gemma3)->TokenString(106), "<end_of_turn>");
  EXPECT_THAT((*gemma3)->end_of_generation_ids(), ElementsAre(1, 106));
  EXPECT_FALSE((*gemma3)->IsEndOfGeneration(105));  // <start_of_turn>
}

// A tokenizer.json alone names no EOS; its special tokens with end-of-turn texts end
// generation.
TEST(EndOfGenerationTest, FamilyStyleTokenizerJsons) {
  // <|end_of_text|>, <|eot_id|>
  EXPECT_THAT(EogIds(Testdata("llama3_style_tokenizer.json")), ElementsAre(1, 4));
  // <|endoftext|>, <|im_end|>
  EXPECT_THAT(EogIds(Testdata("qwen2_style_tokenizer.json")), ElementsAre(3000, 3002));
  // <end_of_turn> (<eos> is no end-of-turn text: it comes from the configs, below)
  EXPECT_THAT(EogIds(Testdata("gemma3_style_tokenizer.json")), ElementsAre(106));
  // <|endoftext|>, <|im_end|>
  EXPECT_THAT(EogIds(Testdata("smollm2_tokenizer.json")), ElementsAre(0, 2));
}

// Llama 3.2 Instruct's vocabulary in shape: 128,000 plain tokens, then Llama 3's 256
// special tokens at their ids.
std::string Llama32TokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int id = 0; id < 128000; ++id) vocab[absl::StrCat("t", id)] = id;
  const std::vector<std::string> named = {
      "<|begin_of_text|>", "<|end_of_text|>",        "<|reserved_special_token_0|>",
      "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
      "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
      "<|eom_id|>",        "<|eot_id|>",             "<|python_tag|>"};
  nlohmann::json added = nlohmann::json::array();
  for (int i = 0; i < 256; ++i) {
    const std::string content = i < static_cast<int>(named.size())
                                    ? named[i]
                                    : absl::StrCat("<|reserved_special_token_", i - 8, "|>");
    added.push_back({{"id", 128000 + i}, {"content", content}, {"special", true},
                     {"normalized", false}});
  }
  nlohmann::json root = {
      {"added_tokens", added},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return root.dump();
}

TEST(EndOfGenerationTest, Llama32InstructCheckpoint) {
  const std::string json = Llama32TokenizerJson();
  const std::string dir = Checkpoint("llama32", json, "llama32_instruct");
  auto tok = Tokenizer::Load(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 128256);
  EXPECT_EQ((*tok)->eos_id(), 128009);  // tokenizer_config.json: "<|eot_id|>"
  EXPECT_EQ((*tok)->bos_id(), 128000);
  EXPECT_THAT((*tok)->end_of_generation_ids(), ElementsAre(128001, 128008, 128009));
  // The same directory's tokenizer.json named as a file reads the configs beside it.
  EXPECT_THAT(EogIds(dir + "/tokenizer.json"), ElementsAre(128001, 128008, 128009));
}

TEST(EndOfGenerationTest, FamilyCheckpoints) {
  struct Family {
    const char* name;  // testdata/eog/<name>/, testdata/<tokenizer>
    const char* tokenizer;
    int32_t eos;
    std::optional<int32_t> bos;
    std::vector<int32_t> eog;
  };
  const Family families[] = {
      // "bos_token": null; generation_config [3002, 3000].
      {"qwen2", "qwen2_style_tokenizer.json", 3002, std::nullopt, {3000, 3002}},
      // The object form {"content": "<eos>"}; generation_config [1, 106].
      {"gemma3", "gemma3_style_tokenizer.json", 1, 2, {1, 106}},
      // eos_token_id one integer.
      {"smollm2", "smollm2_tokenizer.json", 2, 1, {0, 2}},
  };
  for (const Family& f : families) {
    auto tok = Tokenizer::Load(Checkpoint(f.name, ReadAll(Testdata(f.tokenizer)), f.name));
    ASSERT_TRUE(tok.ok()) << f.name << ": " << tok.status();
    EXPECT_EQ((*tok)->eos_id(), f.eos) << f.name;
    EXPECT_EQ((*tok)->bos_id(), f.bos) << f.name;
    EXPECT_THAT((*tok)->end_of_generation_ids(), ElementsAreArray(f.eog)) << f.name;
  }
}

// generation_config.json alone: its ids end generation, and EOS stays unset.
TEST(EndOfGenerationTest, GenerationConfigListAlone) {
  const std::string dir =
      Checkpoint("gemma3_generation_only", ReadAll(Testdata("gemma3_style_tokenizer.json")),
                 "gemma3", {"generation_config.json"});
  auto tok = Tokenizer::Load(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->eos_id().has_value());
  EXPECT_THAT((*tok)->end_of_generation_ids(), ElementsAre(1, 106));
  // Every entry counts, not only the first (these three have no end-of-turn text).
  Write(dir + "/generation_config.json", R"({"eos_token_id": [5, 4, 3]})");
  EXPECT_THAT(EogIds(dir), ElementsAre(3, 4, 5, 106));
  // A tokenizer.json file under another name is no checkpoint's: no configs beside it.
  const std::string other = dir + "/gemma.json";
  Write(other, ReadAll(dir + "/tokenizer.json"));
  EXPECT_THAT(EogIds(other), ElementsAre(106));
}

// Malformed configs: InvalidArgument naming the file and the key.
TEST(EndOfGenerationTest, MalformedConfigsAreRefused) {
  const std::string json = ReadAll(Testdata("qwen2_style_tokenizer.json"));
  const std::string dir = Checkpoint("malformed", json, "");
  struct Case {
    const char* file;
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"generation_config.json", R"({"eos_token_id": [3002, 3026]})",
       "generation_config.json: eos_token_id[1] = 3026 is out of range [0, 3026)"},
      {"generation_config.json", R"({"eos_token_id": [3002, "x"]})",
       "generation_config.json: eos_token_id[1] = \"x\" is not an integer token id"},
      {"generation_config.json", R"({"eos_token_id": -1})",
       "generation_config.json: eos_token_id = -1 is out of range"},
      {"generation_config.json", R"({"eos_token_id": 2.0})",
       "generation_config.json: eos_token_id = 2.0 is not an integer token id"},
      {"generation_config.json", R"({"eos_token_id": [1, 2)",
       "generation_config.json: not a JSON object"},
      {"tokenizer_config.json", R"({"eos_token": "<|im_stop|>"})",
       "tokenizer_config.json: eos_token '<|im_stop|>' is not a token of the tokenizer"},
      {"tokenizer_config.json", R"({"eos_token": {"text": "<|im_end|>"}})",
       "tokenizer_config.json: eos_token is neither a token's text nor an object"},
      {"tokenizer_config.json", R"({"bos_token": 3001})",
       "tokenizer_config.json: bos_token is neither a token's text nor an object"},
      {"tokenizer_config.json", "[]", "tokenizer_config.json: not a JSON object"},
  };
  for (const Case& c : cases) {
    std::remove((dir + "/generation_config.json").c_str());
    std::remove((dir + "/tokenizer_config.json").c_str());
    Write(dir + "/" + c.file, c.text);
    const absl::Status s = Tokenizer::Load(dir).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(dir, "/", c.message))) << c.text;
  }
}

// A byte-level GGUF in small: 256 byte tokens, then end-of-turn texts of several types.
MiniGguf EogGguf(const std::vector<int32_t>& special_types) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(b >= '!' && b <= '~' ? std::string(1, static_cast<char>(b))
                                          : absl::StrCat("<b", b, ">"));
    types.push_back(b >= '!' && b <= '~' ? 1 : 4);
  }
  const std::vector<std::string> specials = {"<|begin|>", "<|eot_id|>", "<|eom_id|>",
                                             "<|im_end|>", "<|end|>"};
  for (size_t i = 0; i < specials.size(); ++i) {
    tokens.push_back(specials[i]);
    types.push_back(special_types[i]);
  }
  MiniGguf g;
  g.Str("tokenizer.ggml.model", "gpt2")
      .Strs("tokenizer.ggml.tokens", tokens)
      .Strs("tokenizer.ggml.merges", {})
      .I32s("tokenizer.ggml.token_type", types)
      .U32("tokenizer.ggml.eos_token_id", 256);
  return g;
}

TEST(EndOfGenerationTest, GgufKeysAndControlTokens) {
  // Only control tokens count by their text: <|eot_id|> (257) and <|end|> (260) are, and
  // <|eom_id|> (258, user-defined) and <|im_end|> (259, normal) are not.
  auto gguf = EogGguf({3, 3, 4, 1, 3}).Build();
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->end_of_generation_ids(), ElementsAre(256, 257, 260));
  // The eot and eom keys count whatever the token.
  gguf = EogGguf({3, 3, 4, 1, 3})
             .U32("tokenizer.ggml.eot_token_id", 259)
             .U32("tokenizer.ggml.eom_token_id", 258)
             .Build();
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->end_of_generation_ids(), ElementsAre(256, 257, 258, 259, 260));
  // Out of range: named.
  gguf = EogGguf({3, 3, 4, 1, 3}).U32("tokenizer.ggml.eom_token_id", 261).Build();
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const absl::Status s = Tokenizer::FromGguf(**gguf).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.eom_token_id = 261 is out of range [0, 261)"));
}

// A hand-built spec: Create sorts, drops repeats, adds EOS, refuses an id out of range.
TEST(EndOfGenerationTest, CreateNormalizesTheSet) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(absl::StrCat("<", b, ">"));
  spec.eos_id = 7;
  spec.eog_ids = {200, 3, 200};
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->end_of_generation_ids(), ElementsAre(3, 7, 200));
  spec.eog_ids = {256};
  EXPECT_THAT(Tokenizer::Create(spec).status().message(),
              HasSubstr("end-of-generation id 256 is out of range [0, 256)"));
}

}  // namespace
}  // namespace dk::tokenizer
