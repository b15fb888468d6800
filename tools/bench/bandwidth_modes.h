// The host's read bandwidth swings between two modes whose levels differ from one
// machine kind to the next (docs/measurements.md); a benchmark reports each mode
// apart instead of a median across both. The split comes from the samples
// themselves, not a fixed threshold that falls inside one machine's slow mode:
// sorted, the largest ratio between neighbours, when above kModeGap, separates the
// modes, at the geometric mean of the two neighbours. tools/peer/modes_ab.py splits
// its runs the same way.
//
// Thread-safety: a pure function.
#ifndef DK_TOOLS_BENCH_BANDWIDTH_MODES_H_
#define DK_TOOLS_BENCH_BANDWIDTH_MODES_H_

#include <algorithm>
#include <cmath>
#include <vector>

namespace dk::bench {

// Two neighbouring samples further apart than this ratio are in different modes.
inline constexpr double kModeGap = 1.3;

// The bandwidth that splits `gbs` into a slow and a fast mode (fast: >= the split),
// or 0 when the samples form one mode (no gap above kModeGap, or fewer than two).
inline double ModeSplit(std::vector<double> gbs) {
  gbs.erase(std::remove_if(gbs.begin(), gbs.end(), [](double g) { return !(g > 0); }), gbs.end());
  if (gbs.size() < 2) return 0.0;
  std::sort(gbs.begin(), gbs.end());
  size_t best = 0;
  double best_ratio = 0.0;
  for (size_t i = 0; i + 1 < gbs.size(); ++i) {
    const double ratio = gbs[i + 1] / gbs[i];
    if (ratio > best_ratio) {
      best_ratio = ratio;
      best = i;
    }
  }
  return best_ratio > kModeGap ? std::sqrt(gbs[best] * gbs[best + 1]) : 0.0;
}

}  // namespace dk::bench

#endif  // DK_TOOLS_BENCH_BANDWIDTH_MODES_H_
