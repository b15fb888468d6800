// GGUF loading (hand-written files and the real SmolLM2 GGUF), synthetic weights,
// digests.
#include "weights/weights.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "util/bf16.h"
#include "weights/dequant.h"
#include "weights/test_util.h"

namespace dk::weights {
namespace {

using ::dk::weights::testing::GgufWriter;
using ::dk::weights::testing::TempDir;
using ::dk::weights::testing::TinyShape;
using ::dk::weights::testing::WriteFile;
using ::testing::HasSubstr;

// ggml type ids.
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kIQ4_NL = 20,
                   kBF16 = 30;

// f16 encodings of a few scales, with their exact values.
struct F16Const {
  uint16_t bits;
  float value;
};
constexpr F16Const kScales[] = {
    {0x3800, 0.5f}, {0x3C00, 1.0f}, {0x2E66, 0.0999755859375f}, {0x4200, 3.0f}};
constexpr F16Const kMins[] = {{0xBC00, -1.0f}, {0x0000, 0.0f}, {0x3555, 0.333251953125f}};

void PutU16(std::string* s, uint16_t v) { s->append(reinterpret_cast<char*>(&v), 2); }

// An f32 that is exactly representable in f16 (normal or zero) -> f16 bits.
uint16_t ExactF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) == 0) return static_cast<uint16_t>(u >> 16);
  const uint32_t exp = ((u >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(((u >> 16) & 0x8000) | (exp << 10) | ((u >> 13) & 0x3ff));
}

// A tensor of `rows` x `cols` encoded as ggml `type`, row by row (HF row order), with
// the f32 values the encoding represents, computed by hand from the block formulas.
struct Encoded {
  std::vector<std::string> rows;  // bytes of each row
  std::vector<float> values;      // rows x cols
};

Encoded Encode(uint32_t type, int64_t rows, int64_t cols, int salt) {
  Encoded e;
  for (int64_t r = 0; r < rows; ++r) {
    std::string bytes;
    for (int64_t c0 = 0; c0 < cols; c0 += (type == kF32 || type == kF16 || type == kBF16) ? cols : 32) {
      const int64_t k = r * cols + c0 + salt;
      const F16Const d = kScales[k % 4];
      const F16Const m = kMins[k % 3];
      switch (type) {
        case kF32:
          for (int64_t c = 0; c < cols; ++c) {
            const float v = 0.01f * static_cast<float>((r * cols + c + salt) % 301) - 1.5f;
            bytes.append(reinterpret_cast<const char*>(&v), 4);
            e.values.push_back(v);
          }
          break;
        case kF16:
          for (int64_t c = 0; c < cols; ++c) {
            const float v = static_cast<float>((r * cols + c + salt) % 1000) - 500.0f;
            PutU16(&bytes, ExactF16(v));
            e.values.push_back(v);
          }
          break;
        case kBF16:
          for (int64_t c = 0; c < cols; ++c) {
            const bf16 v = F32ToBf16(0.37f * static_cast<float>(r - c + salt));
            PutU16(&bytes, v.bits);
            e.values.push_back(Bf16ToF32(v));
          }
          break;
        case kQ8_0:
          PutU16(&bytes, d.bits);
          for (int i = 0; i < 32; ++i) {
            const int8_t q = static_cast<int8_t>((k * 31 + i * 7) % 255 - 127);
            bytes.push_back(static_cast<char>(q));
            e.values.push_back(static_cast<float>(q) * d.value);
          }
          break;
        case kQ4_0:
        case kQ4_1: {
          PutU16(&bytes, d.bits);
          if (type == kQ4_1) PutU16(&bytes, m.bits);
          int q[32];
          for (int i = 0; i < 32; ++i) q[i] = static_cast<int>((k * 5 + i * 3) % 16);
          // Low nibbles hold elements 0..15, high nibbles 16..31.
          for (int i = 0; i < 16; ++i) bytes.push_back(static_cast<char>(q[i] | (q[i + 16] << 4)));
          for (int i = 0; i < 32; ++i) {
            if (type == kQ4_0) {
              e.values.push_back(d.value * static_cast<float>(q[i] - 8));
            } else {
              volatile float prod = d.value * static_cast<float>(q[i]);  // rounded, not fused
              e.values.push_back(prod + m.value);
            }
          }
          break;
        }
        case kIQ4_NL:  // a layout the loaders do not dequantize: its bytes only
          bytes.append(18, '\0');
          break;
      }
    }
    e.rows.push_back(bytes);
  }
  return e;
}

struct GgufCase {
  std::string gguf_name;
  uint32_t type;
};

// HF name -> (GGUF name, storage type) for the tiny model.
std::map<std::string, GgufCase> TinyLayout(const elf::ModelShape& s) {
  std::map<std::string, GgufCase> m;
  m["model.embed_tokens.weight"] = {"token_embd.weight", kQ8_0};
  m["model.norm.weight"] = {"output_norm.weight", kF32};
  if (!s.tied_embeddings()) m["lm_head.weight"] = {"output.weight", kF16};
  for (int l = 0; l < s.n_layers(); ++l) {
    const std::string hf = absl::StrCat("model.layers.", l, ".");
    const std::string g = absl::StrCat("blk.", l, ".");
    m[hf + "input_layernorm.weight"] = {g + "attn_norm.weight", kF32};
    m[hf + "self_attn.q_proj.weight"] = {g + "attn_q.weight", l == 0 ? kF32 : kQ4_1};
    m[hf + "self_attn.k_proj.weight"] = {g + "attn_k.weight", l == 0 ? kF16 : kQ8_0};
    m[hf + "self_attn.v_proj.weight"] = {g + "attn_v.weight", kBF16};
    m[hf + "self_attn.o_proj.weight"] = {g + "attn_output.weight", kQ4_0};
    m[hf + "post_attention_layernorm.weight"] = {g + "ffn_norm.weight", kF32};
    m[hf + "mlp.gate_proj.weight"] = {g + "ffn_gate.weight", kQ4_1};
    m[hf + "mlp.up_proj.weight"] = {g + "ffn_up.weight", kQ4_0};
    m[hf + "mlp.down_proj.weight"] = {g + "ffn_down.weight", kQ8_0};
  }
  return m;
}

struct TinyGguf {
  std::string path;
  std::map<std::string, std::vector<float>> expected;  // HF name -> HF-order values
};

// Writes the tiny model as GGUF; `mutate` may change the layout first.
TinyGguf WriteTinyGguf(const std::string& file, const elf::ModelShape& s,
                       std::map<std::string, GgufCase> layout, bool with_arch = true) {
  TinyGguf out;
  GgufWriter w;
  w.KvString("general.architecture", with_arch ? "llama" : "gpt2")
      .KvString("general.basename", "Tiny")
      .KvString("general.size_label", "1K")
      .KvU32("llama.block_count", s.n_layers())
      .KvU32("llama.context_length", s.max_context())
      .KvU32("llama.embedding_length", s.hidden())
      .KvU32("llama.feed_forward_length", s.ffn())
      .KvU32("llama.attention.head_count", s.n_heads())
      .KvU32("llama.attention.head_count_kv", s.n_kv_heads())
      .KvF32("llama.rope.freq_base", s.rope_theta())
      .KvF32("llama.attention.layer_norm_rms_epsilon", s.rms_eps())
      .KvU32("llama.vocab_size", s.vocab())
      .KvU32("llama.rope.dimension_count", s.head_dim());
  int salt = 0;
  for (const auto& [name, dims] : ExpectedTensors(s)) {
    const auto it = layout.find(name);
    if (it == layout.end()) continue;
    const GgufCase& c = it->second;
    const int64_t rows = dims.size() == 1 ? 1 : dims[0];
    const int64_t cols = dims.back();
    Encoded e = Encode(c.type, rows, cols, salt++);
    out.expected[name] = e.values;
    // The converter's Q/K permutation, written out: HF row (h, j, i) of
    // [n_head, 2, half] is stored at GGUF row (h, i, j) of [n_head, half, 2].
    std::vector<std::string> stored = e.rows;
    int64_t n_head = 0;
    if (c.gguf_name.find("attn_q") != std::string::npos) n_head = s.n_heads();
    if (c.gguf_name.find("attn_k") != std::string::npos) n_head = s.n_kv_heads();
    if (n_head > 0) {
      const int64_t half = rows / n_head / 2;
      for (int64_t h = 0; h < n_head; ++h) {
        for (int64_t j = 0; j < 2; ++j) {
          for (int64_t i = 0; i < half; ++i) {
            stored[h * 2 * half + i * 2 + j] = e.rows[h * 2 * half + j * half + i];
          }
        }
      }
    }
    std::string bytes;
    for (const std::string& r : stored) bytes += r;
    std::vector<uint64_t> gdims(dims.rbegin(), dims.rend());
    w.Tensor(c.gguf_name, gdims, c.type, bytes);
  }
  // RoPE factors all 1 (no Llama 3 scaling): read for the shape, loaded as no tensor.
  w.Tensor("rope_freqs.weight", {4}, kF32, testing::RawBytes(std::vector<float>(4, 1.0f)));
  out.path = TempDir("gguf") + "/" + file;
  WriteFile(out.path, w.Bytes());
  return out;
}

TEST(GgufLoadTest, DequantizesRenamesAndUnpermutes) {
  for (bool tied : {true, false}) {
    const elf::ModelShape s = TinyShape(tied);
    const TinyGguf g = WriteTinyGguf(absl::StrCat("tiny_", tied, ".gguf"), s, TinyLayout(s));
    auto w = LoadGguf(g.path);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(CheckWeights(*w, s).ok());
    EXPECT_EQ(w->size(), ExpectedTensors(s).size());
    EXPECT_EQ(w->shape().name(), "tiny_1k");
    EXPECT_EQ(w->shape().tied_embeddings(), tied);
    EXPECT_EQ(w->shape().n_layers(), 2);
    EXPECT_EQ(w->shape().vocab(), 16);
    EXPECT_EQ(w->shape().head_dim(), 8);
    EXPECT_EQ(w->shape().max_context(), 128);
    EXPECT_EQ(w->shape().rms_eps(), 1e-5f);
    EXPECT_EQ(w->shape().rope_theta(), 10000.0f);
    for (const auto& [name, values] : g.expected) {
      const Tensor* t = w->Find(name);
      ASSERT_NE(t, nullptr) << name;
      ASSERT_EQ(t->numel(), static_cast<int64_t>(values.size())) << name;
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(t->data[i].bits, F32ToBf16(values[i]).bits)
            << name << " element " << i << " want " << values[i];
      }
    }
    auto dispatched = LoadWeights(g.path);
    ASSERT_TRUE(dispatched.ok());
    EXPECT_EQ(dispatched->Digest(), w->Digest());
  }
}

// Q8_0 / Q4_0 / Q4_1 tensors keep the file's own blocks (StoredBlocks): copied in
// HF row order, they dequantize to exactly the bf16 data, Q/K rows included.
TEST(GgufLoadTest, KeepsTheFilesBlocksInHfRowOrder) {
  const elf::ModelShape s = TinyShape(/*tied=*/false);
  const auto layout = TinyLayout(s);
  const TinyGguf g = WriteTinyGguf("tiny_blocks.gguf", s, layout);
  auto w = LoadGguf(g.path);
  ASSERT_TRUE(w.ok()) << w.status();
  auto types = GgufStoredTypes(g.path);
  ASSERT_TRUE(types.ok()) << types.status();
  int checked = 0;
  for (const auto& [name, c] : layout) {
    const Tensor* t = w->Find(name);
    ASSERT_NE(t, nullptr) << name;
    const bool blocks = c.type == kQ8_0 || c.type == kQ4_0 || c.type == kQ4_1;
    const char* type_name = c.type == kQ8_0 ? "Q8_0" : c.type == kQ4_0 ? "Q4_0" : c.type == kQ4_1 ? "Q4_1" : "";
    if (blocks) {
      EXPECT_EQ(types->at(name), type_name) << name;
    }
    if (!blocks || t->shape.size() != 2) {
      EXPECT_EQ(t->stored.format, elf::BLOCK_FORMAT_NONE) << name;
      EXPECT_EQ(CopyStoredRows(*t, 0, 1, nullptr).code(), absl::StatusCode::kFailedPrecondition) << name;
      continue;
    }
    EXPECT_EQ(elf::BlockFormatName(t->stored.format), absl::AsciiStrToLower(type_name)) << name;
    const int64_t rows = t->shape[0], cols = t->shape[1];
    for (int64_t begin : {int64_t{0}, int64_t{1}}) {  // all rows, and a partition
      std::vector<uint8_t> copy((rows - begin) * t->stored.row_bytes);
      ASSERT_TRUE(CopyStoredRows(*t, begin, rows, copy.data()).ok()) << name;
      std::vector<bf16> row(cols);
      for (int64_t r = begin; r < rows; ++r) {
        DequantizeToBf16(static_cast<GgmlType>(c.type), copy.data() + (r - begin) * t->stored.row_bytes, cols,
                         row.data());
        for (int64_t k = 0; k < cols; ++k) {
          ASSERT_EQ(row[k].bits, t->data[r * cols + k].bits) << name << " row " << r << " col " << k;
        }
      }
    }
    EXPECT_EQ(CopyStoredRows(*t, 0, rows + 1, nullptr).code(), absl::StatusCode::kOutOfRange) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 1 + 6 * s.n_layers() - 2);  // embedding; per layer q,k,o,gate,up,down less layer 0's q,k
}

// elf_opt --weights read another architecture's GGUF as if it were this one's.
TEST(GgufLoadTest, StoredTypesOfAnotherArchitectureAreRefused) {
  const TinyGguf g = WriteTinyGguf("tiny_gpt2.gguf", TinyShape(), TinyLayout(TinyShape()), /*with_arch=*/false);
  auto types = GgufStoredTypes(g.path);
  ASSERT_FALSE(types.ok());
  EXPECT_NE(types.status().message().find("GGUF general.architecture \"gpt2\" is not supported"),
            std::string::npos)
      << types.status();
  EXPECT_NE(types.status().message().find(g.path), std::string::npos) << types.status();
}

TEST(GgufLoadTest, Errors) {
  const elf::ModelShape s = TinyShape();
  {
    auto layout = TinyLayout(s);
    layout["model.layers.1.mlp.up_proj.weight"].type = kIQ4_NL;
    // IQ4_NL blocks are Q4_0-sized (32 elements in 18 bytes), so the file is well
    // formed; the loader refuses the type it cannot dequantize, naming the tensor.
    const TinyGguf g = WriteTinyGguf("iq4nl.gguf", s, layout);
    auto w = LoadGguf(g.path);
    EXPECT_EQ(w.status().code(), absl::StatusCode::kUnimplemented) << w.status();
    EXPECT_THAT(w.status().message(), HasSubstr("blk.1.ffn_up.weight"));
    EXPECT_THAT(w.status().message(), HasSubstr("unsupported ggml type IQ4_NL (20)"));
  }
  {
    // A supported block type with a row length that is not a multiple of its block is
    // caught, as is an unsupported type with valid sizes (IQ4_NL below).
    GgufWriter w;
    w.KvString("general.architecture", "llama")
        .KvU32("llama.block_count", 1)
        .KvU32("llama.embedding_length", 256)
        .KvU32("llama.feed_forward_length", 256)
        .KvU32("llama.attention.head_count", 4)
        .KvU32("llama.vocab_size", 4);
    w.Tensor("token_embd.weight", {256, 4}, kIQ4_NL, std::string(4 * 8 * 18, '\0'));
    const std::string path = TempDir("gguf") + "/iq4nl_valid.gguf";
    WriteFile(path, w.Bytes());
    auto loaded = LoadGguf(path);
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kUnimplemented) << loaded.status();
    EXPECT_THAT(loaded.status().message(), HasSubstr("token_embd.weight"));
    EXPECT_THAT(loaded.status().message(), HasSubstr("IQ4_NL"));
    EXPECT_THAT(loaded.status().message(), HasSubstr(path));
  }
  {
    auto layout = TinyLayout(s);
    layout.erase("model.layers.1.self_attn.v_proj.weight");
    const TinyGguf g = WriteTinyGguf("missing.gguf", s, layout);
    auto w = LoadGguf(g.path);
    EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(w.status().message(), HasSubstr("model.layers.1.self_attn.v_proj.weight"));
    EXPECT_THAT(w.status().message(), HasSubstr(g.path));
  }
  {
    elf::ModelShape wrong = s;
    wrong.set_ffn(96);  // tensors written for ffn 96, metadata says 64
    const TinyGguf g = WriteTinyGguf("wrong_shape.gguf", wrong, TinyLayout(wrong));
    auto w = LoadGguf(g.path);  // self-consistent: loads
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->shape().ffn(), 96);
    EXPECT_FALSE(CheckWeights(*w, s).ok());
    EXPECT_THAT(CheckWeights(*w, s).message(), HasSubstr("mlp.gate_proj.weight"));
  }
  {
    const TinyGguf g = WriteTinyGguf("gpt2.gguf", s, TinyLayout(s), /*with_arch=*/false);
    EXPECT_EQ(LoadGguf(g.path).status().code(), absl::StatusCode::kUnimplemented);
  }
  {
    // Truncated: every prefix length fails cleanly.
    const TinyGguf g = WriteTinyGguf("full.gguf", s, TinyLayout(s));
    std::string bytes;
    {
      std::FILE* f = std::fopen(g.path.c_str(), "rb");
      ASSERT_NE(f, nullptr);
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
      std::fclose(f);
    }
    const std::string path = TempDir("gguf") + "/truncated.gguf";
    for (size_t len : {size_t{0}, size_t{7}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
      WriteFile(path, bytes.substr(0, len));
      auto w = LoadGguf(path);
      EXPECT_FALSE(w.ok()) << len;
      EXPECT_THAT(w.status().message(), HasSubstr("truncated")) << len;
    }
  }
}

// Issue 15: a model dimension near 2^31 in the metadata ended in std::bad_alloc
// (ExpectedTensors over 2^31 layers) instead of an error naming the key.
TEST(GgufLoadTest, HugeDimensionsAreRefusedBeforeAllocating) {
  struct Case {
    const char* key;
    uint32_t value;
    const char* message;
  };
  const Case cases[] = {
      {"llama.block_count", 2147483647u, "llama.block_count = 2147483647 exceeds the limit 4096"},
      {"llama.vocab_size", 2147483647u, "llama.vocab_size = 2147483647 exceeds the limit 16777216"},
      {"llama.embedding_length", 1u << 30, "llama.embedding_length = 1073741824 exceeds the limit"},
      {"llama.context_length", 1u << 24, "the KV cache"},  // within limits alone, not together
  };
  for (const Case& c : cases) {
    std::map<std::string, uint32_t> kv = {
        {"llama.block_count", 1},          {"llama.embedding_length", 32},
        {"llama.feed_forward_length", 64}, {"llama.attention.head_count", 4},
        {"llama.vocab_size", 16},          {"llama.context_length", 128}};
    kv[c.key] = c.value;
    if (std::string(c.key) == "llama.context_length") kv["llama.block_count"] = 4096;
    GgufWriter w;
    w.KvString("general.architecture", "llama");
    for (const auto& [k, v] : kv) w.KvU32(k, v);
    const std::string path = TempDir("gguf") + "/huge.gguf";
    WriteFile(path, w.Bytes());
    auto loaded = LoadGguf(path);
    ASSERT_FALSE(loaded.ok()) << c.key;
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << loaded.status();
    EXPECT_THAT(loaded.status().message(), HasSubstr(c.message));
    EXPECT_THAT(loaded.status().message(), HasSubstr(path));
  }
}

// Issue 15: a missing --weights directory was "cannot tell the format"; a GGUF is
// told by its magic, not its name.
TEST(LoadWeightsTest, MissingPathsAndFormatByContent) {
  const std::string dir = TempDir("load_weights");
  auto missing = LoadWeights(dir + "/no_such_checkpoint");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot open weights " + dir + "/no_such_checkpoint"));
  const elf::ModelShape s = TinyShape();
  const TinyGguf g = WriteTinyGguf("renamed.gguf", s, TinyLayout(s));
  const std::string renamed = dir + "/model.bin";
  ASSERT_EQ(std::rename(g.path.c_str(), renamed.c_str()), 0);
  auto loaded = LoadWeights(renamed);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  const std::string fake = dir + "/fake.gguf";
  WriteFile(fake, "not a gguf at all");
  auto bad = LoadWeights(fake);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("are not a GGUF file (no GGUF magic)"));
}

TEST(GgufLoadTest, TensorShapeMismatchNamesTheTensor) {
  // Metadata says ffn 64; the gate tensor is [96, 32].
  GgufWriter w;
  w.KvString("general.architecture", "llama")
      .KvU32("llama.block_count", 1)
      .KvU32("llama.embedding_length", 32)
      .KvU32("llama.feed_forward_length", 64)
      .KvU32("llama.attention.head_count", 4)
      .KvU32("llama.attention.head_count_kv", 2)
      .KvU32("llama.vocab_size", 16);
  w.Tensor("blk.0.ffn_gate.weight", {32, 96}, kF32, std::string(32 * 96 * 4, '\0'));
  const std::string path = TempDir("gguf") + "/mismatch.gguf";
  WriteFile(path, w.Bytes());
  auto loaded = LoadGguf(path);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("blk.0.ffn_gate.weight"));
  EXPECT_THAT(loaded.status().message(), HasSubstr("[96, 32]"));
  EXPECT_THAT(loaded.status().message(), HasSubstr("[64, 32]"));
}

// --- the real SmolLM2-135M GGUF --------------------------------------------------------

constexpr char kSmolConfig[] = R"pb(
  name: "smollm2_135m"
  n_layers: 30
  hidden: 576
  n_heads: 9
  n_kv_heads: 3
  head_dim: 64
  ffn: 1536
  vocab: 49152
  rms_eps: 1e-5
  rope_theta: 100000
  tied_embeddings: true
  max_context: 2048
)pb";

TEST(GgufLoadTest, RealSmolLm2) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string path = runfiles->Rlocation("smollm2_135m/model.gguf");
  const auto start = std::chrono::steady_clock::now();
  auto w = LoadGguf(path);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(w.ok()) << w.status();
  std::printf("LoadGguf(smollm2_135m): %.3f s, %zu tensors, %lld bytes\n", secs, w->size(),
              static_cast<long long>(w->total_bytes()));
  elf::ModelShape config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kSmolConfig, &config));
  EXPECT_TRUE(CheckWeights(*w, config).ok()) << CheckWeights(*w, config);
  const elf::ModelShape& s = w->shape();
  EXPECT_EQ(s.name(), "smollm2_135m");
  EXPECT_EQ(s.n_layers(), 30);
  EXPECT_TRUE(s.tied_embeddings());
  EXPECT_EQ(w->Find("lm_head.weight"), nullptr);
  EXPECT_EQ(s.hidden(), 576);
  EXPECT_EQ(s.n_heads(), 9);
  EXPECT_EQ(s.n_kv_heads(), 3);
  EXPECT_EQ(s.head_dim(), 64);
  EXPECT_EQ(s.ffn(), 1536);
  EXPECT_EQ(s.vocab(), 49152);
  EXPECT_EQ(s.rope_theta(), 100000.0f);
  EXPECT_EQ(s.rms_eps(), 1e-5f);
  EXPECT_EQ(s.max_context(), 8192);  // llama.context_length, not capped
  EXPECT_EQ(w->size(), ExpectedTensors(config).size());
  const std::string digest = w->Digest();
  std::printf("smollm2_135m digest: %s\n", digest.c_str());
  EXPECT_EQ(digest.size(), 7u + 64u);
}

// --- synthetic weights -------------------------------------------------------------------

TEST(SyntheticTest, DeterministicAndSeedDependent) {
  const elf::ModelShape s = TinyShape();
  const Weights a = MakeSyntheticWeights(s, 1).value();
  const Weights b = MakeSyntheticWeights(s, 1).value();
  const Weights c = MakeSyntheticWeights(s, 2).value();
  EXPECT_EQ(a.Digest(), b.Digest());
  EXPECT_NE(a.Digest(), c.Digest());
  EXPECT_EQ(a.source(), "synthetic(seed=1)");
  EXPECT_TRUE(CheckWeights(a, s).ok());
  EXPECT_EQ(a.total_bytes(), 2 * (16 * 32 + 2 * (32 + 32 * 32 * 2 + 16 * 32 * 2 + 32 +
                                                   3 * 64 * 32) + 32));
  // Pinned: the synthetic values and the digest format must not change across
  // machines or refactors (goldens and ELFs record this digest).
  EXPECT_EQ(a.Digest(),
            "sha256:0b3228f419c6967f2e7d0ae21d11e40528b6835b95ab7d3eb8e985d7dea01fdd");
}

TEST(SyntheticTest, ElementsDependOnlyOnSeedNameAndIndex) {
  elf::ModelShape small = TinyShape();
  elf::ModelShape big = TinyShape();
  big.set_vocab(4096);  // the embedding spans many parallel chunks
  big.set_n_layers(3);
  const Weights a = MakeSyntheticWeights(small, 9).value();
  const Weights b = MakeSyntheticWeights(big, 9).value();
  for (const std::string& name : a.Names()) {
    const Tensor* ta = a.Find(name);
    const Tensor* tb = b.Find(name);
    ASSERT_NE(tb, nullptr) << name;
    for (int64_t i = 0; i < ta->numel(); ++i) {
      ASSERT_EQ(ta->data[i].bits, tb->data[i].bits) << name << " " << i;
    }
  }
}

TEST(SyntheticTest, Statistics) {
  elf::ModelShape s = TinyShape(/*tied=*/false);
  s.set_hidden(256);
  s.set_ffn(512);
  s.set_vocab(1000);
  s.set_n_heads(8);
  s.set_head_dim(32);
  const Weights w = MakeSyntheticWeights(s, 5).value();
  for (const std::string& name : w.Names()) {
    const Tensor* t = w.Find(name);
    // Norm weights: 1 + u, u of std 0.3 (uniform on +-0.52); the others std 0.02.
    const bool norm = name.find("norm") != std::string::npos;
    const double center = norm ? 1.0 : 0.0, want_std = norm ? 0.3 : 0.02;
    double sum = 0, sum2 = 0, max_abs = 0;
    for (int64_t i = 0; i < t->numel(); ++i) {
      const double v = Bf16ToF32(t->data[i]) - center;
      sum += v;
      sum2 += v * v;
      max_abs = std::max(max_abs, std::fabs(v));
    }
    const double n = static_cast<double>(t->numel());
    const double mean = sum / n;
    const double std = std::sqrt(sum2 / n - mean * mean);
    EXPECT_LT(std::fabs(mean), 6 * want_std / std::sqrt(n) + (norm ? 4e-3 : 0)) << name;  // + bf16 rounding near 1
    EXPECT_NEAR(std, want_std, want_std * 6 / std::sqrt(n) + 2e-4) << name;
    EXPECT_LE(max_abs, want_std * 1.7321 + (norm ? 4e-3 : 1e-4)) << name;
  }
}

TEST(DigestTest, FormatIsDocumented) {
  // One tensor "a", shape [2], values {1.0, -2.0}: sha256 of
  // "a\0" + u32 1 + i64 2 + bf16 0x3F80 0xC000, all little-endian.
  Weights w;
  Tensor t;
  t.shape = {2};
  t.data = AlignedBuffer<bf16>(2);
  t.data[0] = bf16{0x3F80};
  t.data[1] = bf16{0xC000};
  w.Add("a", std::move(t));
  // printf 'a\0\1\0\0\0\2\0\0\0\0\0\0\0\x80\x3f\x00\xc0' | sha256sum
  EXPECT_EQ(w.Digest(), "sha256:a88465f305e949f198feb780cad94f1a61e4009b7fb63a9494b563e608f34e00");
  auto got = w.Get("a", {3});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("[2]"));
  EXPECT_EQ(w.Get("b", {2}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dk::weights
