#include "kernels/topk/topk.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "util/check.h"

#ifndef DK_KERNELS_TOPK_TOPK_CC_ONCE_
#define DK_KERNELS_TOPK_TOPK_CC_ONCE_
namespace dk::kernels::topk_internal {

// True if (va, ia) ranks above (vb, ib).
inline bool Ranks(float va, uint32_t ia, float vb, uint32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

// A descending list of at most k entries stored in the caller's arrays.
struct List {
  uint32_t* ids;
  float* values;
  size_t k;
  size_t size;

  // Inserts an entry that ranks below every entry already in the list of equal
  // value (true for a scan in index order): it goes after them.
  void InsertScanned(float v, uint32_t id) {
    size_t j = size < k ? size++ : k - 1;
    for (; j > 0 && values[j - 1] < v; --j) {
      values[j] = values[j - 1];
      ids[j] = ids[j - 1];
    }
    values[j] = v;
    ids[j] = id;
  }
};

}  // namespace dk::kernels::topk_internal
#endif  // DK_KERNELS_TOPK_TOPK_CC_ONCE_

// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/topk/topk.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using topk_internal::List;
using topk_internal::Ranks;

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// Argmax of logits[0, n). Four independent sets of (max, index) lanes, each updated on a strict Gt, so every lane keeps the first index of
// its maximum and NaNs (Gt is false) never enter.
size_t ArgmaxImpl(const float* HWY_RESTRICT logits, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t nf = hn::Lanes(df);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto m0 = hn::Set(df, neg_inf), m1 = m0, m2 = m0, m3 = m0;
  auto i0 = hn::Set(du, kNone), i1 = i0, i2 = i0, i3 = i0;
  auto c0 = hn::Iota(du, 0);
  const auto c1_off = hn::Set(du, static_cast<uint32_t>(nf));
  const auto step = hn::Set(du, static_cast<uint32_t>(4 * nf));
  size_t i = 0;
  const auto update = [&](size_t at, const auto cur, auto& m, auto& idx) {
    const auto v = hn::LoadU(df, logits + at);
    const auto gt = hn::Gt(v, m);
    m = hn::IfThenElse(gt, v, m);
    idx = hn::IfThenElse(hn::RebindMask(du, gt), cur, idx);
  };
  for (; i + 4 * nf <= n; i += 4 * nf) {
    const auto c1 = hn::Add(c0, c1_off);
    const auto c2 = hn::Add(c1, c1_off);
    const auto c3 = hn::Add(c2, c1_off);
    update(i, c0, m0, i0);
    update(i + nf, c1, m1, i1);
    update(i + 2 * nf, c2, m2, i2);
    update(i + 3 * nf, c3, m3, i3);
    c0 = hn::Add(c0, step);
  }
  for (; i + nf <= n; i += nf) {
    update(i, c0, m0, i0);
    c0 = hn::Add(c0, c1_off);
  }
  HWY_ALIGN float mv[4 * hn::MaxLanes(df)];
  HWY_ALIGN uint32_t iv[4 * hn::MaxLanes(df)];
  hn::Store(m0, df, mv);
  hn::Store(m1, df, mv + nf);
  hn::Store(m2, df, mv + 2 * nf);
  hn::Store(m3, df, mv + 3 * nf);
  hn::Store(i0, du, iv);
  hn::Store(i1, du, iv + nf);
  hn::Store(i2, du, iv + 2 * nf);
  hn::Store(i3, du, iv + 3 * nf);
  float best = neg_inf;
  uint32_t best_i = kNone;
  for (size_t l = 0; l < 4 * nf; ++l) {
    if (iv[l] != kNone && Ranks(mv[l], iv[l], best, best_i)) {
      best = mv[l];
      best_i = iv[l];
    }
  }
  for (; i < n; ++i) {
    if (logits[i] > best) {  // tail indices are larger than all lanes'
      best = logits[i];
      best_i = static_cast<uint32_t>(i);
    }
  }
  if (best_i != kNone) return best_i;
  // Nothing beat -inf: the answer is the first non-NaN (-inf) logit, if any.
  for (i = 0; i < n; ++i) {
    if (!std::isnan(logits[i])) return i;
  }
  return 0;
}

// Top-k of logits[0, n) into `list` (empty on entry), ids offset by `base`.
void TopKImpl(const float* HWY_RESTRICT logits, size_t n, uint32_t base,
              List* HWY_RESTRICT list) {
  const hn::ScalableTag<float> df;
  const size_t nf = hn::Lanes(df);
  if (list->k == 0) return;
  size_t i = 0;
  // Fill: the first k non-NaN logits enter unconditionally.
  for (; i < n && list->size < list->k; ++i) {
    if (!std::isnan(logits[i])) {
      list->InsertScanned(logits[i], static_cast<uint32_t>(base + i));
    }
  }
  if (list->size < list->k) return;  // fewer than k non-NaN logits: all taken
  // Scan: an element enters only if it beats the current k-th value; an equal
  // value has a larger index, so it ranks below and stays out.
  const auto scalar_range = [&](size_t from, size_t to) {
    for (size_t j = from; j < to; ++j) {
      if (logits[j] > list->values[list->k - 1]) {
        list->InsertScanned(logits[j], static_cast<uint32_t>(base + j));
      }
    }
  };
  auto thresh = hn::Set(df, list->values[list->k - 1]);
  for (; i + 4 * nf <= n; i += 4 * nf) {
    const auto v0 = hn::LoadU(df, logits + i);
    const auto v1 = hn::LoadU(df, logits + i + nf);
    const auto v2 = hn::LoadU(df, logits + i + 2 * nf);
    const auto v3 = hn::LoadU(df, logits + i + 3 * nf);
    const auto beats = hn::Or(hn::Or(hn::Gt(v0, thresh), hn::Gt(v1, thresh)),
                              hn::Or(hn::Gt(v2, thresh), hn::Gt(v3, thresh)));
    if (HWY_UNLIKELY(!hn::AllFalse(df, beats))) {
      // Rare once the list holds large values: rescan only the vectors that beat
      // the threshold, in index order (the threshold rises as we go).
      const decltype(v0) vs[4] = {v0, v1, v2, v3};
      for (size_t c = 0; c < 4; ++c) {
        if (!hn::AllFalse(df, hn::Gt(vs[c], thresh))) {
          scalar_range(i + c * nf, i + (c + 1) * nf);
          thresh = hn::Set(df, list->values[list->k - 1]);
        }
      }
    }
  }
  scalar_range(i, n);
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dk::kernels {

HWY_EXPORT(ArgmaxImpl);
HWY_EXPORT(TopKImpl);

using topk_internal::List;

size_t Argmax(const float* logits, size_t n) {
  if (n == 0) return 0;
  DK_CHECK(n <= std::numeric_limits<uint32_t>::max() - 64);
  return HWY_DYNAMIC_DISPATCH(ArgmaxImpl)(logits, n);
}

size_t TopK(const float* logits, size_t n, size_t k, uint32_t* ids, float* values) {
  DK_CHECK(n <= std::numeric_limits<uint32_t>::max() - 64);
  List list{ids, values, k, 0};
  HWY_DYNAMIC_DISPATCH(TopKImpl)(logits, n, 0, &list);
  return list.size;
}

const char* TopKTargetName() {
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(targets & -targets);
}

}  // namespace dk::kernels
#endif  // HWY_ONCE
