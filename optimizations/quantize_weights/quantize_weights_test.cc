#include "optimizations/quantize_weights/quantize_weights.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "gtest/gtest.h"
#include "optimizations/common/program_util.h"
#include "optimizations/passes.h"
#include "optimizations/testing/tiny.h"
#include "registry/registry.h"

namespace dk::opt::quantize_weights {
namespace {

using testing::BuildChain;
using testing::TinyShape;

const elf::LineageEntry& Last(const elf::Program& p) { return p.lineage(p.lineage_size() - 1); }

// Runs the pass through the table with `args` ("scheme=q4_0", "keep=...").
absl::StatusOr<bool> RunWith(elf::Program& p, std::vector<std::string> args) {
  return RunPass(kName, p, **registry::FindTarget("cpu"), args);
}

// Per GEMV launch of `p`: weight tensor -> (block format, kernel symbol); norm
// weights (rmsnorm's w) are not GEMV weights.
std::map<std::string, std::pair<elf::BlockFormat, std::string>> Gemvs(const elf::Program& p) {
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p.bos()) bos[b.name()] = &b;
  std::map<std::string, std::pair<elf::BlockFormat, std::string>> out;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      const registry::Kernel* kernel = nullptr;
      if (!registry::FindSymbol(l.kernel_symbol(), &kernel).ok() || kernel->id() != "gemv") continue;
      for (const auto& b : l.bindings()) {
        const elf::BufferObject& bo = *bos.at(b.bo());
        if (b.param() == "w" && !bo.weight_tensor().empty()) {
          out[bo.weight_tensor()] = {bo.block_format(), l.kernel_symbol()};
        }
      }
    }
  }
  return out;
}

TEST(QuantizeWeights, MatchesGoldens) {
  const auto cases = testing::GoldenCasesOf(kName);
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& c : cases) EXPECT_TRUE(testing::CheckGolden(c).ok()) << testing::CheckGolden(c);
}

TEST(QuantizeWeights, DefaultQuantizesTheLayerProjectionsAndKeepsTheLmHead) {
  auto base = BuildChain(TinyShape(2), {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"});
  ASSERT_TRUE(base.ok()) << base.status();
  elf::Program p = *base;
  auto changed = RunWith(p, {});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(elf::ValidateProgram(p).ok()) << elf::ValidateProgram(p);
  int quantized = 0;
  for (const auto& [tensor, fs] : Gemvs(p)) {
    if (tensor == "model.embed_tokens.weight") {
      EXPECT_EQ(fs.first, elf::BLOCK_FORMAT_NONE);
      EXPECT_EQ(fs.second.rfind("dk_gemv_bf16_packed", 0), 0u) << fs.second;
    } else {
      ++quantized;
      EXPECT_EQ(fs.first, elf::Q8_0) << tensor;
      EXPECT_EQ(fs.second, "dk_gemv_q8_0_rowmajor") << tensor;
    }
  }
  EXPECT_EQ(quantized, 2 * 7);
  // Each quantized BO: row_major, rows x cols/32 blocks of 34 bytes.
  for (const auto& b : p.bos()) {
    if (b.block_format() == elf::BLOCK_FORMAT_NONE) continue;
    EXPECT_EQ(b.layout(), registry::kRowMajor);
    EXPECT_EQ(b.size_bytes(), b.shape(0) * b.shape(1) / 32 * 34) << b.name();
  }
  // Norm weights and everything that is no GEMV weight are untouched.
  std::map<std::string, const elf::BufferObject*> before;
  for (const auto& b : base->bos()) before[b.name()] = &b;
  for (const auto& b : p.bos()) {
    if (b.block_format() != elf::BLOCK_FORMAT_NONE) continue;
    EXPECT_EQ(b.SerializeAsString(), before.at(b.name())->SerializeAsString()) << b.name();
  }
  // Bytes per token: per layer q, k, v read hidden columns into q_dim + 2 kv_dim
  // rows, o q_dim columns into hidden rows, gate and up hidden columns into ffn
  // rows, down ffn columns into hidden rows: 2 bytes per element in bf16, 34 per
  // 32 in Q8_0. The LM head (3 packed partitions) stays.
  const elf::ModelShape m = TinyShape(2);
  const int64_t q_dim = m.n_heads() * m.head_dim(), kv_dim = m.n_kv_heads() * m.head_dim();
  const int64_t elements = m.hidden() * (q_dim + 2 * kv_dim) + q_dim * m.hidden() + 3 * m.ffn() * m.hidden();
  const int64_t saved = m.n_layers() * (elements * 2 - elements / 32 * 34);
  EXPECT_EQ(WeightBytesPerToken(*base) - WeightBytesPerToken(p), saved);
  EXPECT_TRUE(Last(p).applied());
  const std::string& r = Last(p).reason();
  EXPECT_NE(r.find("14 GEMV weights quantized to q8_0 at load (q_proj x2, k_proj x2, v_proj x2, o_proj x2, "
                   "gate_proj x2, up_proj x2, down_proj x2)"),
            std::string::npos) << r;
  EXPECT_NE(r.find("kept bf16: lm_head"), std::string::npos) << r;
  EXPECT_NE(r.find(absl::StrCat("(", WeightBytesPerToken(*base), " -> ", WeightBytesPerToken(p), ")")),
            std::string::npos) << r;
}

TEST(QuantizeWeights, Q4_0AndKeepSelectWhatIsQuantized) {
  auto p = BuildChain(TinyShape(), {});
  ASSERT_TRUE(p.ok()) << p.status();
  auto changed = RunWith(*p, {"scheme=q4_0", "keep=down_proj,v_proj"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(elf::ValidateProgram(*p).ok());
  const auto g = Gemvs(*p);
  const std::string L = "model.layers.0.";
  EXPECT_EQ(g.at(L + "mlp.down_proj.weight").first, elf::BLOCK_FORMAT_NONE);
  EXPECT_EQ(g.at(L + "self_attn.v_proj.weight").first, elf::BLOCK_FORMAT_NONE);
  EXPECT_EQ(g.at(L + "self_attn.q_proj.weight").first, elf::Q4_0);
  EXPECT_EQ(g.at(L + "self_attn.q_proj.weight").second, "dk_gemv_q4_0_rowmajor");
  // keep no longer names lm_head: the LM head is quantized too.
  EXPECT_EQ(g.at("model.embed_tokens.weight").first, elf::Q4_0);
  EXPECT_NE(Last(*p).reason().find("kept bf16: down_proj, v_proj"), std::string::npos) << Last(*p).reason();

  // An empty keep quantizes every GEMV weight.
  p = BuildChain(TinyShape(), {});
  ASSERT_TRUE(RunWith(*p, {"keep="}).ok());
  for (const auto& [tensor, fs] : Gemvs(*p)) EXPECT_EQ(fs.first, elf::Q8_0) << tensor;

  // Bad options are refused by the table, naming the choices.
  for (const char* bad : {"scheme=q5_k", "keep=embedding"}) {
    auto s = RunWith(*p, {bad});
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("is not one of"), std::string::npos) << s.status();
  }
}

TEST(QuantizeWeights, SecondRunChangesNothingAndSaysSo) {
  auto p = BuildChain(TinyShape(), {kName});
  ASSERT_TRUE(p.ok()) << p.status();
  const elf::Program once = *p;
  auto changed = RunWith(*p, {});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_FALSE(Last(*p).applied());
  EXPECT_NE(Last(*p).reason().find("nothing to do"), std::string::npos) << Last(*p).reason();
  EXPECT_NE(Last(*p).reason().find("(7 already are)"), std::string::npos) << Last(*p).reason();
  p->mutable_lineage()->RemoveLast();
  EXPECT_EQ(testing::ProgramDiff(once, *p), "");
  // A later layout_alignment leaves the blocks alone.
  auto packed = BuildChain(TinyShape(), {kName, "layout_alignment"});
  ASSERT_TRUE(packed.ok()) << packed.status();
  for (const auto& [tensor, fs] : Gemvs(*packed)) {
    if (tensor != "model.embed_tokens.weight") EXPECT_EQ(fs.second, "dk_gemv_q8_0_rowmajor") << tensor;
  }
}

// A q4_0 stage after a q8_0 one replaces the scheme: the runtime quantizes every
// block-format weight from the bf16 weights at load, never from the other blocks.
TEST(QuantizeWeights, LaterSchemeReplacesTheEarlierOne) {
  auto p = BuildChain(TinyShape(), {kName});
  ASSERT_TRUE(p.ok()) << p.status();
  auto changed = RunWith(*p, {"scheme=q4_0"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(elf::ValidateProgram(*p).ok());
  for (const auto& [tensor, fs] : Gemvs(*p)) {
    if (tensor == "model.embed_tokens.weight") {
      EXPECT_EQ(fs.first, elf::BLOCK_FORMAT_NONE);  // kept by both stages
    } else {
      EXPECT_EQ(fs.first, elf::Q4_0) << tensor;
      EXPECT_EQ(fs.second, "dk_gemv_q4_0_rowmajor") << tensor;
    }
  }
  const std::string& r = Last(*p).reason();
  EXPECT_NE(r.find("7 GEMV weights quantized to q4_0"), std::string::npos) << r;
  EXPECT_NE(r.find("replaces the earlier q8_0 (quantized from the bf16 weights"), std::string::npos) << r;
  EXPECT_NE(r.find("kept bf16: lm_head"), std::string::npos) << r;

  // A weight the later scheme keeps keeps the earlier stage's blocks, and says so.
  auto q8_then_q4 = BuildChain(TinyShape(), {});
  ASSERT_TRUE(q8_then_q4.ok()) << q8_then_q4.status();
  ASSERT_TRUE(RunWith(*q8_then_q4, {"scheme=q8_0", "keep="}).ok());
  ASSERT_TRUE(RunWith(*q8_then_q4, {"scheme=q4_0"}).ok());  // keep: default (lm_head)
  EXPECT_EQ(Gemvs(*q8_then_q4).at("model.embed_tokens.weight").first, elf::Q8_0);
  const std::string& r2 = Last(*q8_then_q4).reason();
  EXPECT_NE(r2.find("kept q8_0: lm_head"), std::string::npos) << r2;
  EXPECT_EQ(r2.find("kept bf16"), std::string::npos) << r2;
}

// The `stored` option for `p`'s GEMV weights: each tensor's type by its class
// (lm_head: model.embed_tokens.weight, tied in the tiny model).
std::string StoredFor(const elf::Program& p, const std::map<std::string, std::string>& type_of_class) {
  std::vector<std::string> entries;
  for (const auto& [tensor, fs] : Gemvs(p)) {
    std::string cls = "lm_head";
    for (const auto& [c, type] : type_of_class) {
      if (tensor.find("." + c + ".") != std::string::npos) cls = c;
    }
    entries.push_back(absl::StrCat(tensor, "=", type_of_class.at(cls)));
  }
  entries.push_back("model.norm.weight=F32");  // no GEMV weight: ignored
  return absl::StrCat("stored=", absl::StrJoin(entries, ","));
}

const std::map<std::string, std::string> kMixedFile = {
    {"q_proj", "Q4_1"}, {"k_proj", "Q8_0"},   {"v_proj", "F32"},  {"o_proj", "Q4_0"},
    {"gate_proj", "Q4_1"}, {"up_proj", "Q4_1"}, {"down_proj", "Q5_K"}, {"lm_head", "Q8_0"}};

// scheme gguf: each weight in the block format the file stores it in, its blocks
// marked as the file's own; floats and formats no kernel reads stay bf16; by default
// nothing is kept (the LM head too is read as stored).
TEST(QuantizeWeights, GgufReadsEachWeightAsTheFileStoresIt) {
  auto base = BuildChain(TinyShape(2), {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"});
  ASSERT_TRUE(base.ok()) << base.status();
  elf::Program p = *base;
  auto changed = RunWith(p, {"scheme=gguf", StoredFor(p, kMixedFile)});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(elf::ValidateProgram(p).ok()) << elf::ValidateProgram(p);
  const std::map<std::string, std::pair<elf::BlockFormat, std::string>> want = {
      {"q_proj", {elf::Q4_1, "dk_gemv_q4_1_rowmajor"}},  {"k_proj", {elf::Q8_0, "dk_gemv_q8_0_rowmajor"}},
      {"o_proj", {elf::Q4_0, "dk_gemv_q4_0_rowmajor"}},  {"gate_proj", {elf::Q4_1, "dk_gemv_q4_1_rowmajor"}},
      {"up_proj", {elf::Q4_1, "dk_gemv_q4_1_rowmajor"}}, {"lm_head", {elf::Q8_0, "dk_gemv_q8_0_rowmajor"}}};
  int as_stored = 0;
  for (const auto& [tensor, fs] : Gemvs(p)) {
    std::string cls = "lm_head";
    for (const char* c : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
      if (tensor.find(absl::StrCat(".", c, ".")) != std::string::npos) cls = c;
    }
    const auto it = want.find(cls);
    if (it == want.end()) {  // v_proj (F32) and down_proj (Q5_K): bf16, packed as before
      EXPECT_EQ(fs.first, elf::BLOCK_FORMAT_NONE) << tensor;
      EXPECT_EQ(fs.second.rfind("dk_gemv_bf16_packed", 0), 0u) << tensor << " " << fs.second;
      continue;
    }
    EXPECT_EQ(fs, it->second) << tensor;
  }
  for (const auto& b : p.bos()) {
    if (b.block_format() == elf::BLOCK_FORMAT_NONE) continue;
    EXPECT_TRUE(b.blocks_as_stored()) << b.name();
    ++as_stored;
  }
  EXPECT_EQ(as_stored, 2 * 5 + 3);  // 5 per layer, the LM head's 3 partitions
  const std::string& r = Last(p).reason();
  EXPECT_NE(r.find("13 GEMV weights read as the GGUF stores them, its blocks copied at load (q_proj q4_1 x2, "
                   "k_proj q8_0 x2, o_proj q4_0 x2, gate_proj q4_1 x2, up_proj q4_1 x2, lm_head q8_0 x3)"),
            std::string::npos) << r;
  EXPECT_NE(r.find("stored F32 (no block kernel reads it), stays bf16: v_proj"), std::string::npos) << r;
  EXPECT_NE(r.find("stored Q5_K (no block kernel reads it), stays bf16: down_proj"), std::string::npos) << r;
  EXPECT_EQ(r.find("kept bf16"), std::string::npos) << r;

  // keep still applies; a second run has nothing to do.
  elf::Program kept = *base;
  ASSERT_TRUE(RunWith(kept, {"scheme=gguf", "keep=lm_head", StoredFor(kept, kMixedFile)}).ok());
  EXPECT_NE(Last(kept).reason().find("kept bf16: lm_head"), std::string::npos) << Last(kept).reason();
  auto again = RunWith(p, {"scheme=gguf", StoredFor(*base, kMixedFile)});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
}

TEST(QuantizeWeights, GgufAfterQ8_0UsesTheFilesBlocks) {
  auto p = BuildChain(TinyShape(), {kName});  // q8_0, LM head kept
  ASSERT_TRUE(p.ok()) << p.status();
  auto changed = RunWith(*p, {"scheme=gguf", StoredFor(*p, kMixedFile)});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  for (const auto& b : p->bos()) {
    if (b.block_format() == elf::BLOCK_FORMAT_NONE) continue;
    // v_proj (F32 in the file) and down_proj (Q5_K) keep the q8_0 stage's blocks.
    const bool earlier = b.name().find("v_proj") != std::string::npos || b.name().find("down") != std::string::npos;
    EXPECT_EQ(b.blocks_as_stored(), !earlier) << b.name();
  }
  const std::string& r = Last(*p).reason();
  EXPECT_NE(r.find("stored F32, keeps the earlier q8_0: v_proj"), std::string::npos) << r;
  EXPECT_NE(r.find("stored Q5_K, keeps the earlier q8_0: down_proj"), std::string::npos) << r;
  EXPECT_NE(r.find("replaces the earlier q8_0 (the file's own blocks instead)"), std::string::npos) << r;
  // k_proj was Q8_0 already, but quantized at load: now the file's blocks.
  EXPECT_NE(r.find("k_proj q8_0 x1"), std::string::npos) << r;
}

// A Q4_K_M-style file: the K-quants and Q5_0 are read as stored where K is whole
// blocks (256 for the K-quants); o_proj's K (64) is not, so it stays bf16.
TEST(QuantizeWeights, GgufReadsTheKQuantsAsStored) {
  elf::ModelShape shape = TinyShape(1);
  shape.set_hidden(256);
  shape.set_ffn(512);
  auto base = BuildChain(shape, {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"});
  ASSERT_TRUE(base.ok()) << base.status();
  elf::Program p = *base;
  const std::map<std::string, std::string> file = {
      {"q_proj", "Q4_K"}, {"k_proj", "Q5_0"},    {"v_proj", "Q6_K"},    {"o_proj", "Q4_K"},
      {"gate_proj", "Q4_K"}, {"up_proj", "Q4_K"}, {"down_proj", "Q6_K"}, {"lm_head", "Q6_K"}};
  auto changed = RunWith(p, {"scheme=gguf", StoredFor(p, file)});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(elf::ValidateProgram(p).ok()) << elf::ValidateProgram(p);
  const std::map<std::string, std::pair<elf::BlockFormat, std::string>> want = {
      {"q_proj", {elf::Q4_K, "dk_gemv_q4_k_rowmajor"}},    {"k_proj", {elf::Q5_0, "dk_gemv_q5_0_rowmajor"}},
      {"v_proj", {elf::Q6_K, "dk_gemv_q6_k_rowmajor"}},    {"gate_proj", {elf::Q4_K, "dk_gemv_q4_k_rowmajor"}},
      {"up_proj", {elf::Q4_K, "dk_gemv_q4_k_rowmajor"}},   {"down_proj", {elf::Q6_K, "dk_gemv_q6_k_rowmajor"}},
      {"lm_head", {elf::Q6_K, "dk_gemv_q6_k_rowmajor"}}};
  for (const auto& [tensor, fs] : Gemvs(p)) {
    std::string cls = "lm_head";
    for (const char* c : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
      if (tensor.find(absl::StrCat(".", c, ".")) != std::string::npos) cls = c;
    }
    const auto it = want.find(cls);
    if (it == want.end()) {  // o_proj: K = 64 is not whole Q4_K blocks
      EXPECT_EQ(fs.first, elf::BLOCK_FORMAT_NONE) << tensor;
      continue;
    }
    EXPECT_EQ(fs, it->second) << tensor;
  }
  for (const auto& b : p.bos()) {
    if (b.block_format() != elf::BLOCK_FORMAT_NONE) EXPECT_TRUE(b.blocks_as_stored()) << b.name();
  }
  const std::string& r = Last(p).reason();
  EXPECT_NE(r.find("q_proj q4_k x1, k_proj q5_0 x1, v_proj q6_k x1, gate_proj q4_k x1, up_proj q4_k x1, "
                   "down_proj q6_k x1, lm_head q6_k x"),
            std::string::npos) << r;
  EXPECT_NE(r.find("not a multiple of 256 columns: o_proj (K=64)"), std::string::npos) << r;
}

TEST(QuantizeWeights, GgufOptionErrors) {
  auto p = BuildChain(TinyShape(), {});
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string stored = StoredFor(*p, kMixedFile);
  auto expect_error = [&](std::vector<std::string> args, const std::string& message) {
    elf::Program copy = *p;
    auto s = RunWith(copy, args);
    ASSERT_FALSE(s.ok()) << args[0];
    EXPECT_NE(s.status().message().find(message), std::string::npos) << s.status() << " / want " << message;
  };
  expect_error({"scheme=gguf"}, "scheme gguf needs the file's tensor types");
  expect_error({"scheme=q8_0", stored}, "option stored is for scheme gguf, not q8_0");
  expect_error({"scheme=gguf", "stored=model.norm.weight=F32"},
               "the weights file has no tensor 'model.layers.0.self_attn.q_proj.weight' (BO 'L0.q_proj.w')");
  expect_error({"scheme=gguf", "stored=a.weight"}, "stored: 'a.weight' is not tensor=type");
  expect_error({"scheme=gguf", "keep=default,lm_head", stored}, "'default' cannot be combined");
}

// Runs on the CPU device against the bf16 logits: //tests/passes:runs_on_cpu_test.

}  // namespace
}  // namespace dk::opt::quantize_weights
