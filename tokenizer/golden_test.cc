// Compares the tokenizer with HuggingFace `tokenizers` on every string of the golden
// corpus, in both directions. Goldens: tokenizer/testdata/*_goldens.json, written by
// tools/tokenizer_goldens/make_goldens.py (see its docstring to regenerate).
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "weights/gguf.h"

namespace dk::tokenizer {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

struct GoldenCase {
  std::string category;
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

struct Goldens {
  bool adds_bos = false;
  std::vector<GoldenCase> cases;
};

class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    runfiles_.reset(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
  }

  std::string Path(const std::string& rlocation) { return runfiles_->Rlocation(rlocation); }

  std::string Read(const std::string& rlocation) {
    std::ifstream in(Path(rlocation), std::ios::binary);
    EXPECT_TRUE(in.good()) << "cannot open " << rlocation;
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  Goldens LoadGoldens(const std::string& rlocation) {
    nlohmann::json j = nlohmann::json::parse(Read(rlocation));
    Goldens g;
    g.adds_bos = j.at("adds_bos").get<bool>();
    for (const auto& c : j.at("cases")) {
      g.cases.push_back(GoldenCase{c.at("category").get<std::string>(),
                                   c.at("text").get<std::string>(),
                                   c.at("ids").get<std::vector<int32_t>>(),
                                   c.at("decoded").get<std::string>()});
    }
    return g;
  }

  // Every case: Encode == HF ids, Decode(HF ids) == HF decode, decode(encode(s)) == s.
  void CheckAll(const Tokenizer& tok, const Goldens& goldens, absl::string_view label) {
    ASSERT_GE(goldens.cases.size(), 300u);
    int encode_mismatches = 0, decode_mismatches = 0, roundtrip_mismatches = 0;
    for (const GoldenCase& c : goldens.cases) {
      absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(c.text);
      ASSERT_TRUE(ids.ok()) << ids.status();
      if (*ids != c.ids) {
        ++encode_mismatches;
        ADD_FAILURE() << label << " encode mismatch [" << c.category << "] text=\"" << c.text
                      << "\"\n  HF:   " << absl::StrJoin(c.ids, " ")
                      << "\n  ours: " << absl::StrJoin(*ids, " ");
      }
      absl::StatusOr<std::string> decoded = tok.Decode(c.ids);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      if (*decoded != c.decoded) {
        ++decode_mismatches;
        ADD_FAILURE() << label << " decode mismatch [" << c.category << "]: HF \"" << c.decoded
                      << "\" ours \"" << *decoded << "\"";
      }
      absl::StatusOr<std::vector<int32_t>> plain = tok.Encode(c.text, /*add_special_tokens=*/false);
      ASSERT_TRUE(plain.ok());
      absl::StatusOr<std::string> back = tok.Decode(*plain);
      ASSERT_TRUE(back.ok());
      if (*back != c.text) {
        ++roundtrip_mismatches;
        ADD_FAILURE() << label << " roundtrip mismatch: \"" << c.text << "\" -> \"" << *back
                      << "\"";
      }
      // With the post-processor: BOS first iff the model adds it.
      if (goldens.adds_bos) {
        EXPECT_FALSE(ids->empty());
        if (!ids->empty()) {
          EXPECT_EQ(ids->front(), *tok.bos_id());
        }
      }
    }
    std::cout << label << ": " << goldens.cases.size() << " cases, " << encode_mismatches
              << " encode / " << decode_mismatches << " decode / " << roundtrip_mismatches
              << " roundtrip mismatches\n";
    EXPECT_EQ(encode_mismatches, 0);
    EXPECT_EQ(decode_mismatches, 0);
    EXPECT_EQ(roundtrip_mismatches, 0);
  }

  std::unique_ptr<Runfiles> runfiles_;
};

TEST_F(GoldenTest, SmolLM2FromGguf) {
  auto gguf = weights::GgufFile::Open(Path("smollm2_135m/model.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  Goldens goldens = LoadGoldens("decodekit/tokenizer/testdata/smollm2_goldens.json");
  EXPECT_FALSE(goldens.adds_bos);
  EXPECT_EQ((*tok)->vocab_size(), 49152);
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  CheckAll(**tok, goldens, "smollm2 (GGUF)");
}

TEST_F(GoldenTest, SmolLM2FromTokenizerJson) {
  auto tok = Tokenizer::Load(Path("decodekit/tokenizer/testdata/smollm2_tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  CheckAll(**tok, LoadGoldens("decodekit/tokenizer/testdata/smollm2_goldens.json"),
           "smollm2 (tokenizer.json)");
}

TEST_F(GoldenTest, Llama3StyleFromTokenizerJson) {
  auto tok = Tokenizer::Load(Path("decodekit/tokenizer/testdata/llama3_style_tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  Goldens goldens = LoadGoldens("decodekit/tokenizer/testdata/llama3_style_goldens.json");
  EXPECT_TRUE(goldens.adds_bos);
  ASSERT_TRUE((*tok)->bos_id().has_value());
  EXPECT_EQ(*(*tok)->TokenString(*(*tok)->bos_id()), "<|begin_of_text|>");
  CheckAll(**tok, goldens, "llama3_style (tokenizer.json)");
}

}  // namespace
}  // namespace dk::tokenizer
