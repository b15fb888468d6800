#include "elf/stats.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "elf/elf.h"
#include "registry/registry.h"

namespace dk::elf {

absl::StatusOr<const registry::Kernel*> KernelOf(const Launch& launch) {
  const registry::Kernel* kernel = nullptr;
  auto v = registry::FindSymbol(launch.kernel_symbol(), &kernel);
  if (!v.ok()) return v.status();
  return kernel;
}

int64_t LaunchParam(const Launch& launch, const std::string& name) {
  const auto it = launch.params().find(name);
  return it == launch.params().end() ? 0 : it->second;
}

std::string MergeName(const std::string& group_name) {
  const size_t dot = group_name.rfind(".part");
  if (dot == std::string::npos || dot + 5 >= group_name.size()) return group_name;
  for (size_t i = dot + 5; i < group_name.size(); ++i) {
    if (group_name[i] < '0' || group_name[i] > '9') return group_name;
  }
  return group_name.substr(0, dot);
}

int64_t BytesWrittenPerToken(const Program& p) {
  std::map<std::string, const BufferObject*> bos;
  for (const auto& b : p.bos()) bos[b.name()] = &b;
  int64_t bytes = 0;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    std::set<std::string> written;
    for (const auto& l : s.group().launches()) {
      auto kernel = KernelOf(l);
      std::set<std::string> outs;
      if (kernel.ok()) outs.insert((*kernel)->outputs().begin(), (*kernel)->outputs().end());
      for (const auto& b : l.bindings()) {
        if (outs.count(b.param())) continue;
        auto it = bos.find(b.bo());
        if (it != bos.end() && it->second->category() == WRITE && written.insert(b.bo()).second) {
          bytes += it->second->size_bytes();
        }
      }
    }
  }
  return bytes;
}

int64_t WeightBytesPerToken(const Program& p) {
  std::map<std::string, int64_t> weights;  // weight BO -> bytes
  for (const auto& b : p.bos()) {
    if (!b.weight_tensor().empty()) weights[b.name()] = X12StreamedBytes(b);
  }
  std::set<std::string> read;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      for (const auto& b : l.bindings()) {
        if (weights.count(b.bo())) read.insert(b.bo());
      }
    }
  }
  int64_t bytes = 0;
  for (const std::string& name : read) bytes += weights.at(name);
  return bytes;
}

int RunsPerToken(const Program& p) {
  int runs = 0;
  for (const auto& s : p.steps()) runs += s.has_group();
  return runs;
}

std::map<int, int> RunsPerLayer(const Program& p) {
  std::map<int, int> runs;
  for (int i = 0; i < p.model().n_layers(); ++i) runs[i] = 0;
  runs[-1] = 0;
  for (const auto& s : p.steps()) {
    if (s.has_group()) ++runs[s.group().layer() < 0 ? -1 : s.group().layer()];
  }
  return runs;
}

std::string DescribeRuns(const std::map<int, int>& runs, const std::string& unit) {
  std::set<int> per_layer;
  std::string each;
  int total = 0;
  for (const auto& [layer, n] : runs) {
    total += n;
    if (layer < 0) continue;
    per_layer.insert(n);
    absl::StrAppend(&each, each.empty() ? "" : ", ", "L", layer, " ", n);
  }
  const int layers = static_cast<int>(runs.size()) - static_cast<int>(runs.count(-1));
  const std::string layer_part =
      per_layer.size() == 1 ? absl::StrCat(*per_layer.begin(), " per layer (",
                                           layers == 1 ? "1 layer" : absl::StrCat("all ", layers, " layers"), ")")
                            : absl::StrCat("per layer ", each);
  const auto model_wide = runs.find(-1);
  return absl::StrCat(layer_part, " + ", model_wide == runs.end() ? 0 : model_wide->second,
                      " model-wide = ", total, " per ", unit);
}

std::string HumanBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.2f GiB", bytes / double(int64_t{1} << 30));
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / double(1 << 20));
  if (bytes >= (int64_t{1} << 10)) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  return absl::StrCat(bytes, " B");
}

}  // namespace dk::elf
