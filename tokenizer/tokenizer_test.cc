#include "tokenizer/tokenizer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/mini_gguf.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"
#include "weights/gguf.h"

namespace dk::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string Cp(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

// --- UTF-8 --------------------------------------------------------------------------

TEST(Utf8Test, ByteAlphabet) {
  EXPECT_EQ(ByteToUnicode('a'), 'a');
  EXPECT_EQ(ByteToUnicode(' '), 0x120u);  // 'Ġ'
  EXPECT_EQ(ByteToUnicode('\n'), 0x10Au);  // 'Ċ'
  for (int b = 0; b < 256; ++b) EXPECT_EQ(UnicodeToByte(ByteToUnicode(b)), b);
  EXPECT_EQ(UnicodeToByte(0x4E2D), -1);
}

TEST(Utf8Test, Validate) {
  EXPECT_TRUE(ValidateUtf8("héllo 你好 😀").ok());
  absl::Status s = ValidateUtf8("ab\xC3");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("byte offset 2"));
  EXPECT_FALSE(ValidateUtf8("\xC0\x80").ok());          // overlong
  EXPECT_FALSE(ValidateUtf8("\xED\xA0\x80").ok());      // surrogate
  EXPECT_FALSE(ValidateUtf8("\xF4\x90\x80\x80").ok());  // > U+10FFFF
  EXPECT_FALSE(ValidateUtf8("\xFF").ok());
}

TEST(Utf8Test, LossyUsesMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(Utf8Lossy("a\xF0\x9F\x98z"), "a" + r + "z");  // truncated 4-byte: one U+FFFD
  EXPECT_EQ(Utf8Lossy("\xC0\x80"), r + r);
  EXPECT_EQ(Utf8Lossy("\xE2\x82"), r);
  EXPECT_EQ(Utf8Lossy("ok"), "ok");
}

// --- Pre-tokenizer --------------------------------------------------------------------

std::vector<std::string> SplitWith(const std::vector<std::string>& patterns,
                                   absl::string_view text) {
  auto pt = PreTokenizer::Create(patterns);
  EXPECT_TRUE(pt.ok()) << pt.status();
  std::vector<absl::string_view> pieces;
  (*pt)->Split(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

TEST(PreTokenizerTest, Gpt2Regex) {
  const std::vector<std::string> gpt2 = {std::string(kGpt2Pattern)};
  EXPECT_THAT(SplitWith(gpt2, "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(SplitWith(gpt2, "I'm here"), ElementsAre("I", "'m", " here"));
  // \s+(?!\S): the run gives its last space to the next word.
  EXPECT_THAT(SplitWith(gpt2, "a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(SplitWith(gpt2, "a \tb"), ElementsAre("a", " ", "\t", "b"));
  EXPECT_THAT(SplitWith(gpt2, "a\n\nb"), ElementsAre("a", "\n", "\n", "b"));
  EXPECT_THAT(SplitWith(gpt2, "a   "), ElementsAre("a", "   "));
  EXPECT_THAT(SplitWith(gpt2, "a 1"), ElementsAre("a", " 1"));
  // Unicode whitespace (RE2's \s is ASCII-only; Oniguruma's is not).
  EXPECT_THAT(SplitWith(gpt2, "x" + Cp(0x3000) + Cp(0x3000) + "y"),
              ElementsAre("x", Cp(0x3000), Cp(0x3000), "y"));
  EXPECT_THAT(SplitWith(gpt2, "x\v\vy"), ElementsAre("x", "\v", "\v", "y"));
  EXPECT_THAT(SplitWith(gpt2, "你好 世界"), ElementsAre("你好", " 世界"));
  EXPECT_THAT(SplitWith(gpt2, ""), IsEmpty());
}

TEST(PreTokenizerTest, DigitsThenGpt2) {
  const std::vector<std::string> smollm = {std::string(kDigitsIndividualPattern),
                                           std::string(kGpt2Pattern)};
  EXPECT_THAT(SplitWith(smollm, "in 2025 we"),
              ElementsAre("in", " ", "2", "0", "2", "5", " we"));
  EXPECT_THAT(SplitWith(smollm, "a  1"), ElementsAre("a", "  ", "1"));
}

TEST(PreTokenizerTest, Llama3Regex) {
  const std::vector<std::string> llama3 = {std::string(kLlama3Pattern)};
  EXPECT_THAT(SplitWith(llama3, "12345 apples"), ElementsAre("123", "45", " apples"));
  EXPECT_THAT(SplitWith(llama3, "IT'S ok"), ElementsAre("IT", "'S", " ok"));
  EXPECT_THAT(SplitWith(llama3, "a  \n\n  b"), ElementsAre("a", "  \n\n", " ", " b"));
}

TEST(PreTokenizerTest, TranslateRegex) {
  auto t = TranslateRegex(R"(\s+(?!\S)|\s+)");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->whitespace_lookahead);
  EXPECT_THAT(t->re2_pattern, HasSubstr(R"(\x{3000})"));
  auto groups = TranslateRegex("(a)|(?:b)|(?i:c)");
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(groups->re2_pattern, "(?:a)|(?:b)|(?i:c)");
  EXPECT_FALSE(groups->whitespace_lookahead);
  EXPECT_EQ(TranslateRegex("(?<=a)b").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(TranslateRegex("a(?=b)").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(TranslateRegex("a++").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(TranslateRegex(R"((a)\1)").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(PreTokenizer::Create({"(unclosed"}).ok());
}

// --- A tiny byte-level BPE built in the test ------------------------------------------

// 256 byte tokens, then "he", "ll", "hell", "hello", "Ġw", then specials.
TokenizerSpec TinySpec() {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(Cp(ByteToUnicode(b)));
  for (const char* t : {"he", "ll", "hell", "hello", "Ġw", "lo"}) spec.tokens.push_back(t);
  spec.tokens.push_back("<|bos|>");
  spec.tokens.push_back("<|eot|>");
  spec.tokens.push_back("<|eot|>x");
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"l", "o"}};
  spec.added_tokens = {{262, "<|bos|>", true}, {263, "<|eot|>", true}, {264, "<|eot|>x", true}};
  spec.pre_tokenizer_patterns = {std::string(kGpt2Pattern)};
  spec.bos_id = 262;
  return spec;
}

TEST(TokenizerTest, MergesByRank) {
  auto tok = Tokenizer::Create(TinySpec());
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "hello": h e l l o -> he l l o -> he ll o -> hell o -> hello. ("lo" ranks after "ll".)
  EXPECT_THAT(*(*tok)->Encode("hello"), ElementsAre(259));
  EXPECT_THAT(*(*tok)->Encode("hello w"), ElementsAre(259, 260));
  EXPECT_THAT(*(*tok)->Encode("lo"), ElementsAre(261));
  EXPECT_THAT(*(*tok)->Encode(""), IsEmpty());
  EXPECT_EQ(*(*tok)->Decode({259, 260}), "hello w");
}

TEST(TokenizerTest, AddedTokensMatchWholeLongestFirst) {
  auto tok = Tokenizer::Create(TinySpec());
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT(*(*tok)->Encode("<|bos|>hello<|eot|>"), ElementsAre(262, 259, 263));
  EXPECT_THAT(*(*tok)->Encode("<|eot|>x"), ElementsAre(264));
  std::vector<int32_t> partial = *(*tok)->Encode("<|bos|");
  EXPECT_THAT(partial, ::testing::Not(::testing::Contains(262)));
  EXPECT_EQ(*(*tok)->Decode(partial), "<|bos|");
}

TEST(TokenizerTest, BosFromPostProcessor) {
  TokenizerSpec spec = TinySpec();
  spec.prefix_ids = {262};
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT(*(*tok)->Encode("hello"), ElementsAre(262, 259));
  EXPECT_THAT(*(*tok)->Encode("hello", /*add_special_tokens=*/false), ElementsAre(259));
  EXPECT_THAT(*(*tok)->Encode(""), ElementsAre(262));
}

TEST(TokenizerTest, IgnoreMerges) {
  TokenizerSpec spec = TinySpec();
  spec.tokens.push_back("xyz");  // in the vocabulary, but no merge path leads to it
  spec.ignore_merges = true;
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT(*(*tok)->Encode("xyz"), ElementsAre(265));
  spec.ignore_merges = false;
  auto plain = Tokenizer::Create(spec);
  EXPECT_THAT(*(*plain)->Encode("xyz"), ElementsAre('x', 'y', 'z'));
}

TEST(TokenizerTest, InvalidUtf8IsRejected) {
  auto tok = Tokenizer::Create(TinySpec());
  ASSERT_TRUE(tok.ok());
  auto ids = (*tok)->Encode("hello \xC3\x28 world");
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ids.status().message()), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(std::string(ids.status().message()), HasSubstr("byte offset 6"));
}

TEST(TokenizerTest, DecodeErrors) {
  auto tok = Tokenizer::Create(TinySpec());
  ASSERT_TRUE(tok.ok());
  auto bad = (*tok)->Decode({259, 100000});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("token id 100000 is out of range"));
  EXPECT_FALSE((*tok)->Decode({-1}).ok());
  // Half of "é" decodes to U+FFFD, as HF does.
  const std::vector<int32_t> half = *(*tok)->Encode("é");
  ASSERT_EQ(half.size(), 2u);
  EXPECT_EQ(*(*tok)->Decode({half[0]}), "\xEF\xBF\xBD");
}

TEST(TokenizerTest, StreamingNeverEmitsHalfACharacter) {
  auto tok = Tokenizer::Create(TinySpec());
  ASSERT_TRUE(tok.ok());
  const std::string text = "hé 你好 😀!";
  const std::vector<int32_t> ids = *(*tok)->Encode(text);
  StreamingDecoder stream(**tok);
  std::string out;
  for (int32_t id : ids) {
    absl::StatusOr<std::string> piece = stream.Next(id);
    ASSERT_TRUE(piece.ok());
    EXPECT_TRUE(ValidateUtf8(*piece).ok()) << "emitted a partial character";
    EXPECT_EQ(piece->find("\xEF\xBF\xBD"), std::string::npos);
    out += *piece;
  }
  out += stream.Finish();
  EXPECT_EQ(out, text);
  // A dangling lead byte is flushed as U+FFFD by Finish.
  const std::vector<int32_t> emoji = *(*tok)->Encode("😀");
  ASSERT_EQ(emoji.size(), 4u);
  EXPECT_EQ(*stream.Next(emoji[0]), "");
  EXPECT_EQ(*stream.Next(emoji[1]), "");
  EXPECT_EQ(stream.Finish(), "\xEF\xBF\xBD");
  // An invalid byte comes out at once; the following valid text is not held back.
  EXPECT_EQ(*stream.Next(emoji[1]), "\xEF\xBF\xBD");
  EXPECT_EQ(*stream.Next('a'), "a");
  EXPECT_FALSE(stream.Next(9999).ok());
}

TEST(TokenizerTest, BadSpec) {
  TokenizerSpec spec = TinySpec();
  spec.merges.push_back({"q", "zz"});
  auto tok = Tokenizer::Create(spec);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("merge #6 'q zz'"));
  spec = TinySpec();
  spec.bos_id = 5000;
  EXPECT_THAT(std::string(Tokenizer::Create(spec).status().message()), HasSubstr("BOS id 5000"));
  EXPECT_FALSE(Tokenizer::Create(TokenizerSpec()).ok());
}

TEST(TokenizerTest, MissingByteTokenIsAnError) {
  TokenizerSpec spec = TinySpec();
  spec.tokens['~'] = "not-tilde";
  auto tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT(std::string((*tok)->Encode("~").status().message()), HasSubstr("byte 0x7e"));
}

// --- tokenizer.json ----------------------------------------------------------------------

// A Llama-3-shaped tokenizer.json over the tiny vocabulary.
std::string TinyJson(absl::string_view pre_tokenizer = "",
                     absl::string_view post_processor = "") {
  std::string vocab;
  const TokenizerSpec spec = TinySpec();
  for (int32_t id = 0; id < 262; ++id) {
    std::string escaped = absl::StrReplaceAll(spec.tokens[id], {{"\\", "\\\\"}, {"\"", "\\\""}});
    absl::StrAppend(&vocab, id ? "," : "", "\"", escaped, "\":", id);
  }
  return absl::StrCat(R"({"version":"1.0","added_tokens":[
      {"id":262,"content":"<|begin_of_text|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
      {"id":263,"content":"<|eot_id|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
    "normalizer":null,
    "pre_tokenizer":)",
                      pre_tokenizer.empty()
                          ? R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})"
                          : pre_tokenizer,
                      R"(,
    "post_processor":)",
                      post_processor.empty()
                          ? R"({"type":"Sequence","processors":[{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true},{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|begin_of_text|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[],"special_tokens":{"<|begin_of_text|>":{"id":"<|begin_of_text|>","ids":[262],"tokens":["<|begin_of_text|>"]}}}]})"
                          : post_processor,
                      R"(,
    "decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},
    "model":{"type":"BPE","dropout":null,"unk_token":null,"ignore_merges":true,"vocab":{)",
                      vocab, R"(},"merges":[["h","e"],"l l",["he","ll"],["hell","o"],["Ġ","w"],["l","o"]]}})");
}

TEST(TokenizerJsonTest, Llama3Shape) {
  auto tok = Tokenizer::FromTokenizerJson(TinyJson());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 264);
  EXPECT_EQ((*tok)->bos_id(), 262);
  EXPECT_TRUE((*tok)->spec().ignore_merges);
  EXPECT_THAT(*(*tok)->Encode("hello<|eot_id|>"), ElementsAre(262, 259, 263));
  EXPECT_THAT(*(*tok)->Encode("hello", false), ElementsAre(259));
  EXPECT_EQ(*(*tok)->Decode({262, 259, 263}), "<|begin_of_text|>hello<|eot_id|>");
}

TEST(TokenizerJsonTest, Errors) {
  auto code = [](absl::string_view json) {
    return Tokenizer::FromTokenizerJson(json).status().code();
  };
  auto message = [](absl::string_view json) {
    return std::string(Tokenizer::FromTokenizerJson(json).status().message());
  };
  EXPECT_EQ(code("{not json"), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(message("{not json"), HasSubstr("not valid JSON"));
  EXPECT_THAT(message("{}"), HasSubstr("missing 'model'"));
  // Issue 15: one large id sized the vocabulary before the gap check refused it.
  EXPECT_THAT(message(R"({"model":{"type":"BPE","vocab":{"a":0,"b":16777215},"merges":[]}})"),
              HasSubstr("vocabulary token 'b' has id 16777215, but there are only 2 tokens"));
  EXPECT_THAT(message(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},)"
                      R"("added_tokens":[{"id":5,"content":"<s>"}]})"),
              HasSubstr("added token '<s>' has id 5, but there are only 2 tokens"));
  EXPECT_THAT(message(R"({"model":{"type":"BPE","merges":[]}})"), HasSubstr("model.vocab"));
  EXPECT_THAT(message(R"({"model":{"type":"BPE","vocab":{"a":0}}})"), HasSubstr("model.merges"));
  EXPECT_EQ(code(R"({"model":{"type":"Unigram","vocab":[]}})"), absl::StatusCode::kUnimplemented);
  // (An added token repeating "a" makes room for 3 ids, so the gap at 1 is what fails.)
  EXPECT_THAT(message(R"({"model":{"type":"BPE","vocab":{"a":0,"b":2},"merges":[]},"decoder":{"type":"ByteLevel"},)"
                      R"("added_tokens":[{"id":0,"content":"a"}]})"),
              HasSubstr("no token has id 1"));
  EXPECT_THAT(message(R"({"model":{"type":"BPE","vocab":{"a":-4},"merges":[]}})"),
              HasSubstr("out of range"));
  EXPECT_THAT(message(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["ab"]}})"),
              HasSubstr("model.merges[0]"));
  EXPECT_EQ(code(TinyJson(R"({"type":"Metaspace"})")), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(code(TinyJson(R"({"type":"Split","pattern":{"Regex":"(?<=a)b"},"behavior":"Isolated"})")),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(code(TinyJson("", R"({"type":"RobertaProcessing"})")),
            absl::StatusCode::kUnimplemented);
}

// --- GGUF metadata -------------------------------------------------------------------------

MiniGguf TinyGguf(const std::string& pre = "smollm") {
  const TokenizerSpec spec = TinySpec();
  std::vector<std::string> merges;
  for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
  std::vector<int32_t> types(spec.tokens.size(), 1);
  types[262] = types[263] = types[264] = 3;
  MiniGguf g;
  g.Str("tokenizer.ggml.model", "gpt2")
      .Str("tokenizer.ggml.pre", pre)
      .Strs("tokenizer.ggml.tokens", spec.tokens)
      .Strs("tokenizer.ggml.merges", merges)
      .I32s("tokenizer.ggml.token_type", types)
      .U32("tokenizer.ggml.bos_token_id", 262)
      .U32("tokenizer.ggml.eos_token_id", 263);
  return g;
}

// Gemma's SentencePiece layout in small: control tokens, a space run the file spells with
// spaces (id 4), a newline token, the 256 byte tokens, and "bc" (269) ranked before "ab"
// (270) by id.
MiniGguf TinySentencePieceGguf() {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "  ", "\n",
                                     "<start_of_turn>"};
  std::vector<int32_t> types = {3, 3, 3, 3, 4, 4, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(absl::StrFormat("<0x%02X>", b));
    types.push_back(6);
  }
  for (const char* t : {"\u2581", "x", "y", "a", "b", "c", "bc", "ab"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  MiniGguf g;
  g.Str("general.architecture", "gemma3")
      .Str("tokenizer.ggml.model", "llama")
      .Strs("tokenizer.ggml.tokens", tokens)
      .I32s("tokenizer.ggml.token_type", types)
      .U32("tokenizer.ggml.bos_token_id", 2)
      .U32("tokenizer.ggml.eos_token_id", 1)
      .U32("tokenizer.ggml.unknown_token_id", 3);
  return g;
}

TEST(TokenizerGgufTest, SentencePieceInGemmaLayout) {
  auto gguf = TinySentencePieceGguf().Build();
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(*(*tok)->TokenString(4), "\u2581\u2581");  // respelled, as transformers does
  // BOS by default (no add_bos_token); the space run merged from "▁" "▁"; "\n" and
  // <start_of_turn> matched whole; "abc" -> "a" "bc" ("bc" has the lower id); "é" by
  // byte fallback (<0xC3> <0xA9>).
  const std::string text = "x  y\nabc<start_of_turn>\xC3\xA9";
  EXPECT_THAT(*(*tok)->Encode(text), ElementsAre(2, 264, 4, 265, 5, 266, 269, 6, 7 + 0xC3, 7 + 0xA9));
  EXPECT_EQ(*(*tok)->Decode(*(*tok)->Encode(text, /*add_special_tokens=*/false)), text);
  auto no_bos = TinySentencePieceGguf().Bool("tokenizer.ggml.add_bos_token", false).Build();
  ASSERT_TRUE(no_bos.ok());
  EXPECT_THAT(*(*Tokenizer::FromGguf(**no_bos))->Encode("x y"), ElementsAre(264, 263, 265));
}

TEST(TokenizerGgufTest, Loads) {
  auto gguf = TinyGguf().Build();
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(*(*tok)->Encode("hello 12<|eot|>"),
              ElementsAre(259, ' ', '1', '2', 263));
  EXPECT_EQ((*tok)->eos_id(), 263);
}

TEST(TokenizerGgufTest, AddBosToken) {
  auto gguf = TinyGguf().Bool("tokenizer.ggml.add_bos_token", true).Build();
  ASSERT_TRUE(gguf.ok());
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT(*(*tok)->Encode("hello"), ElementsAre(262, 259));
}

TEST(TokenizerGgufTest, Errors) {
  auto message = [](const MiniGguf& g) {
    auto gguf = g.Build();
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    return std::string(Tokenizer::FromGguf(**gguf).status().message());
  };
  EXPECT_THAT(message(MiniGguf().Str("general.architecture", "llama")),
              HasSubstr("missing metadata 'tokenizer.ggml.model'"));
  EXPECT_THAT(message(MiniGguf().Str("tokenizer.ggml.model", "bert")),
              HasSubstr("supported: 'gpt2' (byte-level BPE) and 'llama' (SentencePiece BPE)"));
  EXPECT_THAT(message(MiniGguf()
                          .Str("general.architecture", "llama")
                          .Str("tokenizer.ggml.model", "llama")),
              HasSubstr("Gemma's layout only (general.architecture gemma, gemma2, gemma3), not for 'llama'"));
  EXPECT_THAT(message(TinySentencePieceGguf().Bool("tokenizer.ggml.add_space_prefix", true)),
              HasSubstr("add_space_prefix is true: a SentencePiece dummy prefix is not supported"));
  EXPECT_THAT(message(MiniGguf().Str("tokenizer.ggml.model", "gpt2")),
              HasSubstr("missing metadata 'tokenizer.ggml.tokens'"));
  EXPECT_THAT(message(MiniGguf()
                          .Str("tokenizer.ggml.model", "gpt2")
                          .Strs("tokenizer.ggml.tokens", {"a"})),
              HasSubstr("missing metadata 'tokenizer.ggml.merges'"));
  EXPECT_THAT(message(MiniGguf()
                          .Str("tokenizer.ggml.model", "gpt2")
                          .U32("tokenizer.ggml.tokens", 3)),
              HasSubstr("expected an array"));
  EXPECT_THAT(message(TinyGguf("qwen2")), HasSubstr("tokenizer.ggml.pre = 'qwen2'"));
  EXPECT_THAT(message(TinyGguf().U32("tokenizer.ggml.unknown_token_id", 99999)),
              HasSubstr("tokenizer.ggml.unknown_token_id = 99999 is out of range"));
  EXPECT_THAT(message(MiniGguf()
                          .Str("tokenizer.ggml.model", "gpt2")
                          .Strs("tokenizer.ggml.tokens", {"a", "b", "ab"})
                          .Strs("tokenizer.ggml.merges", {"ab"})),
              HasSubstr("tokenizer.ggml.merges[0] = 'ab'"));
}

// A corrupt tokenizer.ggml.tokens was reported as a bad merge (the merge "l l"
// whose result "ll" the vocabulary lacked), with the corrupt bytes printed raw.
TEST(TokenizerGgufTest, CorruptTokensAreReportedAsSuch) {
  auto message = [](const std::string& corrupt) {
    const TokenizerSpec spec = TinySpec();
    std::vector<std::string> tokens = spec.tokens;
    tokens[257] = corrupt;  // was "ll"
    std::vector<std::string> merges;
    for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
    std::vector<int32_t> types(tokens.size(), 1);
    types[262] = types[263] = types[264] = 3;
    MiniGguf g;
    g.Str("tokenizer.ggml.model", "gpt2")
        .Strs("tokenizer.ggml.tokens", tokens)
        .Strs("tokenizer.ggml.merges", merges)
        .I32s("tokenizer.ggml.token_type", types);
    auto gguf = g.Build();
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    return std::string(Tokenizer::FromGguf(**gguf).status().message());
  };
  std::string m = message("l\x01");
  EXPECT_THAT(m, HasSubstr("tokenizer.ggml.tokens[257] = 'l\\x01' (a normal token) is not byte-level BPE text"));
  EXPECT_THAT(m, Not(HasSubstr("merge")));
  EXPECT_EQ(m.find('\x01'), std::string::npos) << m;
  m = message("l\xff");
  EXPECT_THAT(m, HasSubstr("tokenizer.ggml.tokens[257] = 'l\\xff' is not valid UTF-8"));
}

// Issue 15: a broken .gguf (its magic gone) was parsed as JSON and reported as
// "not valid JSON"; the format is now told by content.
TEST(TokenizerLoadTest, FormatIsToldByContentNotByName) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  auto write = [&](const std::string& name, const std::string& bytes) {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  const std::string broken = write("broken.gguf", std::string("GGUX\3\0\0\0", 8) + std::string(64, '\0'));
  absl::Status s = Tokenizer::Load(broken).status();
  EXPECT_THAT(s.message(), HasSubstr("tokenizer " + broken + " is neither a GGUF file (no GGUF magic)"));
  EXPECT_THAT(s.message(), HasSubstr("a corrupt .gguf?"));
  EXPECT_THAT(s.message(), Not(HasSubstr("JSON")));
  // A truncated GGUF is reported by the GGUF reader, whatever the file is called.
  s = Tokenizer::Load(write("tok.bin", std::string("GGUF\3\0\0\0", 8))).status();
  EXPECT_THAT(s.message(), HasSubstr("GGUF"));
  EXPECT_THAT(s.message(), HasSubstr("truncated"));
  // JSON is JSON under any name; a JSON error names the file.
  s = Tokenizer::Load(write("tok.gguf", "  {\"model\": ")).status();
  EXPECT_THAT(s.message(), HasSubstr("tok.gguf: "));
  EXPECT_THAT(s.message(), HasSubstr("not valid JSON"));
  EXPECT_EQ(Tokenizer::Load(dir + "/none.json").status().code(), absl::StatusCode::kNotFound);
}

// /dev/zero as a tokenizer, or as a checkpoint's tokenizer.json, was read without
// bound until std::bad_alloc.
TEST(TokenizerLoadTest, WhatIsNotARegularFileIsRefused) {
  absl::Status s = Tokenizer::Load("/dev/zero").status();
  EXPECT_THAT(s.message(), HasSubstr("tokenizer /dev/zero is not a regular file"));
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/ckpt";
  ::mkdir(dir.c_str(), 0700);
  const std::string json = dir + "/tokenizer.json";
  std::remove(json.c_str());
  ASSERT_EQ(::symlink("/dev/zero", json.c_str()), 0);
  s = Tokenizer::Load(dir).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(json + " is not a regular file"));
}

// Issue 15: token types outside llama.cpp's enum were silently taken as normal.
TEST(TokenizerGgufTest, TokenTypeOutsideTheEnumIsRefused) {
  const TokenizerSpec spec = TinySpec();
  std::vector<std::string> merges;
  for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
  for (int32_t bad : {7, -1, 1 << 30}) {
    std::vector<int32_t> types(spec.tokens.size(), 1);
    types[5] = bad;
    auto gguf = MiniGguf()
                    .Str("tokenizer.ggml.model", "gpt2")
                    .Str("tokenizer.ggml.pre", "smollm")
                    .Strs("tokenizer.ggml.tokens", spec.tokens)
                    .Strs("tokenizer.ggml.merges", merges)
                    .I32s("tokenizer.ggml.token_type", types)
                    .Build();
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    const absl::Status s = Tokenizer::FromGguf(**gguf).status();
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("tokenizer.ggml.token_type[5] = ", bad,
                                                    " is not a token type")))
        << s;
  }
}

// --- Normalizers, SentencePiece-style BPE (Qwen2 / Gemma 3 layouts) ---------------------

TEST(NormalizerTest, NfcComposes) {
  // e + COMBINING ACUTE -> é; Hangul jamo -> one syllable; marks reordered by class.
  EXPECT_EQ(*NfcNormalize("caf" + std::string("e") + Cp(0x301)), "caf" + Cp(0xE9));
  EXPECT_EQ(*NfcNormalize(Cp(0x1100) + Cp(0x1161)), Cp(0xAC00));
  EXPECT_EQ(*NfcNormalize("q" + Cp(0x307) + Cp(0x323)), "q" + Cp(0x323) + Cp(0x307));
  EXPECT_EQ(*NfcNormalize("plain ascii, 你好 😀"), "plain ascii, 你好 😀");
  EXPECT_EQ(*NfcNormalize(""), "");
}

TEST(NormalizerTest, ReplaceAndSequence) {
  const std::vector<NormalizerStep> gemma = {
      {NormalizerStep::Kind::kReplace, " ", "\xE2\x96\x81"}};
  EXPECT_EQ(*Normalize(gemma, "a b  c"), "a\xE2\x96\x81" "b\xE2\x96\x81\xE2\x96\x81" "c");
  const std::vector<NormalizerStep> both = {
      {NormalizerStep::Kind::kNfc, "", ""}, {NormalizerStep::Kind::kReplace, Cp(0xE9), "E"}};
  EXPECT_EQ(*Normalize(both, "e" + Cp(0x301) + " " + Cp(0xE9)), "E E");  // NFC first
  EXPECT_EQ(*Normalize({}, "x y"), "x y");
  EXPECT_FALSE(Normalize({{NormalizerStep::Kind::kReplace, "", "z"}}, "x").ok());
}

TEST(PreTokenizerTest, SplitMergedWithPrevious) {
  // As HF's Split(" ", MergedWithPrevious): a match joins the piece before it unless that
  // piece is a match too.
  auto pt = PreTokenizer::Create({" "}, {SplitBehavior::kMergedWithPrevious});
  ASSERT_TRUE(pt.ok()) << pt.status();
  std::vector<absl::string_view> pieces;
  (*pt)->Split("a b  c", &pieces);
  EXPECT_THAT(pieces, ElementsAre("a ", "b ", " ", "c"));
  pieces.clear();
  (*pt)->Split(" a", &pieces);
  EXPECT_THAT(pieces, ElementsAre(" ", "a"));
  EXPECT_FALSE(PreTokenizer::Create({" "}, {SplitBehavior::kIsolated, SplitBehavior::kIsolated}).ok());
}

// A Qwen2-shaped tokenizer.json (NFC, the Qwen2 split, ByteLevel) over the tiny vocabulary
// plus "é" (bytes C3 A9) and its merge.
std::string TinyQwenJson(absl::string_view normalizer = R"({"type":"NFC"})") {
  std::string vocab;
  const TokenizerSpec spec = TinySpec();
  for (int32_t id = 0; id < 262; ++id) {
    std::string escaped = absl::StrReplaceAll(spec.tokens[id], {{"\\", "\\\\"}, {"\"", "\\\""}});
    absl::StrAppend(&vocab, id ? "," : "", "\"", escaped, "\":", id);
  }
  const std::string e_acute = Cp(ByteToUnicode(0xC3)) + Cp(ByteToUnicode(0xA9));
  absl::StrAppend(&vocab, ",\"", e_acute, "\":262");
  return absl::StrCat(R"({"version":"1.0","added_tokens":[
      {"id":263,"content":"<|im_start|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
    "normalizer":)", normalizer, R"(,
    "pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]},
    "post_processor":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false},
    "decoder":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false},
    "model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"","fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":{)",
                      vocab, R"(},"merges":[["h","e"],"l l",["he","ll"],["hell","o"],["Ġ","w"],["l","o"],[")",
                      Cp(ByteToUnicode(0xC3)), "\",\"", Cp(ByteToUnicode(0xA9)), R"("]]}})");
}

TEST(TokenizerJsonTest, Qwen2ShapeComposesWithNfc) {
  auto tok = Tokenizer::FromTokenizerJson(TinyQwenJson());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->bos_id().has_value());
  const std::string decomposed = "e" + Cp(0x301);  // e + COMBINING ACUTE ACCENT
  EXPECT_THAT(*(*tok)->Encode(Cp(0xE9)), ElementsAre(262));
  EXPECT_THAT(*(*tok)->Encode(decomposed), ElementsAre(262));  // NFC: the same token
  EXPECT_EQ(*(*tok)->Decode({262}), Cp(0xE9));
  // The text beside a special token is normalized too; the token is matched raw.
  EXPECT_THAT(*(*tok)->Encode("<|im_start|>" + decomposed), ElementsAre(263, 262));
  // Without the normalizer the decomposed form is 'e' and the mark's two bytes.
  auto raw = Tokenizer::FromTokenizerJson(TinyQwenJson("null"));
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_THAT(*(*raw)->Encode(decomposed), ElementsAre('e', 0xCC, 0x81));
}

// A Gemma-3-shaped tokenizer.json: Replace(" " -> "▁"), Split(" ", MergedWithPrevious),
// BPE with byte_fallback and fuse_unk, the SentencePiece decoder, <bos> from the template.
// Ids: <pad> 0, <eos> 1, <bos> 2, <unk> 3, <0x00>..<0xFF> 4..259, then ▁ h e l o ▁h he
// hel hell hello ▁hello (260..270). No "w", so "w" falls back to <0x77>.
std::string TinyGemmaJson(absl::string_view normalizer = "",
                          absl::string_view decoder = "", bool byte_fallback = true,
                          bool fuse_unk = true) {
  std::string vocab = R"("<pad>":0,"<eos>":1,"<bos>":2,"<unk>":3)";
  for (int b = 0; b < 256; ++b) absl::StrAppend(&vocab, absl::StrFormat(",\"<0x%02X>\":%d", b, b + 4));
  int id = 260;
  for (const char* t : {"\xE2\x96\x81", "h", "e", "l", "o", "\xE2\x96\x81h", "he", "hel", "hell",
                        "hello", "\xE2\x96\x81hello"}) {
    absl::StrAppend(&vocab, ",\"", t, "\":", id++);
  }
  auto added = [](int id, const char* content) {
    return absl::StrCat(R"({"id":)", id, R"(,"content":")", content,
                        R"(","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true})");
  };
  return absl::StrCat(
      R"({"version":"1.0","added_tokens":[)", added(0, "<pad>"), ",", added(1, "<eos>"), ",",
      added(2, "<bos>"), ",", added(3, "<unk>"), R"(],
    "normalizer":)",
      normalizer.empty() ? R"({"type":"Replace","pattern":{"String":" "},"content":"▁"})" : normalizer,
      R"(,
    "pre_tokenizer":{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false},
    "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<bos>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[],"special_tokens":{"<bos>":{"id":"<bos>","ids":[2],"tokens":["<bos>"]}}},
    "decoder":)",
      decoder.empty()
          ? R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"}]})"
          : decoder,
      R"(,
    "model":{"type":"BPE","dropout":null,"unk_token":"<unk>","continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":)",
      fuse_unk ? "true" : "false", R"(,"byte_fallback":)", byte_fallback ? "true" : "false",
      R"(,"ignore_merges":false,"vocab":{)", vocab,
      R"(},"merges":[["h","e"],["he","l"],["hel","l"],["▁","h"],["hell","o"],["▁","hello"]]}})");
}

TEST(TokenizerJsonTest, Gemma3Shape) {
  auto tok = Tokenizer::FromTokenizerJson(TinyGemmaJson());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_FALSE((*tok)->spec().byte_level);
  EXPECT_EQ((*tok)->bos_id(), 2);
  // BPE from characters: h e l l o -> he l l o -> hel l o -> hell o -> hello.
  EXPECT_THAT(*(*tok)->Encode("hello"), ElementsAre(2, 269));
  // Replace makes " hello" "▁hello"; (h, e) outranks (▁, h), so ▁ + hello at the end.
  EXPECT_THAT(*(*tok)->Encode(" hello", false), ElementsAre(270));
  EXPECT_THAT(*(*tok)->Encode("hello hello", false), ElementsAre(269, 270));
  EXPECT_EQ(*(*tok)->Decode({2, 269, 270}), "<bos>hello hello");
  EXPECT_EQ(*(*tok)->TokenBytes(270), " hello");
}

TEST(TokenizerJsonTest, Gemma3ByteFallback) {
  auto tok = Tokenizer::FromTokenizerJson(TinyGemmaJson());
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "w" and "你" (E4 BD A0) are not in the vocabulary: their UTF-8 bytes' <0xXX> tokens.
  EXPECT_THAT(*(*tok)->Encode("w", false), ElementsAre(0x77 + 4));
  EXPECT_THAT(*(*tok)->Encode("h你", false), ElementsAre(261, 0xE4 + 4, 0xBD + 4, 0xA0 + 4));
  EXPECT_EQ(*(*tok)->Decode({261, 0xE4 + 4, 0xBD + 4, 0xA0 + 4}), "h你");
  // A run of byte tokens that is not valid UTF-8: one U+FFFD per token, as HF's ByteFallback
  // (not one per maximal ill-formed subpart).
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(*(*tok)->Decode({0xE4 + 4, 0xBD + 4, 261}), r + r + "h");
  EXPECT_EQ(*(*tok)->Decode({0xE4 + 4}), r);
}

TEST(TokenizerJsonTest, Gemma3UnknownFusedWithoutByteFallback) {
  auto fused = Tokenizer::FromTokenizerJson(TinyGemmaJson("", "", /*byte_fallback=*/false));
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_THAT(*(*fused)->Encode("h你好h", false), ElementsAre(261, 3, 261));
  auto unfused = Tokenizer::FromTokenizerJson(
      TinyGemmaJson("", "", /*byte_fallback=*/false, /*fuse_unk=*/false));
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_THAT(*(*unfused)->Encode("h你好h", false), ElementsAre(261, 3, 3, 261));
}

TEST(TokenizerJsonTest, UnsupportedNormalizersAndDecodersAreRefused) {
  auto status = [](const std::string& json) { return Tokenizer::FromTokenizerJson(json).status(); };
  absl::Status s = status(TinyGemmaJson(R"({"type":"NFKC"})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("normalizer type 'NFKC' is not supported (NFC, Replace, Sequence)"));
  s = status(TinyGemmaJson(R"({"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Lowercase"}]})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("normalizer type 'Lowercase'"));
  s = status(TinyGemmaJson(R"({"type":"Replace","pattern":{"Regex":" +"},"content":"▁"})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("Replace with a {\"Regex\": ...} pattern"));
  s = status(TinyGemmaJson(R"({"type":"Replace","pattern":{"String":""},"content":"x"})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("the pattern is empty"));
  EXPECT_TRUE(status(TinyGemmaJson(R"({"type":"Sequence","normalizers":[]})")).ok());
  s = status(TinyGemmaJson("", R"({"type":"ByteLevel"})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("ByteLevel without a ByteLevel pre_tokenizer"));
  s = status(TinyGemmaJson("", R"({"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Strip","content":" ","start":1,"stop":0}]})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("decoder 'Strip' is not supported"));
  s = status(TinyGemmaJson("", R"({"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Replace","pattern":{"String":"▁"},"content":" "}]})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("Fuse is only supported as the last step"));
  // A Qwen2 file whose decoder is not ByteLevel.
  s = status(absl::StrReplaceAll(TinyQwenJson(), {{R"("decoder":{"type":"ByteLevel")", R"("decoder":{"type":"Fuse")"}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("need decoder ByteLevel"));
}

TEST(TokenizerJsonTest, NormalizedAddedTokenIsMatchedAfterNormalizing) {
  // A `normalized` added token "a b" is matched as "a▁b" once the Replace normalizer ran.
  std::string json = TinyGemmaJson();
  json = absl::StrReplaceAll(json, {{R"("vocab":{"<pad>":0,)", R"("vocab":{"<pad>":0,"a b":271,)"},
                                    {R"(],
    "normalizer")", R"(,{"id":271,"content":"a b","single_word":false,"lstrip":false,"rstrip":false,"normalized":true,"special":false}],
    "normalizer")"}});
  auto tok = Tokenizer::FromTokenizerJson(json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(*(*tok)->Encode("ha b", false), ElementsAre(261, 271));
  // HF matches it in "ha▁b" too (its normalized form), which the raw text never holds.
  EXPECT_THAT(*(*tok)->Encode("ha\xE2\x96\x81" "b", false), ElementsAre(261, 271));
  EXPECT_EQ(*(*tok)->Decode({261, 271}), "ha b");
  // A token that is not `normalized` is matched in the raw text only.
  auto raw = Tokenizer::FromTokenizerJson(
      absl::StrReplaceAll(json, {{R"("normalized":true)", R"("normalized":false)"}}));
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_THAT(*(*raw)->Encode("ha b", false), ElementsAre(261, 271));
  EXPECT_THAT(*(*raw)->Encode("ha\xE2\x96\x81" "b", false), Not(::testing::Contains(271)));
}

TEST(TokenizerTest, ATokenizerLargerThanTheModelsVocabularyIsRefused) {
  auto tok = Tokenizer::FromTokenizerJson(TinyJson());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const int64_t n = (*tok)->vocab_size();
  EXPECT_TRUE(CheckTokenizerFitsModel(**tok, n, "t.json", "ELF m.elf").ok());
  EXPECT_TRUE(CheckTokenizerFitsModel(**tok, n + 271, "t.json", "ELF m.elf").ok());  // a padded vocabulary
  const absl::Status s = CheckTokenizerFitsModel(**tok, n - 1, "t.json", "ELF m.elf");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("tokenizer t.json has ", n, " tokens but ELF m.elf has a vocabulary of ", n - 1)));
}

}  // namespace
}  // namespace dk::tokenizer
