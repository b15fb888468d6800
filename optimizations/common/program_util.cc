#include "elf/elf.h"
#include "optimizations/common/program_util.h"

#include "absl/strings/str_cat.h"
#include "util/status.h"

namespace dk::opt {

absl::StatusOr<Dataflow> ComputeDataflow(const elf::Program& p) {
  Dataflow flow;
  std::map<std::string, const elf::BufferObject*> bos;
  for (const auto& b : p.bos()) bos[b.name()] = &b;
  for (int s = 0; s < p.steps_size(); ++s) {
    const elf::Step& step = p.steps(s);
    if (step.has_host()) {
      auto kernel = registry::FindKernel(elf::HostStepName(step.host().kind()));
      if (!kernel.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("host step kind '", elf::HostStepName(step.host().kind()), "' has no registry kernel"));
      }
      std::set<std::string> outs((*kernel)->outputs().begin(), (*kernel)->outputs().end());
      for (const auto& b : step.host().bindings()) {
        flow.value_uses[b.value()].push_back(Use{s, -1, b.param(), outs.count(b.param()) > 0});
      }
      continue;
    }
    for (int l = 0; l < step.group().launches_size(); ++l) {
      const elf::Launch& launch = step.group().launches(l);
      DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(launch));
      std::set<std::string> outs(kernel->outputs().begin(), kernel->outputs().end());
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

}  // namespace dk::opt
