#include "optimizations/buffer_object_reuse/buffer_object_reuse.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "optimizations/common/program_util.h"

namespace dk::opt::buffer_object_reuse {

absl::StatusOr<bool> Run(elf::Program& p, const registry::TargetConstraints& target) {
  auto flow = ComputeDataflow(p);
  if (!flow.ok()) return flow.status();
  const int64_t bytes_before = BytesWrittenPerToken(p);
  const int bos_before = p.bos_size();

  // Canonical BO per weight (tensor, rows, layout) and per mirrored value (value,
  // offset, size). A value's canonical BO is the one its producing launch writes.
  std::map<std::string, std::string> canonical;  // BO name -> canonical BO name
  std::map<std::tuple<std::string, int64_t, int64_t, std::string>, std::string> weights;
  std::map<std::tuple<std::string, int64_t, int64_t>, std::string> values;
  auto produced_on_device = [&](const std::string& bo) {
    for (const Use& u : flow->bo_uses[bo]) {
      if (u.writes) return true;
    }
    return false;
  };
  for (const auto& b : p.bos()) {
    if (!b.weight_tensor().empty()) {
      auto key = std::make_tuple(b.weight_tensor(), b.weight_row_begin(), b.weight_row_end(), b.layout());
      auto [it, fresh] = weights.emplace(key, b.name());
      canonical[b.name()] = it->second;
    } else if (!b.host_value().empty()) {
      auto key = std::make_tuple(b.host_value(), b.host_offset(), b.size_bytes());
      auto it = values.find(key);
      if (it == values.end()) {
        values.emplace(key, b.name());
      } else if (produced_on_device(b.name()) && !produced_on_device(it->second)) {
        it->second = b.name();  // the producer's BO becomes the canonical one
      }
    }
  }
  for (const auto& b : p.bos()) {
    if (b.weight_tensor().empty() && !b.host_value().empty()) {
      canonical[b.name()] = values.at(std::make_tuple(b.host_value(), b.host_offset(), b.size_bytes()));
    }
  }

  bool changed = false;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      for (auto& b : *l.mutable_bindings()) {
        auto it = canonical.find(b.bo());
        if (it != canonical.end() && it->second != b.bo()) {
          b.set_bo(it->second);
          changed = true;
        }
      }
    }
  }
  const int removed = RemoveUnusedBos(p);
  flow = ComputeDataflow(p);
  if (!flow.ok()) return flow.status();

  int n_static = 0, n_inter = 0, n_write = 0, n_output = 0;
  int64_t static_bytes = 0;
  for (auto& b : *p.mutable_bos()) {
    elf::BoCategory want = b.category();
    if (!b.weight_tensor().empty()) {
      want = elf::STATIC;
    } else if (!b.host_value().empty()) {
      if (!produced_on_device(b.name())) {
        want = elf::WRITE;
      } else if (HostReads(p, *flow, b.host_value())) {
        want = elf::OUTPUT;
      } else {
        want = elf::INTERMEDIATE;
        b.clear_host_value();
        b.clear_host_offset();
        changed = true;
      }
    }
    if (want != b.category()) {
      b.set_category(want);
      changed = true;
    }
    switch (b.category()) {
      case elf::STATIC: ++n_static; static_bytes += b.size_bytes(); break;
      case elf::INTERMEDIATE: ++n_inter; break;
      case elf::WRITE: ++n_write; break;
      case elf::OUTPUT: ++n_output; break;
      default: break;
    }
  }
  // Host values no BO mirrors and no host step binds are gone from the host.
  std::set<std::string> live;
  for (const auto& b : p.bos()) {
    if (!b.host_value().empty()) live.insert(b.host_value());
  }
  for (const auto& s : p.steps()) {
    if (!s.has_host()) continue;
    for (const auto& b : s.host().bindings()) live.insert(b.value());
  }
  google::protobuf::RepeatedPtrField<elf::HostValue> kept;
  for (auto& v : *p.mutable_values()) {
    if (live.count(v.name())) *kept.Add() = std::move(v);
  }
  p.mutable_values()->Swap(&kept);

  const int64_t bytes_after = BytesWrittenPerToken(p);
  if (!changed && removed == 0) {
    Record(p, kName, target.name(), false, "nothing to do: weights already STATIC and every value has one BO");
    return false;
  }
  Record(p, kName, target.name(), true,
         absl::StrCat(n_static, " weight BOs STATIC, written once at load (", HumanBytes(static_bytes),
                      "); ", bos_before, " -> ", p.bos_size(), " BOs (", n_inter, " INTERMEDIATE, ",
                      n_write, " WRITE, ", n_output, " OUTPUT); host writes per token ",
                      HumanBytes(bytes_before), " -> ", HumanBytes(bytes_after)));
  return true;
}

}  // namespace dk::opt::buffer_object_reuse
