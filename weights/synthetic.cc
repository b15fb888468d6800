// Deterministic synthetic weights (weights.h: MakeSyntheticWeights).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/thread_pool.h"
#include "weights/common.h"
#include "weights/parallel.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

uint64_t Fnv1a64(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

inline uint64_t Mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool IsNormWeight(absl::string_view name) { return absl::EndsWith(name, "norm.weight"); }

uint64_t SyntheticTensorKey(uint64_t seed, absl::string_view name) {
  return Mix64(Mix64(seed ^ 0x6a09e667f3bcc908ULL) ^ Fnv1a64(name));
}

// Element i of the uniform noise of tensor `key`, with standard deviation `std`
// (uniform on [-a, a], a = std * sqrt(3)): q in [-2^23, 2^23) times a / 2^23 is one
// f32 multiply of exact operands, so the result is the same on every machine and
// compiler (no FMA can apply).
float Uniform(uint64_t key, uint64_t i, double std) {
  const float scale = static_cast<float>(std * 1.7320508075688772 / 8388608.0);
  const uint64_t z = Mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
  const int32_t q = static_cast<int32_t>(z >> 40) - (1 << 23);
  return static_cast<float>(q) * scale;
}

bf16 SyntheticElement(uint64_t key, uint64_t i) { return F32ToBf16(Uniform(key, i, 0.02)); }

// A norm weight scales by 1 + u, u of std 0.3: stored as 1 + u, or as u where the
// norm scales by (1 + w) (Gemma; its checkpoints store the weight zero-centered).
// Norms that all scale by exactly 1 let a model with a norm wired to the wrong
// tensor, or one (1 + w) read as w, pass every check; scales of 1 +- 0.52 do not,
// and stay close enough to 1 that bf16 noise between two correct implementations
// stays small over the layers.
bf16 SyntheticNormElement(uint64_t key, uint64_t i, bool plus_one) {
  const float u = Uniform(key, i, 0.3);
  return F32ToBf16(plus_one ? u : 1.0f + u);
}

}  // namespace

absl::StatusOr<Weights> MakeSyntheticWeights(const elf::ModelShape& shape, uint64_t seed, ThreadPool* pool) {
  Weights w;
  w.set_source(absl::StrCat("synthetic(seed=", seed, ")"));
  w.set_shape(shape);
  struct Job {
    bf16* data;
    int64_t numel;
    uint64_t key;
    bool norm;
  };
  std::vector<Job> jobs;
  const auto expected = ExpectedTensors(shape);
  for (const auto& [name, dims] : expected) {
    Tensor t;
    t.shape = dims;
    t.data = AlignedBuffer<bf16>(static_cast<size_t>(t.numel()));
    if (t.numel() > 0 && t.data.empty()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", t.numel(), " elements for synthetic tensor \"", name, "\" ",
          ShapeStr(dims), " of model \"", shape.name(), "\""));
    }
    w.Add(name, std::move(t));
  }
  for (const auto& [name, dims] : expected) {
    Tensor* t = const_cast<Tensor*>(w.Find(name));
    jobs.push_back({t->data.data(), t->numel(), SyntheticTensorKey(seed, name),
                    IsNormWeight(name)});
  }
  // Tasks of at most 1M elements across all tensors: balanced for any shape.
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<std::pair<int, int64_t>> tasks;  // (job, begin)
  for (int j = 0; j < static_cast<int>(jobs.size()); ++j) {
    for (int64_t b = 0; b < jobs[j].numel; b += kChunk) tasks.push_back({j, b});
  }
  const bool norm_plus_one = shape.norm_plus_one();
  ParallelChunks(pool, static_cast<int64_t>(tasks.size()), 1, [&](int64_t task, int64_t) {
    const Job& job = jobs[tasks[task].first];
    const int64_t begin = tasks[task].second;
    const int64_t end = std::min(begin + kChunk, job.numel);
    if (job.norm) {
      for (int64_t i = begin; i < end; ++i) job.data[i] = SyntheticNormElement(job.key, i, norm_plus_one);
      return;
    }
    for (int64_t i = begin; i < end; ++i) job.data[i] = SyntheticElement(job.key, i);
  });
  return w;
}

}  // namespace dk::weights
