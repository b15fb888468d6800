// safetensors and HF checkpoint directories.
#include "weights/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "weights/test_util.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

using ::dk::weights::testing::RawBytes;
using ::dk::weights::testing::SafetensorsImage;
using ::dk::weights::testing::StEntry;
using ::dk::weights::testing::TempDir;
using ::dk::weights::testing::TinyShape;
using ::dk::weights::testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;

std::string WriteSt(const std::string& name, const std::string& bytes) {
  const std::string path = TempDir("st") + "/" + name;
  WriteFile(path, bytes);
  return path;
}

TEST(SafetensorsTest, ReadsBf16F16F32) {
  const std::vector<uint16_t> b = {0x3F80, 0xC049, 0x0001};
  const std::vector<uint16_t> h = {0x3C00, 0x0001, 0x3555, 0xC000};
  const std::vector<float> f = {1.0f, 1.00390625f, -3.0f, 0.1f, 1e-40f, 65504.0f};
  const std::string path = WriteSt(
      "dtypes.safetensors",
      SafetensorsImage({{"b", "BF16", {3}, RawBytes(b)},
                        {"h", "F16", {2, 2}, RawBytes(h)},
                        {"f", "F32", {2, 3}, RawBytes(f)}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 3u);
  EXPECT_EQ((*file)->metadata().at("format"), "pt");

  auto tb = (*file)->ReadBf16(*(*file)->Find("b"));
  ASSERT_TRUE(tb.ok());
  EXPECT_EQ(tb->shape, std::vector<int64_t>({3}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tb->data[i].bits, b[i]);

  auto th = (*file)->ReadBf16(*(*file)->Find("h"));
  ASSERT_TRUE(th.ok());
  EXPECT_EQ(th->shape, std::vector<int64_t>({2, 2}));
  EXPECT_EQ(th->data[0].bits, 0x3F80);
  EXPECT_EQ(th->data[1].bits, 0x3380);  // f16 subnormal 2^-24
  EXPECT_EQ(th->data[2].bits, 0x3EAB);
  EXPECT_EQ(th->data[3].bits, 0xC000);

  auto tf = (*file)->ReadBf16(*(*file)->Find("f"));
  ASSERT_TRUE(tf.ok());
  const std::vector<uint16_t> want = {0x3F80, 0x3F80 /* tie to even */, 0xC040,
                                      0x3DCD, F32ToBf16(1e-40f).bits, 0x4780};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(tf->data[i].bits, want[i]) << i;
}

TEST(SafetensorsTest, RefusesBadFiles) {
  const std::string data = RawBytes(std::vector<float>{1, 2, 3, 4});
  struct Case {
    const char* name;
    std::string bytes;
    const char* message;
  };
  std::string truncated_header = SafetensorsImage({{"x", "F32", {4}, data}});
  truncated_header.resize(20);
  std::string truncated_data = SafetensorsImage({{"x", "F32", {4}, data}});
  truncated_data.resize(truncated_data.size() - 4);
  const std::vector<Case> cases = {
      {"empty", "", "truncated"},
      {"short_header", truncated_header, "truncated"},
      {"past_eof", truncated_data, "past the end of the file"},
      {"bad_json", SafetensorsImage({}, "{\"x\": [1, 2"), "not valid JSON"},
      {"not_object", SafetensorsImage({}, "[1, 2]"), "not an object"},
      {"no_dtype", SafetensorsImage({}, R"({"x":{"shape":[1],"data_offsets":[0,4]}})"),
       "dtype"},
      {"neg_shape",
       SafetensorsImage({}, R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})"),
       "non-negative"},
      {"size_mismatch", SafetensorsImage({{"x", "F32", {5}, data}}), "needs 20 bytes"},
      {"reversed_offsets",
       SafetensorsImage({}, R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})"),
       "end before begin"},
      // Issue 15: two tensors sharing bytes loaded without complaint.
      {"overlap",
       SafetensorsImage({}, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})") +
           std::string(12, '\0'),
       "tensors \"x\" (data_offsets [0, 8]) and \"y\" ([4, 12]) overlap in the data section"},
      {"same_bytes",
       SafetensorsImage({}, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("y":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})") +
           std::string(8, '\0'),
       "overlap in the data section"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteSt(absl::StrCat(c.name, ".safetensors"), c.bytes);
    auto file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok()) << c.name;
    EXPECT_THAT(file.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(file.status().message(), HasSubstr(path)) << c.name;
  }
  // Unknown dtypes parse (other tensors stay usable) but cannot be read.
  const std::string path = WriteSt(
      "i64.safetensors", SafetensorsImage({{"x", "I64", {2}, std::string(16, '\0')}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto t = (*file)->ReadBf16(*(*file)->Find("x"));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), HasSubstr("\"x\""));
}

// --- HF checkpoint directories -------------------------------------------------------

TEST(HfCheckpointTest, SyntheticRoundTripKeepsTheDigest) {
  for (bool tied : {true, false}) {
    const Weights w = MakeSyntheticWeights(TinyShape(tied), 3).value();
    const std::string dir = TempDir(absl::StrCat("roundtrip_", tied)) + "/nested/ckpt";
    ASSERT_TRUE(WriteHfCheckpoint(w, dir).ok());
    auto loaded = LoadHfCheckpoint(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->Digest(), w.Digest());
    EXPECT_EQ(loaded->size(), w.size());
    EXPECT_EQ(loaded->shape().name(), "ckpt");
    EXPECT_EQ(loaded->shape().tied_embeddings(), tied);
    EXPECT_EQ(loaded->shape().n_kv_heads(), 2);
    EXPECT_EQ(loaded->shape().rms_eps(), 1e-5f);
    EXPECT_EQ(loaded->source(), dir);
    auto via_dispatch = LoadWeights(dir);
    ASSERT_TRUE(via_dispatch.ok());
    EXPECT_EQ(via_dispatch->Digest(), w.Digest());
  }
}

// Issue 15: a config.json dimension near 2^31 ended in std::bad_alloc.
TEST(HfCheckpointTest, HugeConfigDimensionsAreRefused) {
  const std::string base =
      R"("hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, )";
  struct Case {
    std::string json;
    const char* message;
  };
  const Case cases[] = {
      {R"("num_hidden_layers": 2147483647, "vocab_size": 16)",
       "\"num_hidden_layers\" = 2147483647 exceeds the limit 4096"},
      {R"("num_hidden_layers": 2, "vocab_size": 2147483647)",
       "\"vocab_size\" = 2147483647 exceeds the limit 16777216"},
      {R"("num_hidden_layers": 2, "vocab_size": 18446744073709551615)",
       "\"vocab_size\" = 18446744073709551615 exceeds the limit"},
      {R"("num_hidden_layers": 2, "vocab_size": -16)", "must be a positive integer"},
      {R"("num_hidden_layers": 4096, "vocab_size": 16, "max_position_embeddings": 16777216)",
       "the KV cache"},
  };
  for (const Case& c : cases) {
    auto s = ShapeFromHfConfig("{" + base + c.json + "}", "m", "dir/config.json");
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_THAT(s.status().message(), HasSubstr("dir/config.json")) << c.json;
    EXPECT_THAT(s.status().message(), HasSubstr(c.message)) << c.json;
  }
  EXPECT_TRUE(ShapeFromHfConfig("{" + base + R"("num_hidden_layers": 2, "vocab_size": 16})", "m",
                                "config.json")
                  .ok());
}

// rope_scaling.factor negative (or inf, or rope_theta inf) in config.json was taken
// as it was and turned every RoPE angle into garbage.
TEST(HfCheckpointTest, RopeScalingFactorsMustBeFiniteAndPositive) {
  const std::string base = R"("hidden_size":32,"intermediate_size":64,"num_attention_heads":4,
      "num_hidden_layers":2,"vocab_size":16,)";
  auto s = ShapeFromHfConfig(
      "{" + base + R"("rope_scaling":{"rope_type":"llama3","factor":-8.0,"low_freq_factor":1.0,
        "high_freq_factor":4.0,"original_max_position_embeddings":8192}})",
      "m", "dir/config.json");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("dir/config.json"));
  EXPECT_THAT(s.status().message(), HasSubstr("rope_scaling.factor -8 must be finite and > 0"));
}

// JSON numbers are range-checked before they are converted: a double such as 1e300
// has no int64 value and no float value (both conversions are undefined behaviour).
TEST(HfCheckpointTest, NumbersOutsideTheirTypeAreRefusedBeforeConversion) {
  const std::string base = R"("hidden_size":32,"intermediate_size":64,"num_attention_heads":4,
      "num_hidden_layers":2,"vocab_size":16,)";
  const std::string gemma = base + R"("model_type":"gemma3_text","head_dim":8,)";
  struct Case {
    std::string json;
    const char* message;
  };
  const Case cases[] = {
      {base + R"("rope_scaling":{"rope_type":"llama3","factor":8.0,
          "original_max_position_embeddings":1e300}})",
       "\"original_max_position_embeddings\" = 1e+300 must be a whole number in [1, 16777216]"},
      {base + R"("rope_scaling":{"rope_type":"llama3","factor":8.0,
          "original_max_position_embeddings":8192.5}})",
       "must be a whole number in [1, 16777216]"},
      {gemma + R"("sliding_window_pattern":1e300})",
       "\"sliding_window_pattern\" = 1e+300 must be a whole number in [1, 4096]"},
      {gemma + R"("sliding_window_pattern":-6})", "must be a whole number in [1, 4096]"},
      {base + R"("rope_theta":1e300})", "\"rope_theta\" = 1e+300 is outside the range of a float"},
      {base + R"("rms_norm_eps":-1e39})", "\"rms_norm_eps\" = -1e+39 is outside the range of a float"},
      {gemma + R"("query_pre_attn_scalar":1e300})", "is outside the range of a float"},
  };
  for (const Case& c : cases) {
    auto s = ShapeFromHfConfig("{" + c.json, "m", "dir/config.json");
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_THAT(s.status().message(), HasSubstr("dir/config.json")) << c.json;
    EXPECT_THAT(s.status().message(), HasSubstr(c.message)) << c.json;
  }
  // The same keys in range still parse (the Gemma one as google/gemma-3-270m writes it).
  EXPECT_TRUE(ShapeFromHfConfig("{" + gemma + R"("sliding_window_pattern":6})", "m", "c.json").ok());
}

TEST(HfCheckpointTest, ConfigRoundTripsLlama3RopeScaling) {
  elf::ModelShape s = TinyShape();
  s.set_vocab(128256);
  s.mutable_rope_scaling()->set_type("llama3");
  s.mutable_rope_scaling()->set_factor(32);
  s.mutable_rope_scaling()->set_low_freq_factor(1);
  s.mutable_rope_scaling()->set_high_freq_factor(4);
  s.mutable_rope_scaling()->set_original_max_position(8192);
  s.set_rope_theta(500000);
  const std::string text = HfConfigJson(s);
  EXPECT_THAT(text, HasSubstr("\"rms_norm_eps\": 1e-05"));
  EXPECT_THAT(text, HasSubstr("\"bos_token_id\": 128000"));
  EXPECT_THAT(text, HasSubstr("\"LlamaForCausalLM\""));
  auto back = ShapeFromHfConfig(text, "tiny", "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), s.SerializeAsString());
  // transformers 5 style: rope_parameters.
  auto v5 = ShapeFromHfConfig(
      R"({"hidden_size":32,"intermediate_size":64,"num_attention_heads":4,
          "num_hidden_layers":2,"vocab_size":16,
          "rope_parameters":{"rope_type":"llama3","rope_theta":500000.0,"factor":32.0,
            "low_freq_factor":1.0,"high_freq_factor":4.0,
            "original_max_position_embeddings":8192}})",
      "x", "config.json");
  ASSERT_TRUE(v5.ok()) << v5.status();
  EXPECT_EQ(v5->rope_theta(), 500000.0f);
  EXPECT_EQ(v5->rope_scaling().type(), "llama3");
  EXPECT_EQ(v5->head_dim(), 8);
  EXPECT_EQ(v5->n_kv_heads(), 4);
  EXPECT_FALSE(v5->tied_embeddings());
  // Errors.
  EXPECT_THAT(ShapeFromHfConfig("{", "x", "c.json").status().message(),
              HasSubstr("not valid JSON"));
  EXPECT_THAT(ShapeFromHfConfig(R"({"hidden_size":"big"})", "x", "c.json").status().message(),
              HasSubstr("hidden_size"));
  EXPECT_EQ(ShapeFromHfConfig(R"({"model_type":"gemma4"})", "x", "c.json").status().code(),
            absl::StatusCode::kUnimplemented);
}

// Qwen/Qwen2.5-0.5B's published config.json, as it is.
constexpr char kQwen25Config[] = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
  "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
  "use_cache": true, "use_mrope": false, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen/Qwen3-0.6B's published config.json, as it is.
constexpr char kQwen3Config[] = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

TEST(HfCheckpointTest, Qwen3ConfigHasQkNormAndItsOwnHeadDim) {
  auto s = ShapeFromHfConfig(kQwen3Config, "qwen3", "config.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->family(), elf::ModelShape::QWEN3);
  EXPECT_TRUE(s->qk_norm());
  EXPECT_FALSE(s->attention_bias());
  EXPECT_EQ(s->head_dim(), 128);  // not hidden / heads = 64
  int norms = 0;
  for (const auto& [name, dims] : ExpectedTensors(*s)) {
    if (absl::EndsWith(name, "q_norm.weight") || absl::EndsWith(name, "k_norm.weight")) {
      ++norms;
      EXPECT_EQ(dims, std::vector<int64_t>{128}) << name;
    }
  }
  EXPECT_EQ(norms, 2 * 28);
  const std::string text = HfConfigJson(*s);
  EXPECT_THAT(text, HasSubstr("\"Qwen3ForCausalLM\""));
  auto back = ShapeFromHfConfig(text, "qwen3", "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), s->SerializeAsString());
}

// google/gemma-3-270m's published config.json (no tie_word_embeddings: tied by default;
// the older sliding_window_pattern instead of layer_types).
constexpr char kGemma3Config[] = R"({
  "_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 2, "eos_token_id": 1,
  "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 640, "initializer_range": 0.02, "intermediate_size": 2048,
  "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
  "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
  "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": 512,
  "torch_dtype": "bfloat16", "use_bidirectional_attention": false, "use_cache": true,
  "vocab_size": 262144})";

TEST(HfCheckpointTest, Gemma3ConfigHasAllItsFeaturesAndRoundTrips) {
  auto s = ShapeFromHfConfig(kGemma3Config, "gemma", "config.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->family(), elf::ModelShape::GEMMA3);
  EXPECT_TRUE(s->qk_norm());
  EXPECT_TRUE(s->norm_plus_one());
  EXPECT_TRUE(s->sandwich_norms());
  EXPECT_TRUE(s->embedding_scale());
  EXPECT_TRUE(s->tied_embeddings());
  EXPECT_EQ(s->ffn_activation(), elf::ModelShape::GELU_TANH);
  EXPECT_EQ(s->sliding_window(), 512);
  EXPECT_EQ(s->rope_local_theta(), 1e4f);
  EXPECT_EQ(s->rope_theta(), 1e6f);
  EXPECT_EQ(s->query_pre_attn_scalar(), 256.0f);
  ASSERT_EQ(s->layer_types_size(), 18);
  for (int i = 0; i < 18; ++i) {
    EXPECT_EQ(s->layer_types(i), (i + 1) % 6 == 0 ? elf::ModelShape::FULL_ATTENTION : elf::ModelShape::SLIDING_ATTENTION) << i;
  }
  int norms = 0;
  for (const auto& [name, dims] : ExpectedTensors(*s)) norms += absl::EndsWith(name, "feedforward_layernorm.weight");
  EXPECT_EQ(norms, 2 * 18);
  const std::string text = HfConfigJson(*s);
  EXPECT_THAT(text, HasSubstr("\"gemma3_text\""));
  EXPECT_THAT(text, HasSubstr("\"query_pre_attn_scalar\": 256,"));  // an int, as HF requires
  auto back = ShapeFromHfConfig(text, "gemma", "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), s->SerializeAsString());
  // transformers 5's per-layer-type rope_parameters give the same thetas.
  std::string v5 = kGemma3Config;
  v5.replace(v5.find("\"rope_scaling\": null"), 20,
             R"("rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})");
  auto s5 = ShapeFromHfConfig(v5, "gemma", "config.json");
  ASSERT_TRUE(s5.ok()) << s5.status();
  EXPECT_EQ(s5->rope_local_theta(), 1e4f);
  EXPECT_EQ(s5->rope_theta(), 1e6f);
  // What the graph does not have is refused.
  std::string capped = kGemma3Config;
  capped.replace(capped.find("\"final_logit_softcapping\": null"), 31, "\"final_logit_softcapping\": 30.0");
  EXPECT_EQ(ShapeFromHfConfig(capped, "g", "c.json").status().code(), absl::StatusCode::kUnimplemented);
}

TEST(HfCheckpointTest, Qwen2ConfigHasQkvBiasAndRoundTrips) {
  auto s = ShapeFromHfConfig(kQwen25Config, "qwen", "config.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->family(), elf::ModelShape::QWEN2);
  EXPECT_TRUE(s->attention_bias());
  EXPECT_EQ(s->head_dim(), 64);
  EXPECT_EQ(s->n_kv_heads(), 2);
  EXPECT_EQ(s->rope_theta(), 1e6f);
  EXPECT_EQ(s->rms_eps(), 1e-6f);
  EXPECT_TRUE(s->tied_embeddings());
  const auto names = ExpectedTensors(*s);
  int biases = 0;
  for (const auto& [name, dims] : names) biases += absl::EndsWith(name, "_proj.bias");
  EXPECT_EQ(biases, 3 * 24);
  const std::string text = HfConfigJson(*s);
  EXPECT_THAT(text, HasSubstr("\"Qwen2ForCausalLM\""));
  EXPECT_THAT(text, Not(HasSubstr("attention_bias")));
  auto back = ShapeFromHfConfig(text, "qwen", "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), s->SerializeAsString());
  // What the graph does not have is refused, never silently dropped.
  std::string sliding = kQwen25Config;
  sliding.replace(sliding.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  EXPECT_EQ(ShapeFromHfConfig(sliding, "q", "c.json").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(ShapeFromHfConfig(R"({"model_type":"llama","attention_bias":true,"hidden_size":32,
                                    "intermediate_size":64,"num_attention_heads":4,
                                    "num_hidden_layers":2,"vocab_size":16})", "l", "c.json")
                  .status()
                  .message(),
              HasSubstr("attention_bias"));
  EXPECT_THAT(ShapeFromHfConfig(R"({"hidden_act":"gelu_pytorch_tanh","hidden_size":32})", "g", "c.json")
                  .status()
                  .message(),
              HasSubstr("hidden_act"));
}

// Writes the tiny tied model by hand: config + the given tensors, as F32.
class HandWrittenCheckpoint {
 public:
  explicit HandWrittenCheckpoint(const std::string& name, bool tied = true)
      : dir_(TempDir(name)), shape_(TinyShape(tied)) {
    WriteFile(dir_ + "/config.json", HfConfigJson(shape_));
    for (const auto& [n, dims] : ExpectedTensors(shape_)) {
      int64_t numel = 1;
      for (int64_t d : dims) numel *= d;
      std::vector<float> v(numel);
      for (int64_t i = 0; i < numel; ++i) v[i] = 0.001f * static_cast<float>(i % 97);
      entries_.push_back({n, "F32", dims, RawBytes(v)});
    }
  }
  std::vector<StEntry>& entries() { return entries_; }
  const std::string& dir() const { return dir_; }
  void WriteSingle() { WriteFile(dir_ + "/model.safetensors", SafetensorsImage(entries_)); }

 private:
  std::string dir_;
  elf::ModelShape shape_;
  std::vector<StEntry> entries_;
};

TEST(HfCheckpointTest, ShardedWithIndex) {
  HandWrittenCheckpoint ckpt("sharded");
  std::vector<StEntry> a, b;
  std::string weight_map;
  for (size_t i = 0; i < ckpt.entries().size(); ++i) {
    const bool first = i % 2 == 0;
    (first ? a : b).push_back(ckpt.entries()[i]);
    absl::StrAppend(&weight_map, i ? "," : "", "\"", ckpt.entries()[i].name, "\":\"",
                    first ? "model-00001-of-00002.safetensors"
                          : "model-00002-of-00002.safetensors",
                    "\"");
  }
  WriteFile(ckpt.dir() + "/model-00001-of-00002.safetensors", SafetensorsImage(a));
  WriteFile(ckpt.dir() + "/model-00002-of-00002.safetensors", SafetensorsImage(b));
  WriteFile(ckpt.dir() + "/model.safetensors.index.json",
            absl::StrCat("{\"metadata\":{},\"weight_map\":{", weight_map, "}}"));
  auto w = LoadHfCheckpoint(ckpt.dir());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(CheckWeights(*w, TinyShape()).ok());
  const Tensor* t = w->Find("model.layers.1.mlp.down_proj.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->data[5].bits, F32ToBf16(0.005f).bits);

  // A tensor the index does not list.
  WriteFile(ckpt.dir() + "/model.safetensors.index.json",
            R"({"weight_map":{"model.norm.weight":"model-00001-of-00002.safetensors"}})");
  auto missing = LoadHfCheckpoint(ckpt.dir());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("weight_map"));
}

TEST(HfCheckpointTest, MissingTensorWrongShapeAndTies) {
  {
    HandWrittenCheckpoint ckpt("missing");
    ckpt.entries().erase(ckpt.entries().begin() + 3);
    const std::string name = ExpectedTensors(TinyShape())[3].first;
    ckpt.WriteSingle();
    auto w = LoadHfCheckpoint(ckpt.dir());
    EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(w.status().message(), HasSubstr(name));
    EXPECT_THAT(w.status().message(), HasSubstr("model.safetensors"));
  }
  {
    HandWrittenCheckpoint ckpt("wrong_shape");
    StEntry& e = ckpt.entries()[3];  // k_proj [16, 32]
    e.shape = {e.shape[1], e.shape[0]};  // transposed
    ckpt.WriteSingle();
    auto w = LoadHfCheckpoint(ckpt.dir());
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(w.status().message(), HasSubstr(e.name));
    EXPECT_THAT(w.status().message(), HasSubstr("expected [16, 32]"));
  }
  {
    // Untied: lm_head.weight is required.
    HandWrittenCheckpoint ckpt("untied", /*tied=*/false);
    ckpt.entries().pop_back();  // lm_head.weight is last
    ckpt.WriteSingle();
    auto w = LoadHfCheckpoint(ckpt.dir());
    EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(w.status().message(), HasSubstr("lm_head.weight"));
  }
  {
    // Tied: an lm_head.weight in the file is ignored.
    HandWrittenCheckpoint ckpt("tied_extra");
    ckpt.entries().push_back({"lm_head.weight", "F32", {16, 32}, std::string(16 * 32 * 4, 0)});
    ckpt.WriteSingle();
    auto w = LoadHfCheckpoint(ckpt.dir());
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->Find("lm_head.weight"), nullptr);
  }
  {
    // Corrupt file inside a checkpoint: the error names the file.
    HandWrittenCheckpoint ckpt("corrupt");
    WriteFile(ckpt.dir() + "/model.safetensors",
              std::string("\x10\0\0\0\0\0\0\0{not json}      ", 24));
    auto w = LoadHfCheckpoint(ckpt.dir());
    EXPECT_FALSE(w.ok());
    EXPECT_THAT(w.status().message(), HasSubstr("model.safetensors"));
  }
  {
    HandWrittenCheckpoint ckpt("bad_config");
    WriteFile(ckpt.dir() + "/config.json", "{\"hidden_size\": ");
    ckpt.WriteSingle();
    auto w = LoadHfCheckpoint(ckpt.dir());
    EXPECT_FALSE(w.ok());
    EXPECT_THAT(w.status().message(), HasSubstr("config.json"));
  }
  {
    // config.json a symlink to /dev/zero was read without bound until std::bad_alloc.
    HandWrittenCheckpoint ckpt("config_dev_zero");
    ckpt.WriteSingle();
    const std::string config = ckpt.dir() + "/config.json";
    ASSERT_EQ(std::remove(config.c_str()), 0);
    ASSERT_EQ(::symlink("/dev/zero", config.c_str()), 0);
    auto w = LoadHfCheckpoint(ckpt.dir());
    EXPECT_FALSE(w.ok());
    EXPECT_THAT(w.status().message(), HasSubstr(config + " is not a regular file"));
  }
  EXPECT_EQ(LoadHfCheckpoint(TempDir("empty_dir")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(LoadWeights("/nonexistent/file.bin").ok());
}

}  // namespace
}  // namespace dk::weights
