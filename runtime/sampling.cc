#include "runtime/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace dk::runtime {
namespace {

using Entry = Sampler::Workspace::Entry;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// The first prefix the lazy ordering sorts; each later step doubles the prefix.
constexpr size_t kFirstChunk = 64;

absl::Status OutOfRange(const char* field, double value, const char* range) {
  return absl::InvalidArgumentError(
      absl::StrCat("SamplingOptions.", field, " = ", value, " is outside ", range));
}

// The order every filter and the draw see: most likely first, ties to the smaller id.
bool Before(const Entry& a, const Entry& b) { return a.e > b.e || (a.e == b.e && a.id < b.id); }

struct Scored {
  double s;
  uint32_t id;
};
bool ScoredBefore(const Scored& a, const Scored& b) {
  return a.s > b.s || (a.s == b.s && a.id < b.id);
}

// A logit as the filters see it: NaN -> -inf, +inf -> the largest finite float
// (branch-free, so that the loops over the vocabulary vectorise).
double Clean(float logit) {
  constexpr double kMax = std::numeric_limits<float>::max();
  const double x = logit;
  const double y = x > kNegInf ? x : kNegInf;  // false for NaN
  return y < kMax ? y : kMax;
}

double Penalise(double logit, double penalty) { return logit > 0 ? logit / penalty : logit * penalty; }

// The distinct ids < n among the last repetition_last_n history tokens, sorted;
// empty when the penalty is off.
std::vector<uint32_t> PenalisedIds(absl::Span<const uint32_t> history, size_t n,
                                   const SamplingOptions& options) {
  if (options.repetition_penalty == 1.0f) return {};
  const size_t window = std::min(history.size(), static_cast<size_t>(options.repetition_last_n));
  std::vector<uint32_t> ids;
  for (size_t i = history.size() - window; i < history.size(); ++i) {
    if (history[i] < n) ids.push_back(history[i]);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// scores[i] = the penalised logit divided by the temperature; returns the largest.
double Score(absl::Span<const float> logits, absl::Span<const uint32_t> history,
             const SamplingOptions& options, std::vector<double>& scores) {
  const double temperature = options.temperature;
  const size_t n = logits.size();
  scores.resize(n);
  for (size_t i = 0; i < n; ++i) scores[i] = Clean(logits[i]) / temperature;
  for (const uint32_t id : PenalisedIds(history, n, options)) {
    scores[id] = Penalise(Clean(logits[id]), options.repetition_penalty) / temperature;
  }
  double max = kNegInf;
  for (double s : scores) max = std::max(max, s);
  return max;
}

// Buckets of e in (0, 1] by its bit pattern (monotone for positive doubles): a
// quarter octave each, from 1 down to 2^-255; the last holds everything smaller.
constexpr size_t kBuckets = 1024;
size_t Bucket(double e) {
  uint64_t bits, one_bits;
  const double one = 1.0;
  std::memcpy(&bits, &e, sizeof bits);
  std::memcpy(&one_bits, &one, sizeof one_bits);
  return std::min<uint64_t>((one_bits - bits) >> 50, kBuckets - 1);
}

// Makes entries[0, need) the first `need` kept ids of the order. For the whole
// vocabulary, entries grow by whole buckets of e (at least doubling them): one pass
// over the vocabulary picks those ids, then only they are sorted. Otherwise entries
// already hold every kept id and are sorted once.
void SortPrefix(Sampler::Workspace& ws, size_t need) {
  auto& v = ws.entries;
  if (ws.sorted >= need) return;
  if (ws.histogram.empty()) {
    std::sort(v.begin() + ws.sorted, v.end(), Before);
    ws.sorted = v.size();
    return;
  }
  const std::vector<double>& e = ws.scores;
  // (next_bucket < kBuckets: the last bucket holds every kept id left.)
  while (ws.sorted < need && ws.next_bucket < kBuckets) {
    const size_t chunk = std::max(kFirstChunk, ws.sorted);
    const size_t first = ws.next_bucket;
    size_t last = first, taken = ws.histogram[first];
    while (taken < chunk && last + 1 < kBuckets) taken += ws.histogram[++last];
    for (size_t i = 0; i < e.size(); ++i) {
      if (e[i] == 0) continue;
      const size_t bucket = Bucket(e[i]);
      if (bucket >= first && bucket <= last) v.push_back({e[i], static_cast<uint32_t>(i)});
    }
    std::sort(v.begin() + ws.sorted, v.end(), Before);
    ws.sorted = v.size();
    ws.next_bucket = last + 1;
  }
}

constexpr size_t kBlock = 64;

// Whether any of the kBlock logits at p is > bound (NaN is not): a fixed-length loop
// without branches, which the compiler vectorises even at -O2.
bool AnyAbove(const float* p, float bound) {
  int any = 0;
  for (size_t j = 0; j < kBlock; ++j) any |= p[j] > bound;
  return any;
}

// The best `count` ids by their cleaned logit (finite only), in no set order. Blocks
// whose maximum cannot enter the heap are skipped after one vectorised pass.
std::vector<Scored> TopByLogit(absl::Span<const float> logits, size_t count) {
  std::vector<Scored> heap;  // heap.front(): the worst of those kept so far
  heap.reserve(count);
  float worst = -std::numeric_limits<float>::infinity();  // a bound while filling
  for (size_t begin = 0; begin < logits.size(); begin += kBlock) {
    const size_t end = std::min(logits.size(), begin + kBlock);
    if (end - begin == kBlock && !AnyAbove(&logits[begin], worst)) continue;
    for (size_t i = begin; i < end; ++i) {
      // A later id with an equal value comes after; NaN fails this test too.
      if (!(logits[i] > worst)) continue;
      const Scored x{Clean(logits[i]), static_cast<uint32_t>(i)};
      if (heap.size() < count) {
        heap.push_back(x);
        std::push_heap(heap.begin(), heap.end(), ScoredBefore);
        if (heap.size() == count) worst = static_cast<float>(heap.front().s);
      } else if (ScoredBefore(x, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), ScoredBefore);
        heap.back() = x;
        std::push_heap(heap.begin(), heap.end(), ScoredBefore);
        worst = static_cast<float>(heap.front().s);
      }
    }
  }
  return heap;
}

// Top-k's set with penalised, scaled scores. Every id of it that the penalty does
// not touch is among the best k + (penalised ids) by raw logit, so one pass with a
// heap of that size and a sort of the few survivors suffice.
std::vector<Scored> TopK(absl::Span<const float> logits, absl::Span<const uint32_t> history,
                         const SamplingOptions& options, size_t k, double t) {
  const std::vector<uint32_t> penalised = PenalisedIds(history, logits.size(), options);
  std::vector<Scored> top = TopByLogit(logits, k + penalised.size());
  std::vector<Scored> out;
  for (const Scored& x : top) {
    if (!std::binary_search(penalised.begin(), penalised.end(), x.id)) out.push_back({x.s / t, x.id});
  }
  for (const uint32_t id : penalised) {
    const double l = Clean(logits[id]);
    if (l != kNegInf) out.push_back({Penalise(l, options.repetition_penalty) / t, id});
  }
  std::sort(out.begin(), out.end(), ScoredBefore);
  if (out.size() > k) out.resize(k);
  return out;
}

// Finds the ids that survive top-k and min-p (e = exp(s - best s) >= min_p; the
// best has e = 1): top-k's few in ws.entries, the whole vocabulary's as ws.scores'
// e (0 for the others) with their histogram. Sets ws.z to the sum of e over top-k's
// set (top-p's normaliser); returns whether min-p (or underflow) left any out.
bool Candidates(absl::Span<const float> logits, absl::Span<const uint32_t> history,
                const SamplingOptions& options, Sampler::Workspace& ws) {
  ws.entries.clear();
  ws.sorted = ws.count = ws.next_bucket = 0;
  ws.histogram.clear();
  ws.z = 0;
  const double min_p = options.min_p;
  if (options.top_k > 0 && static_cast<size_t>(options.top_k) < logits.size()) {
    const std::vector<Scored> top = TopK(logits, history, options, options.top_k, options.temperature);
    for (const Scored& x : top) {
      const double e = std::exp(x.s - top.front().s);
      ws.z += e;
      if (e > 0 && e >= min_p) ws.entries.push_back({e, x.id});
    }
    ws.count = ws.entries.size();
    return ws.count < top.size();
  }
  const double best = Score(logits, history, options, ws.scores);
  if (best == kNegInf) return false;
  ws.histogram.assign(kBuckets, 0);
  uint32_t* histogram = ws.histogram.data();
  size_t finite = 0, kept = 0;
  double z = 0;
  for (double& s : ws.scores) {
    finite += s != kNegInf;
    double e = std::exp(s - best);  // exp(-inf) = 0
    z += e;
    if (e < min_p) e = 0;
    s = e;
    if (e > 0) ++histogram[Bucket(e)], ++kept;
  }
  ws.z = z;
  ws.count = kept;
  return kept < finite;
}

// The sum of the kept ids' e: in the order for a prefix, else in id order.
double KeptSum(const Sampler::Workspace& ws) {
  double z = 0;
  if (ws.histogram.empty() || ws.entries.size() == ws.count) {
    for (size_t i = 0; i < ws.count; ++i) z += ws.entries[i].e;
  } else {
    for (double e : ws.scores) z += e;
  }
  return z;
}

// Greedy: the argmax of the penalised logits, ties (and an all -inf row) to the
// smaller id.
uint32_t Argmax(absl::Span<const float> logits, absl::Span<const uint32_t> history,
                const SamplingOptions& options) {
  const std::vector<Scored> top = TopK(logits, history, options, 1, 1.0);
  return top.empty() ? 0 : top.front().id;
}

// splitmix64: expands one 64-bit seed into the xoshiro256** state.
uint64_t SplitMix64(uint64_t& x) {
  x += 0x9e3779b97f4a7c15ull;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

absl::Status ValidateSamplingOptions(const SamplingOptions& o) {
  // Written so that NaN fails every check (comparisons with NaN are false).
  if (!(o.temperature >= 0 && std::isfinite(o.temperature))) {
    return OutOfRange("temperature", o.temperature, "[0, inf) (0: greedy)");
  }
  if (o.top_k < 0) return OutOfRange("top_k", o.top_k, "[0, inf) (0: off)");
  if (!(o.top_p > 0 && o.top_p <= 1)) return OutOfRange("top_p", o.top_p, "(0, 1] (1: off)");
  if (!(o.min_p >= 0 && o.min_p < 1)) return OutOfRange("min_p", o.min_p, "[0, 1) (0: off)");
  if (!(o.repetition_penalty > 0 && std::isfinite(o.repetition_penalty))) {
    return OutOfRange("repetition_penalty", o.repetition_penalty, "(0, inf) (1: off)");
  }
  if (o.repetition_last_n < 0) {
    return OutOfRange("repetition_last_n", o.repetition_last_n, "[0, inf)");
  }
  return absl::OkStatus();
}

absl::StatusOr<Sampler> Sampler::Create(const SamplingOptions& options) {
  if (absl::Status status = ValidateSamplingOptions(options); !status.ok()) return status;
  return Sampler(options);
}

void Sampler::Reseed(uint64_t seed) {
  for (uint64_t& word : state_) word = SplitMix64(seed);
}

double Sampler::NextUniform() {
  // xoshiro256**.
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return static_cast<double>(result >> 11) * 0x1.0p-53;
}

void Sampler::Filter(absl::Span<const float> logits, absl::Span<const uint32_t> history,
                     Workspace& ws) const {
  bool cut = Candidates(logits, history, options_, ws);
  if (options_.top_p < 1.0f) {
    const double top_p = options_.top_p, z_top_k = ws.z;
    double cumulative = 0;
    for (size_t i = 0; i < ws.count; ++i) {
      SortPrefix(ws, i + 1);
      cumulative += ws.entries[i].e / z_top_k;
      if (cumulative >= top_p) {
        cut = cut || i + 1 < ws.count;
        ws.count = i + 1;
        ws.entries.resize(ws.count);
        break;
      }
    }
  }
  if (cut) ws.z = KeptSum(ws);
}

std::vector<Candidate> Sampler::Distribution(absl::Span<const float> logits,
                                             absl::Span<const uint32_t> history) const {
  if (options_.temperature == 0) return {{Argmax(logits, history, options_), 1.0}};
  Workspace ws;
  Filter(logits, history, ws);
  if (ws.count == 0) return {{0, 1.0}};
  SortPrefix(ws, ws.count);
  std::vector<Candidate> out;
  out.reserve(ws.count);
  for (size_t i = 0; i < ws.count; ++i) out.push_back({ws.entries[i].id, ws.entries[i].e / ws.z});
  return out;
}

uint32_t Sampler::Sample(absl::Span<const float> logits, absl::Span<const uint32_t> history) {
  if (options_.temperature == 0) return Argmax(logits, history, options_);
  Workspace& ws = workspace_;
  Filter(logits, history, ws);
  const double u = NextUniform();
  if (ws.count == 0) return 0;
  double cumulative = 0;
  for (size_t i = 0; i < ws.count; ++i) {
    SortPrefix(ws, i + 1);
    cumulative += ws.entries[i].e / ws.z;
    if (u < cumulative) return ws.entries[i].id;
  }
  // Rounding left u above the total: the last id of the order.
  return ws.entries[ws.count - 1].id;
}

}  // namespace dk::runtime
