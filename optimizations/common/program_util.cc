#include "optimizations/common/program_util.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dk::opt {

absl::StatusOr<const registry::Kernel*> KernelOf(const elf::Launch& launch) {
  const registry::Kernel* kernel = nullptr;
  auto v = registry::FindSymbol(launch.kernel_symbol(), &kernel);
  if (!v.ok()) return v.status();
  return kernel;
}

absl::StatusOr<Dataflow> ComputeDataflow(const elf::Program& p) {
  Dataflow flow;
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p.bos()) bos[b.name()] = &b;
  for (int s = 0; s < p.steps_size(); ++s) {
    const elf::Step& step = p.steps(s);
    if (step.has_host()) {
      auto kernel = registry::FindKernel(step.host().kind());
      if (!kernel.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown host step kind '", step.host().kind(), "'"));
      }
      std::set<std::string> outs((*kernel)->outputs().begin(), (*kernel)->outputs().end());
      for (const auto& b : step.host().bindings()) {
        flow.value_uses[b.value()].push_back(Use{s, -1, b.param(), outs.count(b.param()) > 0});
      }
      continue;
    }
    for (int l = 0; l < step.group().launches_size(); ++l) {
      const elf::Launch& launch = step.group().launches(l);
      auto kernel = KernelOf(launch);
      if (!kernel.ok()) return kernel.status();
      std::set<std::string> outs((*kernel)->outputs().begin(), (*kernel)->outputs().end());
      for (const auto& b : launch.bindings()) {
        const Use use{s, l, b.param(), outs.count(b.param()) > 0};
        flow.bo_uses[b.bo()].push_back(use);
        auto it = bos.find(b.bo());
        if (it != bos.end() && !it->second->host_value().empty()) {
          flow.value_uses[it->second->host_value()].push_back(use);
        }
      }
    }
  }
  return flow;
}

bool HostReads(const elf::Program&, const Dataflow& flow, const std::string& value) {
  auto it = flow.value_uses.find(value);
  if (it == flow.value_uses.end()) return false;
  for (const Use& u : it->second) {
    if (u.launch < 0 && !u.writes) return true;
  }
  return false;
}

void Record(elf::Program& p, const std::string& pass, const std::string& target, bool applied,
            const std::string& reason) {
  auto* l = p.add_lineage();
  l->set_pass(pass);
  l->set_target(target);
  l->set_applied(applied);
  l->set_reason(reason);
}

int RemoveUnusedBos(elf::Program& p) {
  std::set<std::string> used;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      for (const auto& b : l.bindings()) used.insert(b.bo());
    }
  }
  google::protobuf::RepeatedPtrField<elf::BufferObject> kept;
  int removed = 0;
  for (auto& b : *p.mutable_bos()) {
    if (used.count(b.name())) {
      *kept.Add() = std::move(b);
    } else {
      ++removed;
    }
  }
  p.mutable_bos()->Swap(&kept);
  return removed;
}

int64_t BytesWrittenPerToken(const elf::Program& p) {
  std::map<std::string, const elf::BufferObject*> bos;
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
        if (it != bos.end() && it->second->category() == elf::WRITE && written.insert(b.bo()).second) {
          bytes += it->second->size_bytes();
        }
      }
    }
  }
  return bytes;
}

int64_t WeightBytesPerToken(const elf::Program& p) {
  std::map<std::string, int64_t> weights;  // weight BO -> bytes
  for (const auto& b : p.bos()) {
    if (!b.weight_tensor().empty()) weights[b.name()] = b.size_bytes();
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

int RunsPerToken(const elf::Program& p) {
  int runs = 0;
  for (const auto& s : p.steps()) runs += s.has_group();
  return runs;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.2f GiB", bytes / double(int64_t{1} << 30));
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / double(1 << 20));
  if (bytes >= (int64_t{1} << 10)) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  return absl::StrCat(bytes, " B");
}

}  // namespace dk::opt
