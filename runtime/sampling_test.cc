#include "runtime/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace dk::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using Ids = std::vector<uint32_t>;

// Order by value (most likely first): 1 (3.0), 4 (3.0), 7 (2.5), 2 (2.0), 0 (1.0),
// 3 (0.5), 5 (-1.0); 6 is -inf. At temperature 1 the probabilities are .3115 .3115
// .1889 .1146 .0422 .0256 .0057 (cumulative .3115 .6230 .8120 .9266 .9687 .9943 1)
// and the ratios to the best 1 1 .607 .368 .135 .082 .018.
const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 3.0f, -1.0f, -kInf, 2.5f};

SamplingOptions Sampling(float temperature) {
  SamplingOptions o;
  o.temperature = temperature;
  return o;
}

Sampler Make(const SamplingOptions& options) {
  absl::StatusOr<Sampler> sampler = Sampler::Create(options);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *std::move(sampler);
}

// The softmax of `scaled` (already divided by the temperature), computed here in
// double, independently of the code under test.
std::vector<double> Softmax(const std::vector<double>& scaled) {
  const double max = *std::max_element(scaled.begin(), scaled.end());
  std::vector<double> p;
  double z = 0;
  for (double s : scaled) z += std::exp(s - max);
  for (double s : scaled) p.push_back(std::exp(s - max) / z);
  return p;
}

// `actual` lists exactly `ids` in this order, with probabilities proportional to
// exp(scaled[i]).
void ExpectDistribution(const std::vector<Candidate>& actual, const Ids& ids,
                        const std::vector<double>& scaled) {
  ASSERT_EQ(ids.size(), scaled.size());
  Ids actual_ids;
  for (const Candidate& c : actual) actual_ids.push_back(c.id);
  ASSERT_EQ(actual_ids, ids);
  const std::vector<double> p = Softmax(scaled);
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_NEAR(actual[i].p, p[i], 1e-12) << "id " << ids[i];
    sum += actual[i].p;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

// kLogits at `ids`, divided by `temperature`.
std::vector<double> Scaled(const Ids& ids, double temperature = 1.0) {
  std::vector<double> s;
  for (uint32_t id : ids) s.push_back(kLogits[id] / temperature);
  return s;
}

const Ids kAllFinite = {1, 4, 7, 2, 0, 3, 5};

TEST(Sampling, TemperatureAloneKeepsEveryFiniteId) {
  for (float t : {1.0f, 0.7f, 2.0f}) {
    const Sampler sampler = Make(Sampling(t));
    ExpectDistribution(sampler.Distribution(kLogits, {}), kAllFinite, Scaled(kAllFinite, t));
  }
}

// For each (value, ids): with `field` = value at temperature 1, the distribution
// keeps exactly `ids`, renormalised.
template <typename T>
void ExpectKeptSets(T SamplingOptions::*field, const std::vector<std::pair<T, Ids>>& cases) {
  for (const auto& [value, ids] : cases) {
    SamplingOptions o = Sampling(1.0f);
    o.*field = value;
    SCOPED_TRACE(value);
    ExpectDistribution(Make(o).Distribution(kLogits, {}), ids, Scaled(ids));
  }
}

TEST(Sampling, TopKKeepsExactlyKTiesToTheSmallerId) {
  ExpectKeptSets<int>(&SamplingOptions::top_k,
                      {{1, {1}}, {2, {1, 4}}, {3, {1, 4, 7}}, {5, {1, 4, 7, 2, 0}},
                       {7, kAllFinite}, {8, kAllFinite}, {100, kAllFinite}});
}

TEST(Sampling, TopPKeepsTheShortestPrefixReachingP) {
  ExpectKeptSets<float>(&SamplingOptions::top_p,
                        {{0.1f, {1}}, {0.3f, {1}}, {0.5f, {1, 4}}, {0.7f, {1, 4, 7}},
                         {0.9f, {1, 4, 7, 2}}, {0.95f, {1, 4, 7, 2, 0}},
                         {0.999f, kAllFinite}, {1.0f, kAllFinite}});
}

TEST(Sampling, MinPDropsIdsBelowAFractionOfTheBest) {
  ExpectKeptSets<float>(&SamplingOptions::min_p,
                        {{0.01f, kAllFinite}, {0.05f, {1, 4, 7, 2, 0, 3}},
                         {0.1f, {1, 4, 7, 2, 0}}, {0.5f, {1, 4, 7}}, {0.9f, {1, 4}}});
}

TEST(Sampling, FiltersCombineInHfOrder) {
  // top-k 5 leaves {1 4 7 2 0}; at temperature 1 their probabilities are .322 .322
  // .195 .118 .044, so top-p 0.9 keeps {1 4 7 2} (.956) and min-p 0.4 drops 2 (.368).
  SamplingOptions o = Sampling(1.0f);
  o.top_k = 5;
  o.top_p = 0.9f;
  o.min_p = 0.4f;
  ExpectDistribution(Make(o).Distribution(kLogits, {}), {1, 4, 7}, Scaled({1, 4, 7}));
  // At temperature 0.5 top-p keeps only {1 4 7} (.939) and min-p drops 7 (.368).
  o.temperature = 0.5f;
  ExpectDistribution(Make(o).Distribution(kLogits, {}), {1, 4}, Scaled({1, 4}, 0.5));
  // top-p's mass is over top-k's set, not the whole vocabulary: with top-k 3, 0.85
  // of {1 4 7} (.384 .384 .233 at temperature 1) needs all three.
  o = Sampling(1.0f);
  o.top_k = 3;
  o.top_p = 0.85f;
  ExpectDistribution(Make(o).Distribution(kLogits, {}), {1, 4, 7}, Scaled({1, 4, 7}));
  // Top-p binding over top-k's set: over the top 6 the cumulative sums are .313 .627
  // .817 .932 .974, so 0.97 keeps five; over all seven (.969 after five) it would
  // keep six, and without top-p min-p 0.05 would keep 3 (.082) too.
  o.top_k = 6;
  o.top_p = 0.97f;
  o.min_p = 0.05f;
  ExpectDistribution(Make(o).Distribution(kLogits, {}), {1, 4, 7, 2, 0}, Scaled({1, 4, 7, 2, 0}));
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  // Ids 0 and 1 seen (0 twice: penalised once); 9999 is outside the vocabulary.
  const Ids history = {0, 1, 9999, 0};
  struct Case {
    int last_n;
    float temperature;
    std::vector<double> scaled;  // of ids 3 0 4 2 1, the order in every case
  };
  const std::vector<Case> cases = {
      // 0: 2 -> 1 (ties with 4, which it precedes); 1: -1 -> -2.
      {64, 1.0f, {3.0, 1.0, 1.0, 0.5, -2.0}},
      // The window: only the last token (0); then {1, 9999, 0}; then nothing.
      {1, 1.0f, {3.0, 1.0, 1.0, 0.5, -1.0}},
      {3, 1.0f, {3.0, 1.0, 1.0, 0.5, -2.0}},
      {0, 1.0f, {3.0, 2.0, 1.0, 0.5, -1.0}},
      // Penalised before the temperature: (2 / 2) / 0.5.
      {64, 0.5f, {6.0, 2.0, 2.0, 1.0, -4.0}},
  };
  for (const Case& c : cases) {
    SamplingOptions o = Sampling(c.temperature);
    o.repetition_penalty = 2.0f;
    o.repetition_last_n = c.last_n;
    SCOPED_TRACE(testing::Message() << c.last_n << " " << c.temperature);
    ExpectDistribution(Make(o).Distribution(logits, history), {3, 0, 4, 2, 1}, c.scaled);
  }
}

TEST(Sampling, GreedyIsTheArgmaxTiesToTheSmallerId) {
  Sampler greedy = Make(SamplingOptions{});
  EXPECT_EQ(greedy.options().temperature, 0.0f);
  const std::vector<Candidate> d = greedy.Distribution(kLogits, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 1u);  // 1 and 4 tie at 3.0
  EXPECT_EQ(d[0].p, 1.0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(greedy.Sample(kLogits, {}), 1u);
  // Greedy applies the repetition penalty, on positive and negative logits.
  SamplingOptions o;
  o.repetition_penalty = 1.5f;
  EXPECT_EQ(Make(o).Sample(std::vector<float>{3.0f, 2.9f}, Ids{0}), 1u);
  EXPECT_EQ(Make(o).Sample(std::vector<float>{-0.5f, -0.6f}, Ids{0}), 1u);
  EXPECT_EQ(Make(o).Sample(std::vector<float>{-0.5f, -0.6f}, Ids{1}), 0u);
  // top-k, top-p and min-p do not change greedy's answer.
  o = SamplingOptions{};
  o.top_k = 3;
  o.top_p = 0.2f;
  o.min_p = 0.5f;
  EXPECT_EQ(Make(o).Sample(kLogits, {}), 1u);
}

TEST(Sampling, NonFiniteLogits) {
  // NaN is -inf: never drawn, even where it would be the argmax.
  const std::vector<float> with_nan = {1.0f, kNaN, 0.0f, -kInf};
  for (float t : {0.0f, 1.0f}) {
    Sampler sampler = Make(Sampling(t));
    const std::vector<Candidate> d = sampler.Distribution(with_nan, {});
    if (t == 0) {
      ASSERT_EQ(d.size(), 1u);
      EXPECT_EQ(d[0].id, 0u);
    } else {
      ExpectDistribution(d, {0, 2}, {1.0, 0.0});
    }
    for (int i = 0; i < 200; ++i) {
      const uint32_t id = sampler.Sample(with_nan, {});
      EXPECT_TRUE(id == 0 || id == 2) << id;
    }
  }
  // Every logit -inf or NaN: id 0 with p 1, greedy or not.
  for (float t : {0.0f, 0.8f}) {
    Sampler sampler = Make(Sampling(t));
    for (const std::vector<float>& row : {std::vector<float>{-kInf, -kInf, -kInf},
                                          std::vector<float>{kNaN, -kInf, kNaN}}) {
      const std::vector<Candidate> d = sampler.Distribution(row, {});
      ASSERT_EQ(d.size(), 1u);
      EXPECT_EQ(d[0].id, 0u);
      EXPECT_EQ(d[0].p, 1.0);
      EXPECT_EQ(sampler.Sample(row, {}), 0u);
    }
  }
  // +inf ids share the mass.
  ExpectDistribution(Make(Sampling(1.0f)).Distribution(std::vector<float>{0.0f, kInf, 5.0f, kInf}, {}),
                     {1, 3}, {0.0, 0.0});
}

// The HF pipeline written plainly: every filter masks logits to -inf over a full
// sort, and the softmax is recomputed at each step.
std::vector<Candidate> Reference(const std::vector<float>& logits, const Ids& history,
                                 const SamplingOptions& o) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const size_t n = logits.size();
  std::vector<double> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = std::isnan(logits[i]) ? ninf : logits[i];
  std::vector<bool> seen(n, false);
  for (size_t j = history.size() - std::min<size_t>(history.size(), o.repetition_last_n);
       j < history.size(); ++j) {
    if (history[j] < n) seen[history[j]] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (seen[i]) s[i] = s[i] > 0 ? s[i] / o.repetition_penalty : s[i] * o.repetition_penalty;
    s[i] /= o.temperature;
  }
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return s[a] > s[b]; });
  auto probabilities = [&] {
    double max = ninf, z = 0;
    for (double x : s) max = std::max(max, x);
    std::vector<double> p(n);
    for (size_t i = 0; i < n; ++i) z += p[i] = std::exp(s[i] - max);
    for (double& x : p) x /= z;
    return p;
  };
  if (o.top_k > 0) {
    for (size_t r = o.top_k; r < n; ++r) s[order[r]] = ninf;
  }
  if (o.top_p < 1) {
    const std::vector<double> p = probabilities();
    double cumulative = 0;
    for (size_t r = 0; r < n; ++r) {
      if (cumulative >= o.top_p) s[order[r]] = ninf;
      cumulative += p[order[r]];
    }
  }
  if (o.min_p > 0) {
    const std::vector<double> p = probabilities();
    for (size_t i = 0; i < n; ++i) {
      if (p[i] < o.min_p * p[order[0]]) s[i] = ninf;
    }
  }
  const std::vector<double> p = probabilities();
  std::vector<Candidate> out;
  for (uint32_t id : order) {
    if (p[id] > 0) out.push_back({id, p[id]});
  }
  return out;
}

// Logit-like values from a fixed LCG, with a few repeats (ties) and -inf.
std::vector<float> RandomLogits(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint64_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<float>(static_cast<int>((x >> 40) % 2000) - 1000) / 150.0f;
  }
  for (size_t i = 0; i < n; i += 97) v[i] = -kInf;
  return v;
}

void ExpectEqualDistributions(const std::vector<Candidate>& a, const std::vector<Candidate>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].id, b[i].id) << "rank " << i;
    ASSERT_NEAR(a[i].p, b[i].p, 1e-12) << "rank " << i;
  }
}

TEST(Sampling, MatchesThePlainHfPipeline) {
  std::vector<float> logits = RandomLogits(3000, 7);
  // Penalised ids at the top (5 twice in the window, 17) and a negative one (77);
  // the other logits lie in [-6.7, 6.7].
  logits[5] = 8.0f, logits[17] = 7.5f, logits[77] = -2.0f;
  const Ids history = {5, 17, 17, 2999, 400, 12345, 5, 77, 78, 5};
  for (float t : {0.6f, 1.0f, 1.7f}) {
    for (int k : {0, 1, 40, 2999, 5000}) {
      for (float p : {0.3f, 0.9f, 1.0f}) {
        for (float m : {0.0f, 0.05f}) {
          for (float penalty : {1.3f, 0.7f}) {
            SamplingOptions o = Sampling(t);
            o.top_k = k, o.top_p = p, o.min_p = m;
            o.repetition_penalty = penalty, o.repetition_last_n = 8;
            SCOPED_TRACE(testing::Message() << t << " " << k << " " << p << " " << m << " " << penalty);
            ExpectEqualDistributions(Make(o).Distribution(logits, history),
                                     Reference(logits, history, o));
          }
        }
      }
    }
  }
}

TEST(Sampling, MatchesThePlainHfPipelineAtVocab262144) {
  const std::vector<float> logits = RandomLogits(262144, 3);
  SamplingOptions o = Sampling(0.8f);
  o.top_k = 40, o.top_p = 0.95f;
  ExpectEqualDistributions(Make(o).Distribution(logits, {}), Reference(logits, {}, o));
  o.top_k = 0, o.top_p = 0.5f, o.min_p = 0.01f;
  ExpectEqualDistributions(Make(o).Distribution(logits, {}), Reference(logits, {}, o));
}

// The inverse CDF over Distribution's order with `u`, written here.
uint32_t InverseCdf(const std::vector<Candidate>& d, double u) {
  double cumulative = 0;
  for (const Candidate& c : d) {
    cumulative += c.p;
    if (u < cumulative) return c.id;
  }
  return d.back().id;
}

TEST(Sampling, SampleIsTheInverseCdfOfDistribution) {
  // Wide logits so that draws reach deep into the order (the lazily sorted tail).
  std::vector<float> logits = RandomLogits(5000, 11);
  for (float& l : logits) l *= 0.05f;
  for (int k : {0, 50}) {
    for (float p : {1.0f, 0.8f}) {
      SamplingOptions o = Sampling(1.0f);
      o.top_k = k, o.top_p = p, o.seed = 99;
      Sampler sampler = Make(o);
      Sampler stream = sampler;  // the same stream, read by hand
      const std::vector<Candidate> d = sampler.Distribution(logits, {});
      for (int i = 0; i < 1000; ++i) {
        ASSERT_EQ(sampler.Sample(logits, {}), InverseCdf(d, stream.NextUniform())) << i;
      }
    }
  }
}

TEST(Sampling, TheStreamIsXoshiro256StarStarSeededBySplitMix64) {
  // Values from an independent implementation of the published algorithms.
  Sampler sampler = Make(Sampling(1.0f));
  EXPECT_EQ(sampler.NextUniform(), 5415695640260286 * 0x1.0p-53);
  EXPECT_EQ(sampler.NextUniform(), 6735350249106120 * 0x1.0p-53);
  EXPECT_EQ(sampler.NextUniform(), 927921571702396 * 0x1.0p-53);
  for (int i = 3; i < 999; ++i) sampler.NextUniform();
  EXPECT_EQ(sampler.NextUniform(), 4316208208233947 * 0x1.0p-53);  // the 1000th
  sampler.Reseed(42);
  EXPECT_EQ(sampler.NextUniform(), 755370490430936 * 0x1.0p-53);
  EXPECT_EQ(sampler.NextUniform(), 3413550631330343 * 0x1.0p-53);
  EXPECT_EQ(sampler.NextUniform(), 6125286505004179 * 0x1.0p-53);
  for (int i = 3; i < 999; ++i) sampler.NextUniform();
  EXPECT_EQ(sampler.NextUniform(), 4992541146232177 * 0x1.0p-53);
}

Ids Draws(Sampler& sampler, const std::vector<float>& logits, int count) {
  Ids out;
  for (int i = 0; i < count; ++i) out.push_back(sampler.Sample(logits, {}));
  return out;
}

TEST(Sampling, SameSeedSameTokens) {
  SamplingOptions o = Sampling(1.0f);
  o.top_p = 0.95f;
  o.seed = 1234;
  Sampler a = Make(o), b = Make(o);
  const Ids first = Draws(a, kLogits, 1000);
  EXPECT_EQ(first, Draws(b, kLogits, 1000));
  a.Reseed(1234);
  EXPECT_EQ(first, Draws(a, kLogits, 1000));
  o.seed = 1235;
  Sampler c = Make(o);
  const Ids other = Draws(c, kLogits, 1000);
  EXPECT_NE(first, other);
  size_t same = 0;
  for (size_t i = 0; i < first.size(); ++i) same += first[i] == other[i];
  EXPECT_LT(same, 500u);  // independent streams agree ~24% of the time here
}

// 200k draws against Distribution: Pearson's chi-square, with its critical value at
// significance 1e-6 (a correct sampler with another seed fails about once in a
// million runs).
void ExpectFrequencies(const SamplingOptions& o, const std::vector<float>& logits,
                       double critical) {
  Sampler sampler = Make(o);
  const std::vector<Candidate> d = sampler.Distribution(logits, {});
  constexpr int kDraws = 200000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[sampler.Sample(logits, {})];
  double chi2 = 0;
  int drawn = 0;
  for (const Candidate& c : d) {
    const double expected = c.p * kDraws;
    chi2 += (counts[c.id] - expected) * (counts[c.id] - expected) / expected;
    drawn += counts[c.id];
  }
  EXPECT_EQ(drawn, kDraws) << "an id outside the distribution was drawn";
  EXPECT_LT(chi2, critical);
}

TEST(Sampling, FrequenciesFollowTheDistribution) {
  SamplingOptions o = Sampling(1.0f);
  o.seed = 5;
  ExpectFrequencies(o, kLogits, 38.26);  // 7 ids, 6 degrees of freedom
  o.top_k = 5;
  o.top_p = 0.97f;  // top-p keeps all five (.957 after four)
  ExpectFrequencies(o, kLogits, 33.38);  // {1 4 7 2 0}, 4 degrees of freedom
}

TEST(Sampling, ValidationNamesTheFieldItsValueAndRange) {
  struct Case {
    SamplingOptions options;
    const char* text;
  };
  auto with = [](auto change) {
    SamplingOptions o;
    change(o);
    return o;
  };
  const std::vector<Case> cases = {
      {with([](SamplingOptions& o) { o.temperature = -0.5f; }), "temperature = -0.5 is outside [0, inf)"},
      {with([](SamplingOptions& o) { o.temperature = kNaN; }), "temperature = nan"},
      {with([](SamplingOptions& o) { o.temperature = kInf; }), "temperature = inf"},
      {with([](SamplingOptions& o) { o.top_k = -1; }), "top_k = -1 is outside [0, inf)"},
      {with([](SamplingOptions& o) { o.top_p = 0.0f; }), "top_p = 0 is outside (0, 1]"},
      {with([](SamplingOptions& o) { o.top_p = 1.5f; }), "top_p = 1.5 is outside (0, 1]"},
      {with([](SamplingOptions& o) { o.top_p = kNaN; }), "top_p = nan"},
      {with([](SamplingOptions& o) { o.min_p = 1.0f; }), "min_p = 1 is outside [0, 1)"},
      {with([](SamplingOptions& o) { o.min_p = -0.25f; }), "min_p = -0.25"},
      {with([](SamplingOptions& o) { o.min_p = kNaN; }), "min_p = nan"},
      {with([](SamplingOptions& o) { o.repetition_penalty = 0.0f; }), "repetition_penalty = 0 is outside (0, inf)"},
      {with([](SamplingOptions& o) { o.repetition_penalty = kNaN; }), "repetition_penalty = nan"},
      {with([](SamplingOptions& o) { o.repetition_last_n = -3; }), "repetition_last_n = -3 is outside [0, inf)"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ValidateSamplingOptions(c.options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(status.message().find(c.text), std::string::npos) << status.message();
    EXPECT_EQ(Sampler::Create(c.options).status(), status);
  }
  EXPECT_TRUE(ValidateSamplingOptions(SamplingOptions{}).ok());
  SamplingOptions edges;
  edges.temperature = 2.0f, edges.top_k = 1, edges.top_p = 1.0f, edges.min_p = 0.99f;
  edges.repetition_penalty = 0.5f, edges.repetition_last_n = 0;
  EXPECT_TRUE(ValidateSamplingOptions(edges).ok());
}

}  // namespace
}  // namespace dk::runtime
