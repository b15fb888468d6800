// Compares the tokenizer with HuggingFace `tokenizers` on every string of the golden
// corpus, in both directions. Goldens: tokenizer/testdata/*_goldens.json, written by
// tools/tokenizer_goldens/make_goldens.py (see its docstring to regenerate).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
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
  // Whether HF's decode(encode(s)) is s (goldens without the field: it must be); where
  // not, what HF gives back instead.
  bool roundtrip = true;
  std::string roundtrip_text;
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
      GoldenCase gc{c.at("category").get<std::string>(), c.at("text").get<std::string>(),
                    c.at("ids").get<std::vector<int32_t>>(), c.at("decoded").get<std::string>()};
      if (c.contains("roundtrip")) {
        gc.roundtrip = c.at("roundtrip").get<bool>();
        if (!gc.roundtrip) gc.roundtrip_text = c.at("roundtrip_text").get<std::string>();
      }
      g.cases.push_back(std::move(gc));
    }
    return g;
  }

  // Every case: Encode == HF ids, Decode(HF ids) == HF decode, decode(encode(s)) == s
  // (where HF's own round trip does not give s back, e.g. NFC composing a decomposed
  // accent: what HF gives back). Returns the texts HF does not round-trip.
  std::vector<std::string> CheckAll(const Tokenizer& tok, const Goldens& goldens,
                                    absl::string_view label) {
    std::vector<std::string> not_roundtripping;
    EXPECT_GE(goldens.cases.size(), 300u);
    int encode_mismatches = 0, decode_mismatches = 0, roundtrip_mismatches = 0;
    for (const GoldenCase& c : goldens.cases) {
      absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(c.text);
      if (!ids.ok()) {
        ADD_FAILURE() << label << " encode failed on \"" << c.text << "\": " << ids.status();
        continue;
      }
      if (*ids != c.ids) {
        ++encode_mismatches;
        ADD_FAILURE() << label << " encode mismatch [" << c.category << "] text=\"" << c.text
                      << "\"\n  HF:   " << absl::StrJoin(c.ids, " ")
                      << "\n  ours: " << absl::StrJoin(*ids, " ");
      }
      absl::StatusOr<std::string> decoded = tok.Decode(c.ids);
      if (!decoded.ok()) {
        ADD_FAILURE() << label << " decode failed: " << decoded.status();
        continue;
      }
      if (*decoded != c.decoded) {
        ++decode_mismatches;
        ADD_FAILURE() << label << " decode mismatch [" << c.category << "]: HF \"" << c.decoded
                      << "\" ours \"" << *decoded << "\"";
      }
      absl::StatusOr<std::vector<int32_t>> plain = tok.Encode(c.text, /*add_special_tokens=*/false);
      absl::StatusOr<std::string> back =
          plain.ok() ? tok.Decode(*plain) : absl::StatusOr<std::string>(plain.status());
      if (!back.ok()) {
        ADD_FAILURE() << label << " roundtrip failed: " << back.status();
        continue;
      }
      if (!c.roundtrip) not_roundtripping.push_back(c.text);
      const std::string& expected_back = c.roundtrip ? c.text : c.roundtrip_text;
      if (*back != expected_back) {
        ++roundtrip_mismatches;
        ADD_FAILURE() << label << " roundtrip mismatch: \"" << c.text << "\" -> \"" << *back
                      << "\" (HF: \"" << expected_back << "\")";
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
    for (const std::string& text : not_roundtripping) {
      std::cout << label << ": HF itself does not round-trip \"" << text << "\"\n";
    }
    EXPECT_EQ(encode_mismatches, 0);
    EXPECT_EQ(decode_mismatches, 0);
    EXPECT_EQ(roundtrip_mismatches, 0);
    return not_roundtripping;
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

TEST_F(GoldenTest, Qwen2StyleFromTokenizerJson) {
  auto tok = Tokenizer::Load(Path("decodekit/tokenizer/testdata/qwen2_style_tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  Goldens goldens = LoadGoldens("decodekit/tokenizer/testdata/qwen2_style_goldens.json");
  EXPECT_FALSE(goldens.adds_bos);
  EXPECT_FALSE((*tok)->bos_id().has_value());
  EXPECT_EQ((*tok)->spec().normalizer.size(), 1u);
  EXPECT_TRUE((*tok)->spec().byte_level);
  EXPECT_EQ((*tok)->TokenToId("<|im_start|>"), 3001);
  EXPECT_LT((*tok)->vocab_size(), 151936);  // Qwen2.5 / Qwen3 embedding rows
  const std::vector<std::string> not_roundtripping =
      CheckAll(**tok, goldens, "qwen2_style (tokenizer.json)");
  // NFC composes the corpus's decomposed accents (e + U+0301, n + U+0303), in HF and here;
  // nothing else fails to round-trip.
  EXPECT_EQ(not_roundtripping.size(), 2u);
}

TEST_F(GoldenTest, Gemma3StyleFromTokenizerJson) {
  auto tok = Tokenizer::Load(Path("decodekit/tokenizer/testdata/gemma3_style_tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  Goldens goldens = LoadGoldens("decodekit/tokenizer/testdata/gemma3_style_goldens.json");
  EXPECT_TRUE(goldens.adds_bos);
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_FALSE((*tok)->spec().byte_level);
  EXPECT_TRUE((*tok)->spec().byte_fallback);
  EXPECT_EQ((*tok)->TokenToId("<start_of_turn>"), 105);
  EXPECT_LT((*tok)->vocab_size(), 262144);  // Gemma 3 embedding rows
  // Byte fallback is exercised: some golden ids are <0xXX> tokens.
  int byte_fallback_cases = 0;
  for (const GoldenCase& c : goldens.cases) {
    for (int32_t id : c.ids) {
      if (absl::StartsWith(*(*tok)->TokenString(id), "<0x")) {
        ++byte_fallback_cases;
        break;
      }
    }
  }
  EXPECT_GT(byte_fallback_cases, 50);
  EXPECT_THAT(CheckAll(**tok, goldens, "gemma3_style (tokenizer.json)"), ::testing::IsEmpty());
}

// The real Gemma 3 vocabulary (SentencePiece BPE, 262,144 pieces) from its GGUF, against
// the tokenizer transformers builds from the same file: the 380 corpus strings plus the
// "gemma3" ones (control and user-defined tokens, space runs).
TEST_F(GoldenTest, Gemma3270mFromGguf) {
  auto gguf = weights::GgufFile::Open(Path("gemma3_270m/model.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const auto start = std::chrono::steady_clock::now();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::cout << "gemma3_270m tokenizer loaded in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
  Goldens goldens = LoadGoldens("decodekit/tokenizer/testdata/gemma3_270m_goldens.json");
  EXPECT_TRUE(goldens.adds_bos);
  EXPECT_EQ((*tok)->vocab_size(), 262144);
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_FALSE((*tok)->spec().byte_level);
  EXPECT_TRUE((*tok)->spec().merges_from_vocab);
  EXPECT_EQ((*tok)->TokenToId("<start_of_turn>"), 105);
  // The file spells the space runs with spaces; HF (and so the tokenizer) with "▁".
  EXPECT_EQ(*(*tok)->TokenString(138), "\u2581\u2581");
  // Byte fallback and the space runs are exercised.
  int byte_fallback_cases = 0, space_run_cases = 0;
  for (const GoldenCase& c : goldens.cases) {
    auto any_in = [&c](int32_t lo, int32_t hi) {
      return std::any_of(c.ids.begin(), c.ids.end(), [&](int32_t id) { return id >= lo && id <= hi; });
    };
    byte_fallback_cases += any_in(238, 493);  // <0x00>..<0xFF>
    space_run_cases += any_in(138, 167);
  }
  EXPECT_GT(byte_fallback_cases, 20);
  EXPECT_GT(space_run_cases, 20);
  // HF decodes a "▁" typed in the text as a space, so those do not round-trip (here neither).
  EXPECT_THAT(CheckAll(**tok, goldens, "gemma3_270m (GGUF)"),
              ::testing::ElementsAre("\u2581 already a marker", "\u2581\u2581\u2581", "a\u2581b c"));
}

}  // namespace
}  // namespace dk::tokenizer
