// Scalar references for Argmax / TopK (tests only): a stable sort by (-value, id)
// over the non-NaN logits.
#ifndef DK_KERNELS_TOPK_TOPK_REF_H_
#define DK_KERNELS_TOPK_TOPK_REF_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dk::kernels::ref {

// The ids of the min(k, #non-NaN) highest-ranked logits, in rank order.
inline std::vector<uint32_t> TopK(const float* logits, size_t n, size_t k) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isnan(logits[i])) ids.push_back(static_cast<uint32_t>(i));
  }
  std::stable_sort(ids.begin(), ids.end(),
                   [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  ids.resize(std::min(k, ids.size()));
  return ids;
}

// Argmax as documented: 0 when every logit is NaN.
inline size_t Argmax(const float* logits, size_t n) {
  const std::vector<uint32_t> top = TopK(logits, n, 1);
  return top.empty() ? 0 : top[0];
}

}  // namespace dk::kernels::ref

#endif  // DK_KERNELS_TOPK_TOPK_REF_H_
