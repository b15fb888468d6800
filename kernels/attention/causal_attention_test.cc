#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_ref.h"
#include "kernels/testing/targets.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::Misaligned;
using testing::RandomBf16;

constexpr size_t kMaxCtx = 401;  // an odd cache stride; pos0 + m <= 365 below
const size_t kRows[] = {1, 2, 3, 7, 16, 65};
const size_t kPos0[] = {0, 5, 300};
// 4 and 5 are below most m; 5 and 37 start rows' ranges off ScorePairs' 4-groups.
const size_t kWindows[] = {0, 4, 5, 37};

struct Shape {
  size_t n_heads, n_kv_heads, head_dim;
};

struct Inputs {
  AttentionDims dims;
  size_t q_stride, out_stride;  // padded rows
  std::vector<bf16> q, k, v;
};

Inputs MakeInputs(const Shape& s, size_t m, float q_scale = 1.0f) {
  Inputs in;
  in.dims = {s.n_heads, s.n_kv_heads, s.head_dim, kMaxCtx};
  const size_t row = s.n_heads * s.head_dim;
  in.q_stride = row + 3;
  in.out_stride = row + 5;
  const uint32_t seed = static_cast<uint32_t>(s.head_dim * 977 + s.n_heads * 13 + m);
  in.q = RandomBf16(m * in.q_stride, seed, q_scale);
  in.k = RandomBf16(s.n_kv_heads * kMaxCtx * s.head_dim, seed + 1);
  in.v = RandomBf16(s.n_kv_heads * kMaxCtx * s.head_dim, seed + 2, 3.0f);
  return in;
}

size_t First(size_t pos, size_t window) {
  return window != 0 && pos + 1 > window ? pos + 1 - window : 0;
}

// Row by row with DecodeAttention (no pool) into rows of in.out_stride.
template <typename OutT>
std::vector<OutT> RowByRow(const Inputs& in, const bf16* q, const bf16* k, const bf16* v,
                           size_t m, size_t pos0, size_t window, OutT fill) {
  std::vector<OutT> out(m * in.out_stride, fill);
  const size_t hd = in.dims.head_dim;
  for (size_t i = 0; i < m; ++i) {
    const size_t pos = pos0 + i, first = First(pos, window);
    EXPECT_TRUE(DecodeAttention(in.dims, q + i * in.q_stride, k + first * hd,
                                v + first * hd, pos - first, out.data() + i * in.out_stride,
                                nullptr)
                    .ok());
  }
  return out;
}

template <typename OutT>
void ExpectSameBits(const std::vector<OutT>& want, const std::vector<OutT>& got,
                    size_t out_stride) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); i += out_stride) {
    const size_t n = std::min(out_stride, want.size() - i);
    ASSERT_EQ(std::memcmp(want.data() + i, got.data() + i, n * sizeof(OutT)), 0)
        << "row " << i / out_stride << " (or the padding after it) differs";
  }
}

// Every m, pos0 and window for one shape: bf16 and f32 outputs memcmp-equal to the
// row-by-row loop; pointer misalignment and the pool rotate over the cases.
void CheckShape(const Shape& s) {
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  size_t variant = 0;
  for (size_t m : kRows) {
    const Inputs in = MakeInputs(s, m);
    for (size_t pos0 : kPos0) {
      for (size_t window : kWindows) {
        SCOPED_TRACE(::testing::Message() << "m " << m << " pos0 " << pos0 << " window "
                                          << window);
        const size_t offset = 2 * (variant % 4);
        ThreadPool* pool = pools[variant++ % 3];
        std::vector<uint8_t> sq, sk, sv;
        const bf16* q = Misaligned(in.q, offset, &sq);
        const bf16* k = Misaligned(in.k, offset == 0 ? 0 : 10, &sk);
        const bf16* v = Misaligned(in.v, offset, &sv);
        const auto want_b = RowByRow(in, q, k, v, m, pos0, window, bf16{0x7f7f});
        const auto want_f = RowByRow(in, q, k, v, m, pos0, window, -7.0f);
        std::vector<bf16> got_b(want_b.size(), bf16{0x7f7f});
        std::vector<float> got_f(want_f.size(), -7.0f);
        ASSERT_TRUE(CausalAttention(in.dims, q, in.q_stride, m, pos0, window, k, v,
                                    got_b.data(), in.out_stride, pool)
                        .ok());
        ASSERT_TRUE(CausalAttention(in.dims, q, in.q_stride, m, pos0, window, k, v,
                                    got_f.data(), in.out_stride, pool)
                        .ok());
        ExpectSameBits(want_b, got_b, in.out_stride);
        ExpectSameBits(want_f, got_f, in.out_stride);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(CausalAttention, BitIdenticalToDecodeAttentionOnEveryTarget) {
  // GQA groups 3, 4 and 1, and 8 (two head chunks per row); odd head dims exercise
  // the scalar tails.
  const Shape shapes[] = {{9, 3, 64}, {8, 2, 64}, {4, 4, 17}, {8, 1, 3},
                          {4, 1, 256}, {6, 2, 80}};
  for (const Shape& s : shapes) {
    ForEachTarget([&](const char*) {
      SCOPED_TRACE(::testing::Message() << s.n_heads << "/" << s.n_kv_heads
                                        << " heads, head_dim " << s.head_dim);
      CheckShape(s);
    });
    if (HasFatalFailure()) return;
  }
}

// A whole 2048-row chunk at max_ctx: rows of every length up to the full context.
TEST(CausalAttention, ChunkOf2048Rows) {
  Inputs in = MakeInputs({4, 2, 64}, 0);
  const size_t m = 2048, hd = 64;
  in.dims.max_ctx = m;
  in.q = RandomBf16(m * in.q_stride, 5);
  in.k = RandomBf16(2 * m * hd, 6);
  in.v = RandomBf16(2 * m * hd, 7);
  ThreadPool pool(2);
  for (size_t window : {size_t{0}, size_t{512}}) {
    std::vector<bf16> got(m * in.out_stride, bf16{0x7f7f});
    ASSERT_TRUE(CausalAttention(in.dims, in.q.data(), in.q_stride, m, 0, window,
                                in.k.data(), in.v.data(), got.data(), in.out_stride,
                                &pool)
                    .ok());
    ExpectSameBits(RowByRow(in, in.q.data(), in.k.data(), in.v.data(), m, 0, window,
                            bf16{0x7f7f}),
                   got, in.out_stride);
  }
}

// Rows far into a long context: each row's scores pass the per-task scratch cap, so
// blocks shrink to a few rows.
TEST(CausalAttention, LongContextSmallBlocks) {
  const size_t m = 40, pos0 = 16000, hd = 8;
  Inputs in = MakeInputs({4, 1, hd}, m);
  in.dims.max_ctx = pos0 + m;
  in.k = RandomBf16(in.dims.max_ctx * hd, 8);
  in.v = RandomBf16(in.dims.max_ctx * hd, 9);
  std::vector<float> got(m * in.out_stride, -7.0f);
  ASSERT_TRUE(CausalAttention(in.dims, in.q.data(), in.q_stride, m, pos0, 0, in.k.data(),
                              in.v.data(), got.data(), in.out_stride, nullptr)
                  .ok());
  ExpectSameBits(RowByRow(in, in.q.data(), in.k.data(), in.v.data(), m, pos0, 0, -7.0f),
                 got, in.out_stride);
}

// Against the f64 reference (so the bit-identity above is with correct attention),
// with large scores and an explicit scale.
TEST(CausalAttention, MatchesReference) {
  for (const Shape& s : {Shape{9, 3, 64}, Shape{4, 1, 17}}) {
    const size_t m = 16, pos0 = 40, window = 7;
    const Inputs in = MakeInputs(s, m, 20.0f);
    std::vector<float> out(m * in.out_stride);
    ASSERT_TRUE(CausalAttention(in.dims, in.q.data(), in.q_stride, m, pos0, window,
                                in.k.data(), in.v.data(), out.data(), in.out_stride,
                                nullptr, 0.5f)
                    .ok());
    const size_t hd = s.head_dim;
    for (size_t i = 0; i < m; ++i) {
      const size_t pos = pos0 + i, first = First(pos, window);
      const auto ref = ref::DecodeAttention(in.dims, in.q.data() + i * in.q_stride,
                                            in.k.data() + first * hd,
                                            in.v.data() + first * hd, pos - first, 0.5);
      for (size_t j = 0; j < ref.size(); ++j) {
        ASSERT_NEAR(out[i * in.out_stride + j], ref[j], 1e-5 * std::fabs(ref[j]) + 1e-4)
            << "row " << i << " element " << j;
      }
    }
  }
}

TEST(CausalAttention, RejectsBadArguments) {
  const Inputs in = MakeInputs({4, 2, 8}, 4);
  std::vector<bf16> out(4 * in.out_stride, bf16{0x1234});
  const auto call = [&](AttentionDims d, size_t m, size_t pos0, size_t q_stride,
                        size_t out_stride, const bf16* k, float scale) {
    return CausalAttention(d, in.q.data(), q_stride, m, pos0, 0, k, in.v.data(),
                           out.data(), out_stride, nullptr, scale)
        .code();
  };
  const AttentionDims ok = in.dims;
  const size_t qs = in.q_stride, os = in.out_stride;
  const bf16* k = in.k.data();
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(call(ok, 0, 0, qs, os, k, 1.0f), kBad);
  EXPECT_EQ(call(ok, 4, kMaxCtx - 3, qs, os, k, 1.0f), kBad);
  EXPECT_EQ(call(ok, kMaxCtx + 1, 0, qs, os, k, 1.0f), kBad);
  EXPECT_EQ(call(ok, 4, size_t{0} - 2, qs, os, k, 1.0f), kBad);  // pos0 + m wraps
  EXPECT_EQ(call(ok, 4, 0, 31, os, k, 1.0f), kBad);
  EXPECT_EQ(call(ok, 4, 0, qs, 31, k, 1.0f), kBad);
  EXPECT_EQ(call(ok, 4, 0, qs, os, nullptr, 1.0f), kBad);
  EXPECT_EQ(call(ok, 4, 0, qs, os, k, NAN), kBad);
  AttentionDims d = ok;
  d.n_heads = 5;
  EXPECT_EQ(call(d, 1, 0, qs, os, k, 1.0f), kBad);
  for (size_t AttentionDims::*field : {&AttentionDims::n_heads, &AttentionDims::n_kv_heads,
                                       &AttentionDims::head_dim, &AttentionDims::max_ctx}) {
    d = ok;
    d.*field = 0;
    EXPECT_EQ(call(d, 1, 0, qs, os, k, 1.0f), kBad);
  }
  for (const bf16& o : out) ASSERT_EQ(o.bits, 0x1234) << "wrote on error";
  EXPECT_TRUE(call(ok, 4, kMaxCtx - 4, 32, 32, k, 1.0f) == absl::StatusCode::kOk);
}

}  // namespace
}  // namespace dk::kernels
