// Test helpers: run a check once per compiled-and-supported Highway target, and make
// deterministic test data.
#ifndef DK_KERNELS_TESTING_TARGETS_H_
#define DK_KERNELS_TESTING_TARGETS_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "util/bf16.h"

namespace dk::kernels::testing {

// Calls fn(target_name) once per Highway target this binary was compiled for and
// this CPU supports; dynamic dispatch inside fn uses that target.
template <typename Fn>
void ForEachTarget(const Fn& fn) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(std::string("Highway target ") + hwy::TargetName(target));
    fn(hwy::TargetName(target));
  }
  hwy::SetSupportedTargetsForTest(0);
}

inline std::vector<bf16> RandomBf16(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<bf16> v(n);
  for (auto& e : v) e = F32ToBf16(dist(rng));
  return v;
}

inline std::vector<float> RandomF32(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = dist(rng);
  return v;
}

// Copies `v` to an address `offset_bytes` past a 64-byte boundary inside `storage`
// and returns the misaligned pointer (for misalignment tests).
template <typename T>
T* Misaligned(const std::vector<T>& v, size_t offset_bytes,
              std::vector<uint8_t>* storage) {
  storage->assign(v.size() * sizeof(T) + 128, 0);
  uintptr_t base = reinterpret_cast<uintptr_t>(storage->data());
  base = (base + 63) / 64 * 64 + offset_bytes;
  T* p = reinterpret_cast<T*>(base);
  if (!v.empty()) std::memcpy(static_cast<void*>(p), v.data(), v.size() * sizeof(T));
  return p;
}

// Distance in bf16 units in the last place between two finite floats that are
// bf16-representable.
inline int Bf16UlpDistance(float a, float b) {
  const int ia = static_cast<int16_t>(F32ToBf16(a).bits);
  const int ib = static_cast<int16_t>(F32ToBf16(b).bits);
  auto ordered = [](int v) { return v < 0 ? -32768 - v : v; };
  const int d = ordered(ia) - ordered(ib);
  return d < 0 ? -d : d;
}

}  // namespace dk::kernels::testing

#endif  // DK_KERNELS_TESTING_TARGETS_H_
