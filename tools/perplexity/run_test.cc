// CompareStages against an independent computation: the tiny model's logits from the
// scalar f64 reference decoder (verify/reference, none of the runtime's code), fed
// token by token per window, and the KL divergence / perplexity written out here in
// f64 from those logits. Two sets of synthetic weights make two different models.
#include "tools/perplexity/run.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "verify/reference/reference_decoder.h"

namespace dk::perplexity {

const char* g_elf = nullptr;

namespace {

struct Expected {
  double mean_kld = 0, top1 = 0, ppl = 0, ref_ppl = 0;
  int64_t positions = 0;
};

// log-softmax of one row.
std::vector<double> LogSoftmax(const std::vector<double>& x) {
  double m = x[0];
  for (double v : x) m = std::max(m, v);
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : x) out.push_back(v - m - std::log(s));
  return out;
}

size_t Argmax(const std::vector<double>& x) {
  size_t a = 0;
  for (size_t i = 1; i < x.size(); ++i) if (x[i] > x[a]) a = i;
  return a;
}

Expected Reference(const elf::ModelShape& shape, const weights::Weights& stage, const weights::Weights& ref,
                   const std::vector<std::vector<uint32_t>>& windows, int score_from) {
  Expected e;
  double kl = 0, nll = 0, ref_nll = 0, same = 0;
  for (const auto& ids : windows) {
    verify::ReferenceDecoder a(shape, stage), b(shape, ref);
    for (size_t p = 0; p + 1 < ids.size(); ++p) {
      const std::vector<double> la = LogSoftmax(a.Step(ids[p])), lb = LogSoftmax(b.Step(ids[p]));
      if (static_cast<int>(p) < score_from) continue;
      for (size_t i = 0; i < la.size(); ++i) kl += std::exp(lb[i]) * (lb[i] - la[i]);
      nll -= la[ids[p + 1]];
      ref_nll -= lb[ids[p + 1]];
      same += Argmax(la) == Argmax(lb) ? 1 : 0;
      ++e.positions;
    }
  }
  e.mean_kld = kl / e.positions;
  e.top1 = same / e.positions;
  e.ppl = std::exp(nll / e.positions);
  e.ref_ppl = std::exp(ref_nll / e.positions);
  return e;
}

std::unique_ptr<runtime::CpuSession> Open(const elf::Program& program, std::shared_ptr<const weights::Weights> w,
                                          int score_rows) {
  runtime::SessionOptions options;
  options.score_rows = score_rows;
  auto s = runtime::CpuSession::Open(program, g_elf, std::move(w), options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(CompareStages, MatchesTheReferenceDecoder) {
  auto program = elf::ReadElfFile(g_elf);
  ASSERT_TRUE(program.ok()) << program.status();
  const elf::ModelShape& shape = program->model();
  auto w1 = runtime::LoadWeightsSpec("synthetic:1", shape);
  auto w2 = runtime::LoadWeightsSpec("synthetic:2", shape);
  ASSERT_TRUE(w1.ok() && w2.ok());
  // 70 ids: 5 whole windows of 13 (the tiny context is 16), the rest dropped; every
  // window starts with id 7 in place of its first (BOS, as llama-perplexity).
  std::vector<int32_t> ids;
  uint32_t x = 12345;
  for (int i = 0; i < 70; ++i) {
    x = x * 1103515245u + 12345u;
    ids.push_back(static_cast<int32_t>((x >> 8) % shape.vocab()));
  }
  WindowOptions wo;
  wo.window = 13;
  wo.bos = 7;
  auto windows = MakeWindows(ids, wo);
  ASSERT_TRUE(windows.ok()) << windows.status();
  ASSERT_EQ(windows->size(), 5u);
  EXPECT_EQ((*windows)[1][0], 7u);
  EXPECT_EQ((*windows)[1][1], static_cast<uint32_t>(ids[14]));
  const int from = ScoreFrom(wo);
  ASSERT_EQ(from, 6);
  const Expected want = Reference(shape, **w1, **w2, *windows, from);
  ASSERT_EQ(want.positions, 5 * (13 - 1 - 6));
  // The two models differ: a comparison that always read one of them would show it.
  ASSERT_GT(want.mean_kld, 0.01);
  for (int rows : {12, 5, 1}) {
    SCOPED_TRACE(rows);
    auto stage = Open(*program, *w1, rows);
    auto ref = Open(*program, *w2, rows);
    ASSERT_TRUE(stage && ref);
    auto got = CompareStages(stage->decoder(), ref->decoder(), *windows, from);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->positions, want.positions);
    // The runtime's logits are bf16 GEMVs, the reference's f64 with bf16 rounding
    // where HF rounds: close, not equal.
    EXPECT_NEAR(got->mean_kld, want.mean_kld, 0.02 * want.mean_kld);
    EXPECT_NEAR(got->ppl, want.ppl, 0.01 * want.ppl);
    EXPECT_NEAR(got->ref_ppl, want.ref_ppl, 0.01 * want.ref_ppl);
    EXPECT_NEAR(got->ppl_ratio, want.ppl / want.ref_ppl, 0.01);
    EXPECT_NEAR(got->top1, want.top1, 2.0 / want.positions);  // a near-tie may flip
    std::printf("rows %d: %s; reference decoder: mean KLD %.6f, top-1 %.4f, PPL %.4f vs %.4f\n", rows,
                got->Describe().c_str(), want.mean_kld, want.top1, want.ppl, want.ref_ppl);
  }
  // Several stages in step against one reference (the profile's way): the reference
  // itself scores KLD 0 and top-1 1; the other, the figures above.
  auto a = Open(*program, *w1, 12), b = Open(*program, *w2, 12), ref = Open(*program, *w2, 12);
  auto many = CompareStages({&a->decoder(), &b->decoder()}, ref->decoder(), *windows, from);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->size(), 2u);
  EXPECT_NEAR((*many)[0].mean_kld, want.mean_kld, 0.02 * want.mean_kld);
  EXPECT_NEAR((*many)[0].ppl, want.ppl, 0.01 * want.ppl);
  EXPECT_EQ((*many)[1].mean_kld, 0);
  EXPECT_EQ((*many)[1].top1, 1);
  EXPECT_NEAR((*many)[1].ppl, want.ref_ppl, 0.01 * want.ref_ppl);
}

TEST(MakeWindows, BadOptionsAreRefused) {
  const std::vector<int32_t> ids(20, 3);
  WindowOptions wo;
  wo.window = 1;
  EXPECT_FALSE(MakeWindows(ids, wo).ok());
  wo.window = 30;
  EXPECT_FALSE(MakeWindows(ids, wo).ok());  // shorter than one window
  wo.window = 10;
  wo.score_from = 9;
  EXPECT_FALSE(MakeWindows(ids, wo).ok());
  wo.score_from = 0;
  wo.max_windows = 1;
  auto w = MakeWindows(ids, wo);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->size(), 1u);
  EXPECT_EQ((*w)[0].size(), 10u);
}

}  // namespace
}  // namespace dk::perplexity

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: run_test TINY_DECODE.elf\n");
    return 2;
  }
  dk::perplexity::g_elf = argv[1];
  return RUN_ALL_TESTS();
}
