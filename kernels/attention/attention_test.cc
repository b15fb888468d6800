#include "kernels/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/attention_ref.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::Misaligned;
using testing::RandomBf16;

struct Heads {
  size_t n_heads, n_kv_heads;
};
// GQA 4:1 (llama), 3:1, MHA, and MQA (one kv head: blocks split across threads).
const Heads kHeads[] = {{32, 8}, {9, 3}, {4, 4}, {8, 1}};
// Odd head dims exercise the scalar tail of every vector width.
const size_t kHeadDims[] = {1, 3, 17, 64, 80};
const size_t kPositions[] = {0, 1, 63, 200, 1000};
constexpr size_t kMaxCtx = 1003;  // an odd cache stride

struct Case {
  AttentionDims dims;
  std::vector<bf16> q, k, v;
};

Case MakeCase(const Heads& heads, size_t head_dim, float q_scale) {
  Case c;
  c.dims = {heads.n_heads, heads.n_kv_heads, head_dim, kMaxCtx};
  const uint32_t seed = static_cast<uint32_t>(head_dim * 131 + heads.n_heads);
  c.q = RandomBf16(heads.n_heads * head_dim, seed, q_scale);
  c.k = RandomBf16(heads.n_kv_heads * kMaxCtx * head_dim, seed + 1);
  c.v = RandomBf16(heads.n_kv_heads * kMaxCtx * head_dim, seed + 2, 3.0f);
  return c;
}

// max |v| over the rows kv head g attends to.
std::vector<double> MaxAbsV(const Case& c, size_t pos) {
  const size_t hd = c.dims.head_dim;
  std::vector<double> m(c.dims.n_kv_heads, 0.0);
  for (size_t g = 0; g < c.dims.n_kv_heads; ++g) {
    for (size_t i = 0; i < (pos + 1) * hd; ++i) {
      m[g] = std::max<double>(m[g], std::fabs(Bf16ToF32(c.v[g * kMaxCtx * hd + i])));
    }
  }
  return m;
}

// bf16 out: one bf16 rounding of the reference; f32 out: f32 accumulation error.
void ExpectClose(const Case& c, const std::vector<double>& ref,
                 const std::vector<double>& max_v, const bf16* out) {
  const size_t hd = c.dims.head_dim, group = c.dims.n_heads / c.dims.n_kv_heads;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = std::fabs(ref[i]) / 128 + 1e-4 * max_v[i / hd / group];
    ASSERT_NEAR(Bf16ToF32(out[i]), ref[i], tol) << "bf16 out, head " << i / hd
                                                 << " dim " << i % hd;
  }
}
void ExpectClose(const Case& c, const std::vector<double>& ref,
                 const std::vector<double>& max_v, const float* out) {
  const size_t hd = c.dims.head_dim, group = c.dims.n_heads / c.dims.n_kv_heads;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = 1e-5 * std::fabs(ref[i]) + 2e-5 * max_v[i / hd / group];
    ASSERT_NEAR(out[i], ref[i], tol) << "f32 out, head " << i / hd << " dim " << i % hd;
  }
}

// Every position of `c` with bf16 and f32 outputs, aligned and misaligned inputs,
// with and without pools.
void CheckCase(const Case& c, std::optional<float> scale) {
  const double ref_scale =
      scale ? *scale : 1.0 / std::sqrt(static_cast<double>(c.dims.head_dim));
  ThreadPool pool2(2), pool3(3);
  for (size_t pos : kPositions) {
    SCOPED_TRACE(::testing::Message() << "pos " << pos);
    const auto ref = ref::DecodeAttention(c.dims, c.q.data(), c.k.data(), c.v.data(),
                                          pos, ref_scale);
    const auto max_v = MaxAbsV(c, pos);
    for (size_t offset : {size_t{0}, size_t{2}, size_t{6}}) {
      std::vector<uint8_t> sq, sk, sv;
      const bf16* q = Misaligned(c.q, offset, &sq);
      const bf16* k = Misaligned(c.k, offset == 0 ? 0 : 10, &sk);
      const bf16* v = Misaligned(c.v, offset, &sv);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        std::vector<bf16> ob(ref.size() + 1, bf16{0x7f7f});
        std::vector<float> of(ref.size() + 1, -7.0f);
        ASSERT_TRUE(DecodeAttention(c.dims, q, k, v, pos, ob.data(), pool, scale).ok());
        ExpectClose(c, ref, max_v, ob.data());
        EXPECT_EQ(ob.back().bits, 0x7f7f) << "wrote past the end of out";
        ASSERT_TRUE(DecodeAttention(c.dims, q, k, v, pos, of.data(), pool, scale).ok());
        ExpectClose(c, ref, max_v, of.data());
        EXPECT_EQ(of.back(), -7.0f) << "wrote past the end of out";
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(DecodeAttention, MatchesReferenceOnEveryTarget) {
  for (const Heads& heads : kHeads) {
    for (size_t head_dim : kHeadDims) {
      const Case c = MakeCase(heads, head_dim, 1.0f);
      ForEachTarget([&](const char*) {
        SCOPED_TRACE(::testing::Message() << heads.n_heads << "/" << heads.n_kv_heads
                                          << " heads, head_dim " << head_dim);
        CheckCase(c, std::nullopt);
      });
      if (HasFatalFailure()) return;
    }
  }
}

// Scores far beyond exp's f32 range (|s| > 100): only max subtraction keeps the
// softmax finite; also covers an explicit scale.
TEST(DecodeAttention, LargeScoresAndExplicitScale) {
  const Case c = MakeCase({8, 2}, 64, 40.0f);
  ForEachTarget([&](const char*) { CheckCase(c, 1.0f); });
}

TEST(DecodeAttention, RejectsBadArguments) {
  const Case c = MakeCase({4, 2}, 8, 1.0f);
  std::vector<bf16> out(4 * 8, bf16{0x1234});
  const auto call = [&](AttentionDims d, size_t pos) {
    return DecodeAttention(d, c.q.data(), c.k.data(), c.v.data(), pos, out.data(),
                           nullptr);
  };
  const AttentionDims ok = c.dims;
  EXPECT_TRUE(call(ok, kMaxCtx - 1).ok());
  out.assign(out.size(), bf16{0x1234});
  EXPECT_EQ(call(ok, kMaxCtx).code(), absl::StatusCode::kInvalidArgument);
  AttentionDims d = ok;
  d.n_heads = 5;
  EXPECT_EQ(call(d, 0).code(), absl::StatusCode::kInvalidArgument);
  for (size_t AttentionDims::*field : {&AttentionDims::n_heads, &AttentionDims::n_kv_heads,
                                       &AttentionDims::head_dim, &AttentionDims::max_ctx}) {
    d = ok;
    d.*field = 0;
    EXPECT_EQ(call(d, 0).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(DecodeAttention(ok, c.q.data(), nullptr, c.v.data(), 0, out.data(), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeAttention(ok, c.q.data(), c.k.data(), c.v.data(), 0, out.data(),
                            nullptr, NAN)
                .code(),
            absl::StatusCode::kInvalidArgument);
  for (const bf16& o : out) ASSERT_EQ(o.bits, 0x1234) << "wrote on error";
}

}  // namespace
}  // namespace dk::kernels

namespace dk::kernels {
namespace {

// Given a KernelScratch, both kernels work in it (each pool thread in its own
// buffers) and give the same bytes as with a scratch of their own.
TEST(AttentionScratch, WorksInTheCallersScratch) {
  const Case c = MakeCase({8, 2}, 64, 1.0f);
  ThreadPool pool(2);
  KernelScratch scratch(pool.num_threads());
  const size_t n = c.dims.n_heads * c.dims.head_dim;
  std::vector<bf16> own(n), given(n);
  ASSERT_TRUE(DecodeAttention(c.dims, c.q.data(), c.k.data(), c.v.data(), 500, own.data(), &pool).ok());
  ASSERT_TRUE(
      DecodeAttention(c.dims, c.q.data(), c.k.data(), c.v.data(), 500, given.data(), &pool, std::nullopt, &scratch)
          .ok());
  EXPECT_EQ(std::memcmp(own.data(), given.data(), n * sizeof(bf16)), 0);
  EXPECT_GT(scratch.bytes(), 0u);
  KernelScratch rows_scratch(pool.num_threads());
  std::vector<bf16> rows_own(n), rows_given(n);
  ASSERT_TRUE(CausalAttention(c.dims, c.q.data(), n, 1, 500, 0, c.k.data(), c.v.data(), rows_own.data(), n, &pool)
                  .ok());
  ASSERT_TRUE(CausalAttention(c.dims, c.q.data(), n, 1, 500, 0, c.k.data(), c.v.data(), rows_given.data(), n, &pool,
                              std::nullopt, &rows_scratch)
                  .ok());
  EXPECT_EQ(std::memcmp(rows_own.data(), rows_given.data(), n * sizeof(bf16)), 0);
  // One row of CausalAttention is DecodeAttention's.
  EXPECT_EQ(std::memcmp(rows_given.data(), given.data(), n * sizeof(bf16)), 0);
  EXPECT_GT(rows_scratch.bytes(), 0u);
}

}  // namespace
}  // namespace dk::kernels
