// Per-layer comparison metrics and the table //tools/diagnose prints: how close one
// activation vector (ours) is to a reference one (HF). A diagnosis aid, never a gate.
// Thread-safety: pure functions.
#ifndef DK_TOOLS_DIAGNOSE_METRICS_H_
#define DK_TOOLS_DIAGNOSE_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dk::diagnose {

struct Metrics {
  double cosine = 0;     // <a,b> / (|a| |b|); 1 when both are all-zero, 0 when one is
  double max_abs = 0;    // max_i |a_i - b_i|
  int64_t argmax = -1;   // the i of max_abs (-1 for empty vectors)
  double rel_l2 = 0;     // |a - b| / |b|; 0 when both are zero, +inf when only b is
  double ref_norm = 0;   // |b|
  bool finite = true;    // every a_i and b_i is finite
};

// a: ours, b: the reference; both n long. Accumulates in double.
Metrics Compare(const float* a, const float* b, int64_t n);

struct Row {
  std::string name;  // "emb", "0", "1", ..., "final_norm"
  Metrics m;
};

// A fixed-width text table, one line per row:
//   layer      |   cosine   |  max-abs  |  rel-L2   | at  | |ref|
std::string FormatTable(const std::vector<Row>& rows);

// How two top-k id lists relate: "same", "same set, different order", or
// "overlap 3/5".
std::string CompareTopK(const std::vector<int64_t>& ours, const std::vector<int64_t>& ref);

}  // namespace dk::diagnose

#endif  // DK_TOOLS_DIAGNOSE_METRICS_H_
