#include "kernels/topk/topk.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/testing/targets.h"
#include "kernels/topk/topk_ref.h"

namespace dk::kernels {
namespace {

using testing::ForEachTarget;
using testing::Misaligned;

constexpr float kInf = std::numeric_limits<float>::infinity();
const size_t kSizes[] = {1, 2, 5, 6, 17, 1000, 49152, 128256};
const size_t kKs[] = {1, 2, 5, 16};

struct Data {
  std::string name;
  std::vector<float> logits;
  std::vector<uint32_t> ranking;  // ref::TopK of all of them, filled by Rank()
};

void Rank(std::vector<Data>* data) {
  for (Data& d : *data) {
    d.ranking = ref::TopK(d.logits.data(), d.logits.size(), d.logits.size());
  }
}

// Random, heavy ties, sorted both ways, and -inf mixed in (and -inf only).
std::vector<Data> MakeData(size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(n));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> pick(0, 2);
  std::vector<Data> data;
  auto add = [&](const std::string& name, auto gen) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = gen(i);
    data.push_back({name, std::move(v), {}});
  };
  add("random", [&](size_t) { return normal(rng); });
  add("ties of 3", [&](size_t) { return static_cast<float>(pick(rng)) - 1.0f; });
  add("ascending", [&](size_t i) { return static_cast<float>(i) * 0.5f - 100.0f; });
  add("descending", [&](size_t i) { return -static_cast<float>(i); });
  add("-inf mixed", [&](size_t) { return pick(rng) == 0 ? normal(rng) : -kInf; });
  add("all -inf", [&](size_t) { return -kInf; });
  add("ties with +inf", [&](size_t) { return pick(rng) == 0 ? kInf : normal(rng); });
  Rank(&data);
  return data;
}

// TopK / Argmax of `d` against the reference, for every k and misalignment.
void CheckData(const Data& d) {
  SCOPED_TRACE(d.name);
  const size_t n = d.logits.size();
  for (size_t offset : {size_t{0}, size_t{4}, size_t{12}}) {
    std::vector<uint8_t> storage;
    const float* logits = Misaligned(d.logits, offset, &storage);
    ASSERT_EQ(Argmax(logits, n), d.ranking.empty() ? 0 : d.ranking[0]);
    for (size_t k : kKs) {
      // k > n only for small n: an ascending input costs O(n * k).
      for (size_t kk : {k, n < 100 ? n + 3 : k}) {
        SCOPED_TRACE(::testing::Message() << "k " << kk << " offset " << offset);
        const std::vector<uint32_t> expect(
            d.ranking.begin(), d.ranking.begin() + std::min(kk, d.ranking.size()));
        std::vector<uint32_t> ids(kk + 1, 0xdeadbeef);
        std::vector<float> values(kk + 1, 12345.0f);
        const size_t got = TopK(logits, n, kk, ids.data(), values.data());
        ASSERT_EQ(got, expect.size());
        for (size_t i = 0; i < got; ++i) {
          ASSERT_EQ(ids[i], expect[i]) << "rank " << i;
          ASSERT_EQ(values[i], d.logits[expect[i]]) << "rank " << i;
        }
        for (size_t i = got; i <= kk; ++i) {
          ASSERT_EQ(ids[i], 0xdeadbeef) << "wrote past the result, rank " << i;
          ASSERT_EQ(values[i], 12345.0f) << "wrote past the result, rank " << i;
        }
        if (n >= 100) break;
      }
    }
  }
}

TEST(TopK, MatchesStableSortOnEveryTarget) {
  for (size_t n : kSizes) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::vector<Data> data = MakeData(n);
    ForEachTarget([&](const char*) {
      for (const Data& d : data) {
        CheckData(d);
        if (HasFatalFailure()) return;
      }
    });
    if (HasFatalFailure()) return;
  }
}

TEST(TopK, IgnoresNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t n : {size_t{1}, size_t{7}, size_t{100}, size_t{49152}}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    std::vector<Data> data = MakeData(n);
    std::mt19937 rng(7);
    for (Data& d : data) {
      for (size_t i = 0; i < n; ++i) {
        if (rng() % 3 == 0) d.logits[i] = nan;
      }
    }
    data.push_back({"all NaN", std::vector<float>(n, nan), {}});
    std::vector<float> first_nan(n, -kInf);
    first_nan[0] = nan;
    data.push_back({"NaN then -inf", first_nan, {}});
    Rank(&data);
    ForEachTarget([&](const char*) {
      for (const Data& d : data) {
        CheckData(d);
        if (HasFatalFailure()) return;
      }
    });
    if (HasFatalFailure()) return;
  }
}

TEST(TopK, KZeroAndEmptyInput) {
  const std::vector<float> logits = {1.0f, 2.0f};
  uint32_t id = 77;
  float value = 3.0f;
  EXPECT_EQ(TopK(logits.data(), 2, 0, &id, &value), 0u);
  EXPECT_EQ(TopK(logits.data(), 0, 1, &id, &value), 0u);
  EXPECT_EQ(id, 77u);
  EXPECT_EQ(Argmax(logits.data(), 0), 0u);
}

}  // namespace
}  // namespace dk::kernels
