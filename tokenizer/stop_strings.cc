#include "tokenizer/stop_strings.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"

namespace dk::tokenizer {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopStrings::Push(absl::string_view text, bool* stopped) {
  *stopped = stopped_;
  if (stopped_) return "";
  held_.append(text.data(), text.size());
  // No stop was complete in held_ before this piece, so any match now ends in the new text;
  // for each stop its first occurrence is the one that ends first.
  size_t best_begin = std::string::npos, best_end = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = held_.find(stop);
    if (at == std::string::npos) continue;
    const size_t end = at + stop.size();
    if (end < best_end || (end == best_end && at < best_begin)) {
      best_begin = at;
      best_end = end;
    }
  }
  if (best_begin != std::string::npos) {
    stopped_ = *stopped = true;
    std::string out = held_.substr(0, best_begin);
    held_.clear();
    return out;
  }
  const size_t keep = HeldTailLength();
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

size_t StopStrings::HeldTailLength() const {
  size_t longest = 0;
  for (const std::string& stop : stops_) {
    // A complete stop was matched above; only proper prefixes can still grow into one.
    for (size_t len = std::min(held_.size(), stop.size() - 1); len > longest; --len) {
      if (absl::EndsWith(held_, absl::string_view(stop).substr(0, len))) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

std::string StopStrings::Finish() {
  std::string out = stopped_ ? "" : std::move(held_);
  held_.clear();
  stopped_ = false;
  return out;
}

}  // namespace dk::tokenizer
