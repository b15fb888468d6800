// GGUF architectures beside llama (gguf_arch.h): the shape each one's metadata gives,
// its tensor names, Q/K rows as stored, Gemma's 1 + w norms; and the real Gemma 3
// 270M file's tensor names and norms (against transformers'). Its shape against
// google/gemma-3-270m's config.json: //tests/checkpoints:gemma3_gguf_shape_test.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "elf/program.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/cpp/runfiles/runfiles.h"
#include "util/bf16.h"
#include "weights/sha256.h"
#include "weights/test_util.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

using ::dk::weights::testing::GgufWriter;
using ::dk::weights::testing::TempDir;
using ::dk::weights::testing::TinyShape;
using ::dk::weights::testing::WriteFile;

constexpr uint32_t kF32 = 0;

// Tiny models of each family, as the loader must read them back.
elf::ModelShape TinyQwen2() {
  elf::ModelShape s = TinyShape();
  s.set_family(elf::ModelShape::QWEN2);
  s.set_attention_bias(true);
  s.set_rms_eps(1e-6f);
  s.set_rope_theta(1e6f);
  return s;
}

elf::ModelShape TinyQwen3() {
  elf::ModelShape s = TinyShape(/*tied=*/false);
  s.set_family(elf::ModelShape::QWEN3);
  s.set_qk_norm(true);
  s.set_head_dim(16);  // not hidden / heads (8): only attention.key_length says it
  s.set_rms_eps(1e-6f);
  s.set_rope_theta(1e6f);
  return s;
}

elf::ModelShape TinyGemma3(int32_t window = 8) {
  elf::ModelShape s = TinyShape();
  s.set_family(elf::ModelShape::GEMMA3);
  s.set_n_layers(7);  // layer 5 global, 6 sliding again
  s.set_n_kv_heads(1);
  s.set_head_dim(16);
  s.set_qk_norm(true);
  s.set_ffn_activation(elf::ModelShape::GELU_TANH);
  s.set_norm_plus_one(true);
  s.set_sandwich_norms(true);
  s.set_embedding_scale(true);
  s.set_rms_eps(1e-6f);
  s.set_rope_theta(1e6f);
  s.set_rope_local_theta(1e4f);
  s.set_query_pre_attn_scalar(16);
  if (window > 0) {
    s.set_sliding_window(window);
    for (int i = 0; i < 7; ++i) s.add_layer_types(i == 5 ? elf::ModelShape::FULL_ATTENTION : elf::ModelShape::SLIDING_ATTENTION);
  }
  return s;
}

// The GGUF name llama.cpp's converter gives HF tensor `hf` (written out here, apart
// from the loader's table).
std::string GgufNameOf(const std::string& hf, bool sandwich) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  const size_t dot = hf.find('.', std::string("model.layers.").size());
  const std::string layer = hf.substr(13, dot - 13), rest = hf.substr(dot + 1);
  if (rest == "post_attention_layernorm.weight") {
    return absl::StrCat("blk.", layer, sandwich ? ".post_attention_norm.weight" : ".ffn_norm.weight");
  }
  return absl::StrCat("blk.", layer, ".", kLayer.at(rest));
}

struct ArchGguf {
  std::string path;
  std::map<std::string, std::vector<float>> expected;  // HF name -> HF values
};

// `s` written as a GGUF of architecture `arch`, every tensor F32 in HF row order (no
// converter but llama's permutes Q/K), Gemma's norms as 1 + w. Values are exact in
// bf16 (k / 128, |k| <= 125), distinct per tensor and row.
// rope_freqs.weight holds `rope_freqs` (default: head_dim / 2 ones, no scaling).
ArchGguf WriteArchGguf(const std::string& file, const std::string& arch, const elf::ModelShape& s,
                       const std::vector<std::pair<std::string, std::string>>& extra_strings = {},
                       std::vector<float> rope_freqs = {}) {
  const std::string p = arch + ".";
  GgufWriter w;
  w.KvString("general.architecture", arch)
      .KvString("general.basename", "Tiny")
      .KvString("general.size_label", "1K")
      .KvU32(p + "block_count", s.n_layers())
      .KvU32(p + "context_length", s.max_context())
      .KvU32(p + "embedding_length", s.hidden())
      .KvU32(p + "feed_forward_length", s.ffn())
      .KvU32(p + "attention.head_count", s.n_heads())
      .KvU32(p + "attention.head_count_kv", s.n_kv_heads())
      .KvF32(p + "rope.freq_base", s.rope_theta())
      .KvF32(p + "attention.layer_norm_rms_epsilon", s.rms_eps());
  // As the converters do: Qwen3 and Gemma 3 write head_dim, Qwen2 leaves it implied.
  if (arch != "qwen2") w.KvU32(p + "attention.key_length", s.head_dim());
  if (s.sliding_window() > 0) w.KvU32(p + "attention.sliding_window", s.sliding_window());
  for (const auto& [key, value] : extra_strings) w.KvString(key, value);
  std::vector<std::string> tokens;
  for (int i = 0; i < s.vocab(); ++i) tokens.push_back(absl::StrCat("t", i));
  w.KvStringArray("tokenizer.ggml.tokens", tokens);
  ArchGguf out;
  int salt = 0;
  for (const auto& [name, dims] : ExpectedTensors(s)) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const float offset = s.norm_plus_one() && absl::EndsWith(name, "norm.weight") ? 1.0f : 0.0f;
    std::vector<float> values, stored;
    for (int64_t i = 0; i < n; ++i) {
      values.push_back(static_cast<float>((i * 37 + salt * 101) % 251 - 125) / 128.0f);
      stored.push_back(values.back() + offset);
    }
    ++salt;
    out.expected[name] = values;
    w.Tensor(GgufNameOf(name, s.sandwich_norms()), std::vector<uint64_t>(dims.rbegin(), dims.rend()), kF32,
             testing::RawBytes(stored));
  }
  if (rope_freqs.empty()) rope_freqs.assign(static_cast<size_t>(s.head_dim() / 2), 1.0f);
  // No HF counterpart: read for the shape (rope_scaling), loaded as no tensor.
  w.Tensor("rope_freqs.weight", {rope_freqs.size()}, kF32, testing::RawBytes(rope_freqs));
  out.path = TempDir("gguf_arch") + "/" + file;
  WriteFile(out.path, w.Bytes());
  return out;
}

TEST(GgufArchTest, ShapeAndTensorsOfEachArchitecture) {
  for (const auto& [arch, shape] : std::vector<std::pair<std::string, elf::ModelShape>>{
           {"qwen2", TinyQwen2()}, {"qwen3", TinyQwen3()}, {"gemma3", TinyGemma3()}}) {
    SCOPED_TRACE(arch);
    elf::ModelShape want = shape;
    want.set_name("tiny_1k");
    const ArchGguf g = WriteArchGguf(arch + ".gguf", arch, want);
    auto read = GgufShape(g.path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->DebugString(), want.DebugString());
    auto w = LoadGguf(g.path);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->shape().DebugString(), want.DebugString());
    EXPECT_EQ(w->size(), g.expected.size());
    for (const auto& [name, values] : g.expected) {
      const Tensor* t = w->Find(name);
      ASSERT_NE(t, nullptr) << name;
      ASSERT_EQ(t->numel(), static_cast<int64_t>(values.size())) << name;
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(Bf16ToF32(t->data[i]), values[i]) << name << " element " << i;
      }
    }
    auto types = GgufStoredTypes(g.path);
    ASSERT_TRUE(types.ok()) << types.status();
    EXPECT_EQ(types->size(), g.expected.size());
  }
}

TEST(GgufArchTest, Gemma3WithoutAWindowIsAllGlobal) {
  elf::ModelShape want = TinyGemma3(/*window=*/0);
  want.set_name("tiny_1k");
  const ArchGguf g = WriteArchGguf("gemma3_global.gguf", "gemma3", want);
  auto read = GgufShape(g.path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->DebugString(), want.DebugString());
  EXPECT_EQ(read->layer_types_size(), 0);
}

TEST(GgufArchTest, RefusesWhatTheGraphDoesNotHave) {
  struct Case {
    std::string arch, key, value, message;
  };
  for (const Case& c : std::vector<Case>{
           {"gemma3", "gemma3.rope.scaling.type", "linear", "gemma3.rope.scaling.type \"linear\" is not supported"},
           {"qwen2", "qwen2.rope.scaling.type", "yarn", "qwen2.rope.scaling.type \"yarn\" is not supported"},
       }) {
    const elf::ModelShape s = c.arch == "gemma3" ? TinyGemma3() : TinyQwen2();
    const ArchGguf g = WriteArchGguf(c.arch + "_scaled.gguf", c.arch, s, {{c.key, c.value}});
    for (const absl::Status& st : {GgufShape(g.path).status(), LoadGguf(g.path).status()}) {
      EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
      EXPECT_TRUE(absl::StrContains(st.message(), c.message)) << st;
    }
  }
}

// Llama 3's rope_scaling as llama.cpp's convert_hf_to_gguf.py (LlamaModel,
// generate_extra_tensors) stores it: per rotary frequency the factor llama.cpp divides
// it by (ggml_rope_ext's freq_factors), computed here as the converter does, the
// frequencies in float32 (torch), the rest in Python's doubles, stored as float32.
std::vector<float> ConverterRopeFreqs(float theta, int head_dim, double factor, double low, double high,
                                      double original) {
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    const float freq = 1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(head_dim));
    const double wavelen = 2 * 3.141592653589793 / freq;
    if (wavelen < original / high) {
      out.push_back(1.0f);
    } else if (wavelen > original / low) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// A Llama-3.x-shaped llama GGUF (head_dim, theta 500000) with the rope_freqs of `factor`.
elf::ModelShape TinyLlama3(int head_dim) {
  elf::ModelShape s = TinyShape();
  s.set_name("tiny_1k");
  s.set_head_dim(head_dim);
  s.set_rope_theta(500000.0f);
  return s;
}

TEST(GgufArchTest, Llama3RopeScalingFromRopeFreqs) {
  struct Case {
    int head_dim;
    double factor;  // Llama 3.2 (1B, 3B: head_dim 64, 128): 32; Llama 3.1 (8B: 128): 8
  };
  for (const Case& c : std::vector<Case>{{64, 32}, {128, 32}, {128, 8}}) {
    SCOPED_TRACE(absl::StrCat("head_dim ", c.head_dim, " factor ", c.factor));
    elf::ModelShape want = TinyLlama3(c.head_dim);
    const std::vector<float> freqs = ConverterRopeFreqs(500000.0f, c.head_dim, c.factor, 1, 4, 8192);
    // All three bands occur: 1 (short wavelengths), the blend, `factor` (long ones).
    ASSERT_EQ(freqs.front(), 1.0f);
    ASSERT_EQ(freqs.back(), static_cast<float>(c.factor));
    ASSERT_TRUE(std::any_of(freqs.begin(), freqs.end(), [&](float v) { return v > 1 && v < c.factor; }));
    const ArchGguf g = WriteArchGguf(absl::StrCat("llama3_", c.head_dim, "_", c.factor, ".gguf"), "llama", want,
                                     {}, freqs);
    elf::RopeScaling* r = want.mutable_rope_scaling();
    r->set_type("llama3");
    r->set_factor(static_cast<float>(c.factor));
    r->set_low_freq_factor(1);
    r->set_high_freq_factor(4);
    r->set_original_max_position(8192);
    auto read = GgufShape(g.path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->DebugString(), want.DebugString());
    auto w = LoadGguf(g.path);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->shape().DebugString(), want.DebugString());
    EXPECT_EQ(w->Find("rope_freqs.weight"), nullptr);
  }
}

TEST(GgufArchTest, RopeFreqsOfNoLlama3ScalingAreRefused) {
  std::vector<float> other = ConverterRopeFreqs(500000.0f, 64, 8, 1, 2, 8192);  // high_freq_factor 2
  std::vector<float> nudged = ConverterRopeFreqs(500000.0f, 64, 8, 1, 4, 8192);
  for (float& v : nudged) {
    if (v > 1 && v < 8) {
      v *= 1.001f;  // one blended factor off by 0.1%
      break;
    }
  }
  std::vector<float> inverted = ConverterRopeFreqs(500000.0f, 64, 8, 1, 4, 8192);
  for (float& v : inverted) v = 1 / v;  // frequency multipliers, not divisors
  struct Case {
    std::string name;
    std::vector<float> freqs;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"other", other, "matches no Llama 3 rope scaling"},
           {"nudged", nudged, "matches no Llama 3 rope scaling"},
           {"inverted", inverted, "matches no Llama 3 rope scaling"},
           {"short", std::vector<float>(16, 1.0f), "only F32 [head_dim / 2 = 32]"},
       }) {
    SCOPED_TRACE(c.name);
    const ArchGguf g =
        WriteArchGguf(absl::StrCat("llama3_", c.name, ".gguf"), "llama", TinyLlama3(64), {}, c.freqs);
    for (const absl::Status& st : {GgufShape(g.path).status(), LoadGguf(g.path).status()}) {
      EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
      EXPECT_TRUE(absl::StrContains(st.message(), "rope_freqs.weight")) << st;
      EXPECT_TRUE(absl::StrContains(st.message(), c.message)) << st;
    }
  }
}

// An architecture the loader does not know is refused by name, never read as llama.
TEST(GgufArchTest, UnknownArchitectureIsRefusedByName) {
  const ArchGguf g = WriteArchGguf("phi3.gguf", "phi3", TinyShape());
  for (const absl::Status& st :
       {GgufShape(g.path).status(), LoadGguf(g.path).status(), GgufStoredTypes(g.path).status()}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "general.architecture \"phi3\" is not supported")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "llama, qwen2, qwen3, gemma3")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), g.path)) << st;
  }
}

class RealGemma3 : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    runfiles_.reset(bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
    path_ = runfiles_->Rlocation("gemma3_270m/model.gguf");
  }
  std::string Runfile(const std::string& name) {
    std::ifstream in(runfiles_->Rlocation(name), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles_;
  std::string path_;
};

// Every one of the file's 236 tensors has its HF name (read from the header alone).
TEST_F(RealGemma3, EveryTensorMapsToItsHfName) {
  auto shape = GgufShape(path_);
  ASSERT_TRUE(shape.ok()) << shape.status();
  auto types = GgufStoredTypes(path_);
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->size(), 236u);
  for (const auto& [name, dims] : ExpectedTensors(*shape)) {
    ASSERT_EQ(types->count(name), 1u) << name;
    if (absl::EndsWith(name, "norm.weight")) {
      EXPECT_EQ(types->at(name), "F32") << name;
    }
  }
  EXPECT_EQ(types->at("model.embed_tokens.weight"), "Q8_0");
  EXPECT_EQ(types->at("model.layers.0.post_attention_layernorm.weight"), "F32");
}

// The norms as transformers loads them from this file in bf16 (its GGUF loader
// subtracts the converter's 1; weights/testdata/gemma3_270m_norms.json, recorded by
// tools/hf_reference/gguf_norms.py), tensor by tensor.
TEST_F(RealGemma3, NormsEqualTransformers) {
  const nlohmann::json golden = nlohmann::json::parse(Runfile("decodekit/weights/testdata/gemma3_270m_norms.json"));
  const auto& norms = golden.at("norms");
  auto w = LoadGgufTensors(path_, [](absl::string_view name) { return absl::EndsWith(name, "norm.weight"); });
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->size(), norms.size());
  EXPECT_EQ(norms.size(), 18u * 6 + 1);
  for (const auto& [name, want] : norms.items()) {
    const Tensor* t = w->Find(name);
    ASSERT_NE(t, nullptr) << name;
    std::vector<uint16_t> bits;
    for (int64_t i = 0; i < t->numel(); ++i) bits.push_back(t->data[i].bits);
    for (size_t i = 0; i < want.at("first").size(); ++i) {
      EXPECT_EQ(bits[i], want.at("first")[i].get<uint16_t>()) << name << " element " << i;
    }
    EXPECT_EQ(Sha256Hex(absl::string_view(reinterpret_cast<const char*>(bits.data()), bits.size() * 2)),
              want.at("sha256").get<std::string>())
        << name;
  }
}

}  // namespace
}  // namespace dk::weights
