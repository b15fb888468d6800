#include "tools/diagnose/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dk::diagnose {

Metrics Compare(const float* a, const float* b, int64_t n) {
  Metrics m;
  double dot = 0, aa = 0, bb = 0, dd = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    if (!std::isfinite(x) || !std::isfinite(y)) m.finite = false;
    dot += x * y;
    aa += x * x;
    bb += y * y;
    const double d = x - y;
    dd += d * d;
    const double ad = std::fabs(d);
    if (m.argmax < 0 || ad > m.max_abs || std::isnan(ad)) {
      m.max_abs = ad;
      m.argmax = i;
    }
  }
  m.ref_norm = std::sqrt(bb);
  if (aa == 0 && bb == 0) {
    m.cosine = 1;
  } else if (aa == 0 || bb == 0) {
    m.cosine = 0;
  } else {
    m.cosine = dot / (std::sqrt(aa) * std::sqrt(bb));
  }
  if (bb == 0) {
    m.rel_l2 = dd == 0 ? 0 : std::numeric_limits<double>::infinity();
  } else {
    m.rel_l2 = std::sqrt(dd) / std::sqrt(bb);
  }
  return m;
}

std::string FormatTable(const std::vector<Row>& rows) {
  std::string out = absl::StrFormat("%-10s | %-10s | %-9s | %-9s | %-5s | %s\n", "layer", "cosine",
                                    "max-abs", "rel-L2", "at", "|ref|");
  out += std::string(62, '-') + "\n";
  for (const Row& r : rows) {
    absl::StrAppend(&out, absl::StrFormat("%-10s | %10.6f | %9.4g | %9.3e | %5d | %.4g%s\n", r.name,
                                          r.m.cosine, r.m.max_abs, r.m.rel_l2, r.m.argmax,
                                          r.m.ref_norm, r.m.finite ? "" : "  NON-FINITE"));
  }
  return out;
}

std::string CompareTopK(const std::vector<int64_t>& ours, const std::vector<int64_t>& ref) {
  if (ours == ref) return "same";
  int common = 0;
  for (int64_t id : ours) common += std::count(ref.begin(), ref.end(), id) > 0;
  if (ours.size() == ref.size() && common == static_cast<int>(ref.size())) {
    return "same set, different order";
  }
  return absl::StrCat("overlap ", common, "/", ref.size());
}

}  // namespace dk::diagnose
