// Each pass's output runs on the CPU device with BO validation and gives exactly
// the baseline's logits (the GEMV kernels are bit-identical between layouts by
// design), except quantize_weights, which must stay within its formats' rounding
// bound of them; the validator names a BO a pass (or an edit) mis-categorized.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/quantize.h"
#include "util/aligned_buffer.h"
#include "util/check.h"
#include "util/status.h"
#include "weights/dequant.h"
#include "weights/weights.h"

#include "elf/elf.h"
#include "formats/weight_format.h"
#include "elf/stats.h"
#include "gtest/gtest.h"
#include "optimizations/passes.h"
#include "optimizations/testing/tiny.h"
#include "registry/registry.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/cpu/session.h"
#include "tests/passes/cpu_run.h"

namespace dk::passes_test {
namespace {

using elf::RunsPerToken;
using opt::testing::BuildChain;
using opt::testing::TinyShape;

// --- buffer_object_reuse -----------------------------------------------------

TEST(BufferObjectReuse, RunsOnTheCpuDeviceWithTheBaselineLogits) {
  auto base = BuildChain(TinyShape(), {});
  ASSERT_TRUE(base.ok());
  const std::vector<uint32_t> tokens = {17, 250, 3};
  auto want = CpuLogits(*base, tokens);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const std::vector<std::string>& chain :
       {std::vector<std::string>{"buffer_object_reuse"},
        {"layout_alignment", "buffer_object_reuse"},
        {"merge_multi_launch", "buffer_object_reuse"}}) {
    auto p = BuildChain(TinyShape(), chain);
    ASSERT_TRUE(p.ok()) << p.status();
    auto got = CpuLogits(*p, tokens);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want) << chain.front();
  }
}

// The CPU backend's BO validation catches a mis-categorized BO in the pass output:
// an activation (the attention output the host writes every token) edited to
// STATIC is named on the second token, when its value changes.
TEST(BufferObjectReuse, ValidatorNamesAnActivationEditedToStatic) {
  auto p = BuildChain(TinyShape(), {"layout_alignment", "buffer_object_reuse"});
  ASSERT_TRUE(p.ok()) << p.status();
  bool edited = false;
  for (auto& b : *p->mutable_bos()) {
    if (b.host_value() == "L0.attn") {
      ASSERT_EQ(b.category(), elf::WRITE) << b.name();
      ASSERT_EQ(b.name(), "L0.o_proj.x");
      b.set_category(elf::STATIC);
      edited = true;
    }
  }
  ASSERT_TRUE(edited);
  ASSERT_TRUE(elf::ValidateProgram(*p).ok());
  auto session = OpenValidating(*p, "tiny_bo.elf");
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->decoder().Step(5).ok());
  auto second = (*session)->decoder().Step(6);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(
                "ELF 'tiny_bo.elf', group 'L0.o_proj': STATIC BO 'L0.o_proj.x' mirrors host value "
                "'L0.attn', which changed"),
            std::string::npos)
      << second.status();
}

// The same for an INTERMEDIATE mistake: a host-written activation edited to
// INTERMEDIATE is refused by the device on the first write.
TEST(BufferObjectReuse, ValidatorNamesAHostWrittenBoEditedToIntermediate) {
  auto p = BuildChain(TinyShape(), {"buffer_object_reuse"});
  ASSERT_TRUE(p.ok()) << p.status();
  for (auto& b : *p->mutable_bos()) {
    if (b.name() == "L0.rope_q.cos") b.set_category(elf::INTERMEDIATE);
  }
  auto session = OpenValidating(*p, "tiny_bo.elf");
  absl::Status s = session.ok() ? (*session)->decoder().Step(5).status() : session.status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("INTERMEDIATE BO 'L0.rope_q.cos'"), std::string::npos) << s;
}

// --- layout_alignment --------------------------------------------------------

TEST(LayoutAlignment, RunsOnTheCpuDeviceWithTheBaselineLogits) {
  const std::vector<uint32_t> tokens = {17, 250, 3};
  auto base = BuildChain(TinyShape(), {});
  ASSERT_TRUE(base.ok());
  auto want = CpuLogits(*base, tokens);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int64_t rows : {int64_t{0}, int64_t{64}, int64_t{128}, int64_t{296}}) {
    auto p = BuildChain(TinyShape(), {"layout_alignment"}, "cpu", rows);
    ASSERT_TRUE(p.ok()) << p.status();
    auto got = CpuLogits(*p, tokens);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want) << "partition rows " << rows;
  }
}

// --- merge_multi_launch ------------------------------------------------------

TEST(MergeMultiLaunch, RunsOnTheCpuDeviceWithTheBaselineLogits) {
  const std::vector<uint32_t> tokens = {17, 250, 3};
  for (int layers : {1, 2}) {
    auto base = BuildChain(TinyShape(layers), {});
    ASSERT_TRUE(base.ok());
    auto want = CpuLogits(*base, tokens);
    ASSERT_TRUE(want.ok()) << want.status();
    for (const std::vector<std::string>& chain :
         {std::vector<std::string>{"merge_multi_launch"},
          {"buffer_object_reuse", "merge_multi_launch"},
          {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"}}) {
      auto p = BuildChain(TinyShape(layers), chain);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(RunsPerToken(*p), 2 * layers + 1);
      auto got = CpuLogits(*p, tokens);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, *want) << chain.size() << " passes, " << layers << " layers";
    }
  }
}

// On npu2, where O's K (64) forbids the K-split O + FFN merge, O + FFN runs as one
// group per GEMV, all plain GEMVs: the program runs on the CPU device with exactly
// the baseline's logits.
TEST(MergeMultiLaunch, Npu2PerGemvProgramRunsOnTheCpuDeviceWithTheBaselineLogits) {
  elf::ModelShape shape = TinyShape(2);
  shape.set_name("tiny_npu");
  shape.set_ffn(128);
  shape.set_vocab(512);
  const std::vector<uint32_t> tokens = {17, 250};
  auto base = BuildChain(shape, {});
  auto p = BuildChain(shape, {"buffer_object_reuse", "merge_multi_launch"}, "npu2");
  ASSERT_TRUE(base.ok() && p.ok());
  EXPECT_EQ(RunsPerToken(*p), 2 * 5 + 1);
  auto want = CpuLogits(*base, tokens);
  auto got = CpuLogits(*p, tokens);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

// --- quantize_weights --------------------------------------------------------

// max |a - b| / max |b| and whether any element differs, over every token's logits.
struct LogitError {
  double relative = 0;
  bool differs = false;
};
LogitError Compare(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
  double max_diff = 0, max_ref = 0;
  bool differs = false;
  for (size_t t = 0; t < want.size(); ++t) {
    for (size_t i = 0; i < want[t].size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(double(got[t][i]) - want[t][i]));
      max_ref = std::max(max_ref, std::fabs(double(want[t][i])));
      differs |= got[t][i] != want[t][i];
    }
  }
  return {max_diff / max_ref, differs};
}

// On npu2 with O's K = 512 and down's K = 8192, O + FFN is one group whose O and
// down GEMVs are K-split (K in chunks of 512, partials added in order): the program
// runs on the CPU device, its logits within float reassociation of the baseline's
// (each K-split output may round to the neighbouring bf16: 2^-8 of it, through two
// GEMVs per layer; 2 layers). (Whether they differ at all depends on the weights:
// the GEMV outputs are rounded to bf16, which mostly hides a reordered f32 sum; the
// kernel's own test shows the chunk order.)
TEST(MergeMultiLaunch, Npu2KSplitProgramRunsOnTheCpuDeviceNearTheBaselineLogits) {
  elf::ModelShape shape = TinyShape(2);
  shape.set_name("tiny_npu");
  shape.set_head_dim(128);
  shape.set_ffn(8192);
  shape.set_vocab(512);
  const std::vector<uint32_t> tokens = {17, 250, 3};
  auto base = BuildChain(shape, {});
  auto p = BuildChain(shape, {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"}, "npu2");
  ASSERT_TRUE(base.ok() && p.ok());
  EXPECT_EQ(RunsPerToken(*p), 2 * 2 + 1);
  int ksplit = 0;
  for (const auto& s : p->steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) ksplit += absl::StartsWith(l.kernel_symbol(), "dk_gemv_ksplit_");
  }
  EXPECT_EQ(ksplit, 4);  // O and down of both layers
  auto want = CpuLogits(*base, tokens);
  auto got = CpuLogits(*p, tokens);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  const LogitError e = Compare(*got, *want);
  EXPECT_LT(e.relative, 4 * 2 * std::ldexp(1.0, -8)) << e.relative;
}

// The quantized stage runs on the CPU device (weights quantized at load, the
// quantized GEMV dispatched) and its logits stay near the bf16 stage's. The bound
// is derived from the formats' rounding: a Q8_0 weight moves by at most half a
// step of its block's max|w| / 127, i.e. 1/254 of the block's largest weight, and
// the int8 activations the kernel quantizes per block by as much again; Q4_0 by
// up to a full step of max|w| / 8 (its clamped top level), 1/8. Each GEMV's output
// thus moves by at most (e_w + e_x) of its sum |w| |x|; a token's logits pass
// through at most 4 GEMVs of the layer in sequence (v, o, then gate/up, down), so
// we allow 4 (e_w + e_x) of the largest logit. (The LM head stays bf16.) A stage
// whose weights were not quantized at load (the bf16 bytes read as blocks) is far
// outside that; one whose pass did nothing gives exactly the bf16 logits, which
// this test refuses too.
TEST(QuantizeWeights, RunsOnTheCpuDeviceWithinTheQuantizationBoundOfTheBf16Logits) {
  const std::vector<uint32_t> tokens = {17, 250, 3, 99};
  for (int layers : {1, 2}) {
    const std::vector<std::string> opt = {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"};
    auto bf16 = BuildChain(TinyShape(layers), opt);
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    auto want = CpuLogits(*bf16, tokens);
    ASSERT_TRUE(want.ok()) << want.status();
    std::map<std::string, double> error;
    for (const char* scheme : {"q8_0", "q4_0"}) {
      SCOPED_TRACE(absl::StrCat(scheme, ", ", layers, " layers"));
      elf::Program p = *bf16;
      auto changed = opt::RunPass("quantize_weights", p, **registry::FindTarget("cpu"),
                                  {absl::StrCat("scheme=", scheme)});
      ASSERT_TRUE(changed.ok() && *changed) << changed.status();
      ASSERT_TRUE(elf::ValidateProgram(p).ok());
      auto got = CpuLogits(p, tokens);
      ASSERT_TRUE(got.ok()) << got.status();
      const double e_w = std::string(scheme) == "q8_0" ? 1.0 / 254 : 1.0 / 8, e_x = 1.0 / 254;
      const LogitError e = Compare(*got, *want);
      EXPECT_TRUE(e.differs) << "the quantized stage gave exactly the bf16 logits";
      EXPECT_LE(e.relative, 4 * (e_w + e_x));
      error[scheme] = e.relative;
    }
    // Coarser blocks, larger error.
    EXPECT_LT(error["q8_0"], error["q4_0"]) << layers << " layers";
  }
}

// --- fuse_kernels -------------------------------------------------------------

// The fused stage gives exactly its parent's logits, bf16 or quantized, on cpu and
// npu2 plans, whether quantize_weights runs before or after it.
TEST(FuseKernels, RunsOnTheCpuDeviceWithItsParentsLogitsBitForBit) {
  const std::vector<uint32_t> tokens = {17, 250, 3, 99};
  const std::vector<std::string> opt = {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"};
  auto with = [](std::vector<std::string> chain, std::vector<std::string> more) {
    chain.insert(chain.end(), more.begin(), more.end());
    return chain;
  };
  struct Case {
    std::vector<std::string> parent, fused;
    const char* target;
  };
  const std::vector<Case> cases = {
      {{"merge_multi_launch"}, {"merge_multi_launch", "fuse_kernels"}, "cpu"},
      {opt, with(opt, {"fuse_kernels"}), "cpu"},
      {{"buffer_object_reuse", "merge_multi_launch"}, {"buffer_object_reuse", "merge_multi_launch", "fuse_kernels"}, "npu2"},
      {with(opt, {"quantize_weights"}), with(opt, {"quantize_weights", "fuse_kernels"}), "cpu"},
      {with(opt, {"quantize_weights"}), with(opt, {"fuse_kernels", "quantize_weights"}), "cpu"},
  };
  for (int layers : {1, 2}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(absl::StrJoin(c.fused, " -> "), " on ", c.target, ", ", layers, " layers"));
      auto parent = BuildChain(TinyShape(layers), c.parent, c.target);
      auto fused = BuildChain(TinyShape(layers), c.fused, c.target);
      ASSERT_TRUE(parent.ok() && fused.ok()) << parent.status() << fused.status();
      ASSERT_TRUE(fused->lineage(fused->lineage_size() - 1).applied() ||
                  c.fused.back() != "fuse_kernels");
      auto want = CpuLogits(*parent, tokens);
      auto got = CpuLogits(*fused, tokens);
      ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
      EXPECT_EQ(*got, *want);
    }
  }
}

// --- compress_weights ---------------------------------------------------------

// The x12 stage gives exactly its parent's logits: after the fusion, without it,
// and under quantize_weights (which keeps the LM head bf16, so it stays x12).
TEST(CompressWeights, RunsOnTheCpuDeviceWithItsParentsLogitsBitForBit) {
  const std::vector<uint32_t> tokens = {17, 250, 3, 99};
  const std::vector<std::string> bo = {"layout_alignment", "buffer_object_reuse"};
  const std::vector<std::string> fused = {"layout_alignment", "buffer_object_reuse", "merge_multi_launch",
                                          "fuse_kernels"};
  auto with = [](std::vector<std::string> chain, std::vector<std::string> more) {
    chain.insert(chain.end(), more.begin(), more.end());
    return chain;
  };
  struct Case {
    std::vector<std::string> parent, x12;
  };
  const std::vector<Case> cases = {
      {bo, with(bo, {"compress_weights"})},
      {fused, with(fused, {"compress_weights"})},
      {with(fused, {"quantize_weights"}), with(fused, {"compress_weights", "quantize_weights"})},
  };
  for (int layers : {1, 2}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(absl::StrJoin(c.x12, " -> "), ", ", layers, " layers"));
      auto parent = BuildChain(TinyShape(layers), c.parent);
      auto x12 = BuildChain(TinyShape(layers), c.x12);
      ASSERT_TRUE(parent.ok() && x12.ok()) << parent.status() << x12.status();
      int compressed = 0;
      for (const auto& b : x12->bos()) compressed += b.layout() == registry::kPackedPanelX12V1;
      EXPECT_GT(compressed, 0);
      auto want = CpuLogits(*parent, tokens);
      auto got = CpuLogits(*x12, tokens);
      ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
      EXPECT_EQ(*got, *want);
    }
  }
}

// Synthetic weights as a GGUF would hold them: every GEMV weight of `formats` (by
// tensor name) in that block format, its bf16 values the blocks dequantized (as
// LoadGguf gives them) and the blocks kept as its StoredBlocks.
struct StoredWeights {
  std::shared_ptr<weights::Weights> weights;
  std::map<std::string, std::vector<uint8_t>*> blocks;  // tensor -> its blocks (mutable, for tests)
};
StoredWeights AsStored(const elf::ModelShape& shape, const std::map<std::string, elf::BlockFormat>& formats) {
  auto synthetic = weights::MakeSyntheticWeights(shape, 1);
  DK_CHECK(synthetic.ok());
  StoredWeights out;
  auto w = std::make_shared<weights::Weights>();
  w->set_source("as-stored synthetic");
  w->set_shape(shape);
  for (const std::string& name : synthetic->Names()) {
    const weights::Tensor& src = *synthetic->Find(name);
    weights::Tensor t;
    t.shape = src.shape;
    t.data = AlignedBuffer<bf16>(src.numel());
    std::copy(src.data.data(), src.data.data() + src.numel(), t.data.data());
    const auto f = formats.find(name);
    if (f != formats.end()) {
      const formats::WeightFormat q = *elf::WeightFormatOfBlocks(f->second);
      const auto g = static_cast<weights::GgmlType>(*formats::GgmlTypeId(q));
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const size_t rb = formats::RowBytes(q, cols);
      auto blocks = std::make_shared<std::vector<uint8_t>>(rows * rb);
      kernels::QuantizeWeights(q, src.data.data(), rows, cols, blocks->data());
      for (int64_t r = 0; r < rows; ++r) weights::DequantizeToBf16(g, blocks->data() + r * rb, cols, &t.data[r * cols]);
      t.stored = weights::StoredBlocks{f->second, blocks->data(), rb, 0};
      out.blocks[name] = blocks.get();
      w->Retain(blocks);
    }
    w->Add(name, std::move(t));
  }
  out.weights = w;
  return out;
}

// The gguf stage runs on the weights file's own blocks: with the blocks consistent
// with the bf16 values, its logits are those of the bf16 stage on the same values
// up to the int8 activations (e_x = 1/254 per GEMV) and the bf16 rounding of the
// dequantized weights (2^-9), over at most 4 GEMVs in sequence; it is not the bf16
// stage (the logits differ). Change one tensor's blocks and only the gguf stage
// moves (it reads the blocks, not the bf16 values); give it weights without blocks
// and it is refused at load, naming the tensor.
TEST(QuantizeWeights, GgufStageReadsTheFilesOwnBlocks) {
  const elf::ModelShape shape = TinyShape(2);
  const std::vector<uint32_t> tokens = {17, 250, 3, 99};
  auto bf16 = BuildChain(shape, {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"});
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  std::map<std::string, elf::BlockFormat> formats;
  std::vector<std::string> stored;
  for (const auto& [name, dims] : weights::ExpectedTensors(shape)) {
    if (dims.size() != 2) continue;
    const elf::BlockFormat f = name == "model.embed_tokens.weight"     ? elf::Q8_0
                               : name.find("v_proj") != std::string::npos ? elf::Q4_0
                                                                          : elf::Q4_1;
    formats[name] = f;
    stored.push_back(absl::StrCat(name, "=", f == elf::Q8_0 ? "Q8_0" : f == elf::Q4_0 ? "Q4_0" : "Q4_1"));
  }
  elf::Program gguf = *bf16;
  auto changed = opt::RunPass("quantize_weights", gguf, **registry::FindTarget("cpu"),
                              {"scheme=gguf", absl::StrCat("stored=", absl::StrJoin(stored, ","))});
  ASSERT_TRUE(changed.ok() && *changed) << changed.status();
  ASSERT_TRUE(elf::ValidateProgram(gguf).ok()) << elf::ValidateProgram(gguf);

  StoredWeights file = AsStored(shape, formats);
  auto want = CpuLogits(*bf16, tokens, file.weights);
  auto got = CpuLogits(gguf, tokens, file.weights);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  const LogitError e = Compare(*got, *want);
  EXPECT_TRUE(e.differs) << "the gguf stage gave exactly the bf16 logits";
  EXPECT_LE(e.relative, 4 * (1.0 / 254 + 1.0 / 512));

  // One layer's down_proj blocks scaled by 4 (each f16 d and m + 2 in the exponent):
  // the bf16 stage does not see it, the gguf stage does.
  std::vector<uint8_t>& down = *file.blocks.at("model.layers.1.mlp.down_proj.weight");
  for (size_t b = 0; b < down.size(); b += 20) {
    for (size_t half : {b, b + 2}) {
      uint16_t h = down[half] | (down[half + 1] << 8);
      if ((h & 0x7c00) != 0 && (h & 0x7c00) < 0x7400) h += 0x0800;  // exponent + 2, finite
      down[half] = h & 0xff;
      down[half + 1] = h >> 8;
    }
  }
  auto want2 = CpuLogits(*bf16, tokens, file.weights);
  auto got2 = CpuLogits(gguf, tokens, file.weights);
  ASSERT_TRUE(want2.ok() && got2.ok());
  EXPECT_EQ(*want2, *want);
  EXPECT_GT(Compare(*got2, *got).relative, 10 * e.relative) << "the gguf stage did not read the blocks";

  // Plain synthetic weights (no blocks): refused, naming the BO and the tensor.
  auto refused = CpuLogits(gguf, tokens);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("reads tensor 'model.layers.0.self_attn.q_proj.weight' as the GGUF "
                                            "it was built for stores it (q4_1 blocks), but synthetic"),
            std::string::npos) << refused.status();
}

// --- weights held once (CpuSession::OpenOwning) --------------------------------

// Logits of `tokens` from a validating session that owns its synthetic weights
// (seed 1, as CpuLogits'); *released / *reads_bos: what the session freed.
absl::StatusOr<std::vector<std::vector<float>>> OwningLogits(const elf::Program& program,
                                                             const std::vector<uint32_t>& tokens,
                                                             int64_t* released, bool* reads_bos) {
  DK_ASSIGN_OR_RETURN(weights::Weights w, weights::MakeSyntheticWeights(program.model(), 1));
  runtime::SessionOptions options;
  options.validate = true;
  DK_ASSIGN_OR_RETURN(auto session, runtime::CpuSession::OpenOwning(program, "tiny.elf", std::move(w), options));
  *released = session->released_bytes();
  *reads_bos = session->embedding_reads_bos();
  return SessionLogits(*session, program, tokens);
}

// A session that owns its weights frees every tensor once it is in its STATIC BOs,
// the tied embedding too when the LM head's bf16 BOs hold its rows (the host then
// reads them there: one row-major BO, or packed LM-head parts of
// kTinyPartitionRows rows), and decodes exactly the logits of a session that keeps them. Where the
// weights are rewritten every run (the baseline's WRITE BOs) or the LM head is in
// Q8_0 blocks, what is still read stays.
TEST(OwningSession, HoldsTheWeightsOnceWithTheSameLogits) {
  // Tokens from the first to the last row of the vocabulary (every LM-head part).
  const std::vector<uint32_t> tokens = {17, 250, 3, 299, 128, 255};
  const int64_t all = weights::MakeSyntheticWeights(TinyShape(), 1)->total_bytes();
  const int64_t embedding = TinyShape().vocab() * TinyShape().hidden() * int64_t{sizeof(bf16)};
  struct Case {
    std::vector<std::string> chain;
    std::vector<std::string> quantize;  // quantize_weights options, if run
    int64_t released;
    bool reads_bos;
  };
  const std::vector<std::string> opt = {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"};
  for (const Case& c : std::vector<Case>{{{}, {}, 0, false},
                                         {{"buffer_object_reuse"}, {}, all, true},   // row-major BOs
                                         {opt, {}, all, true},                       // packed panels
                                         {{"layout_alignment", "buffer_object_reuse", "compress_weights"},
                                          {}, all, true},                            // x12 panels
                                         {opt, {"scheme=q8_0", "keep="}, all - embedding, false}}) {
    SCOPED_TRACE(absl::StrCat(absl::StrJoin(c.chain, ","), " ", absl::StrJoin(c.quantize, ",")));
    auto p = BuildChain(TinyShape(), c.chain);
    ASSERT_TRUE(p.ok()) << p.status();
    if (!c.quantize.empty()) {
      auto changed = opt::RunPass("quantize_weights", *p, **registry::FindTarget("cpu"), c.quantize);
      ASSERT_TRUE(changed.ok() && *changed) << changed.status();
    }
    auto want = CpuLogits(*p, tokens);
    ASSERT_TRUE(want.ok()) << want.status();
    int64_t released = -1;
    bool reads_bos = false;
    auto got = OwningLogits(*p, tokens, &released, &reads_bos);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want);
    EXPECT_EQ(released, c.released);
    EXPECT_EQ(reads_bos, c.reads_bos);
  }
}

// The host reads embedding rows from BOs only where they hold each row once.
TEST(OwningSession, EmbeddingStaysATableUnlessTheBosHoldEveryRowOnce) {
  auto p = BuildChain(TinyShape(), {"layout_alignment", "buffer_object_reuse", "merge_multi_launch"});
  ASSERT_TRUE(p.ok()) << p.status();
  const int64_t vocab = TinyShape().vocab(), hidden = TinyShape().hidden();
  runtime::EmbeddingRows rows(nullptr, vocab, hidden);
  const std::string embed = "model.embed_tokens.weight";
  ASSERT_TRUE(rows.CanUseBos(*p, embed).ok()) << rows.CanUseBos(*p, embed);
  elf::BufferObject* first = nullptr;
  for (auto& b : *p->mutable_bos()) {
    if (b.weight_tensor() == embed && (first == nullptr || b.weight_row_begin() < first->weight_row_begin())) first = &b;
  }
  ASSERT_NE(first, nullptr);
  ASSERT_GT(first->weight_row_end(), 1);  // one of several packed parts
  ASSERT_LT(first->weight_row_end(), vocab);
  elf::Program gap = *p, twice = *p;
  for (auto& b : *gap.mutable_bos()) {
    if (b.name() == first->name()) b.set_weight_row_begin(1);  // row 0 in no BO
  }
  *twice.add_bos() = *first;  // rows of the first part twice
  twice.mutable_bos(twice.bos_size() - 1)->set_name("again");
  for (const elf::Program* bad : {&gap, &twice}) {
    const absl::Status s = rows.CanUseBos(*bad, embed);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  }
  EXPECT_FALSE(rows.CanUseBos(*p, "model.norm.weight").ok());  // no BO holds it as rows
}

}  // namespace
}  // namespace dk::passes_test
