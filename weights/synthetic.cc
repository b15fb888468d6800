// Deterministic synthetic weights (weights.h: MakeSyntheticWeights).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/thread_pool.h"
#include "weights/common.h"
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

bf16 SyntheticElement(uint64_t key, uint64_t i) {
  // a = 0.02 * sqrt(3): uniform on [-a, a] has std 0.02. q in [-2^23, 2^23) times
  // a / 2^23 is one f32 multiply of exact operands, so the result is the same on
  // every machine and compiler (no FMA can apply).
  constexpr float kScale = static_cast<float>(0.034641016151377546 / 8388608.0);
  const uint64_t z = Mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
  const int32_t q = static_cast<int32_t>(z >> 40) - (1 << 23);
  return F32ToBf16(static_cast<float>(q) * kScale);
}

}  // namespace

absl::StatusOr<Weights> MakeSyntheticWeights(const elf::ModelShape& shape, uint64_t seed) {
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
  SharedThreadPool().Run(static_cast<int64_t>(tasks.size()), [&](int64_t task, int) {
    const Job& job = jobs[tasks[task].first];
    const int64_t begin = tasks[task].second;
    const int64_t end = std::min(begin + kChunk, job.numel);
    if (job.norm) {
      // Every norm scales by 1: weight 1.0, or 0.0 where the norm scales by (1 + w)
      // (Gemma; its checkpoints store the weight zero-centered). A scale of 2 in every
      // one of Gemma 3's six norms per layer doubled the bf16 noise between two correct
      // implementations (HF's eager vs sdpa attention: 4.3% vs 1.8% relative L2 after
      // 18 layers).
      const bf16 one = norm_plus_one ? bf16{0x0000} : bf16{0x3F80};
      for (int64_t i = begin; i < end; ++i) job.data[i] = one;
      return;
    }
    for (int64_t i = begin; i < end; ++i) job.data[i] = SyntheticElement(job.key, i);
  });
  return w;
}

}  // namespace dk::weights
