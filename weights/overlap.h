// The tensor readers' shared rule that no two tensors share bytes of a file's data
// section (GGUF, safetensors): one check, each reader naming the pair its own way.
// Thread-safety: stateless function.
#ifndef DK_WEIGHTS_OVERLAP_H_
#define DK_WEIGHTS_OVERLAP_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dk::weights {

// A tensor's bytes [begin, end) and its name (for a deterministic order).
struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  const std::string* name = nullptr;
};

// The first two non-empty ranges that share bytes, in (begin, name) order, as
// indices into `ranges` (the one that starts first, then the other); nullopt when no
// two do.
inline std::optional<std::pair<size_t, size_t>> FirstOverlap(const std::vector<ByteRange>& ranges) {
  std::vector<size_t> order;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].end > ranges[i].begin) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].begin != ranges[b].begin ? ranges[a].begin < ranges[b].begin
                                              : *ranges[a].name < *ranges[b].name;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    if (ranges[order[i]].begin < ranges[order[i - 1]].end) return std::make_pair(order[i - 1], order[i]);
  }
  return std::nullopt;
}

}  // namespace dk::weights

#endif  // DK_WEIGHTS_OVERLAP_H_
