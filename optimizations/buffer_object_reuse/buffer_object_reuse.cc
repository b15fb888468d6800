#include "optimizations/buffer_object_reuse/buffer_object_reuse.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "optimizations/common/program_util.h"
#include "util/status.h"

namespace dk::opt::buffer_object_reuse {
namespace {

// Whether a launch writes BO `bo` (its value is produced on the device).
bool ProducedOnDevice(const Dataflow& flow, const std::string& bo) {
  const auto it = flow.bo_uses.find(bo);
  if (it == flow.bo_uses.end()) return false;
  for (const Use& u : it->second) {
    if (u.writes) return true;
  }
  return false;
}

// BO name -> the canonical BO that replaces it: one per weight (tensor, rows,
// layout), the first; one per mirrored value (value, offset, size), the one its
// producing launch writes if a launch produces it, else the first.
std::map<std::string, std::string> CanonicalBos(const elf::Program& p, const Dataflow& flow) {
  std::map<std::string, std::string> canonical;
  std::map<std::tuple<std::string, int64_t, int64_t, std::string>, std::string> weights;
  std::map<std::tuple<std::string, int64_t, int64_t>, std::string> values;
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
      } else if (ProducedOnDevice(flow, b.name()) && !ProducedOnDevice(flow, it->second)) {
        it->second = b.name();  // the producer's BO becomes the canonical one
      }
    }
  }
  for (const auto& b : p.bos()) {
    if (b.weight_tensor().empty() && !b.host_value().empty()) {
      canonical[b.name()] = values.at(std::make_tuple(b.host_value(), b.host_offset(), b.size_bytes()));
    }
  }
  return canonical;
}

// Binds every launch to the canonical BOs; whether a binding changed.
bool BindCanonical(elf::Program& p, const std::map<std::string, std::string>& canonical) {
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
  return changed;
}

// The BOs per category after Categorize, and whether it changed any.
struct Categories {
  int n_static = 0, intermediate = 0, write = 0, output = 0;
  int64_t static_bytes = 0;
  bool changed = false;
};

// Weights become STATIC; a value the host produces WRITE; a value a launch
// produces OUTPUT if a host step reads it, else INTERMEDIATE (no host copy).
Categories Categorize(elf::Program& p, const Dataflow& flow) {
  Categories c;
  for (auto& b : *p.mutable_bos()) {
    elf::BoCategory want = b.category();
    if (!b.weight_tensor().empty()) {
      want = elf::STATIC;
    } else if (!b.host_value().empty()) {
      if (!ProducedOnDevice(flow, b.name())) {
        want = elf::WRITE;
      } else if (HostReads(p, flow, b.host_value())) {
        want = elf::OUTPUT;
      } else {
        want = elf::INTERMEDIATE;
        b.clear_host_value();
        b.clear_host_offset();
        c.changed = true;
      }
    }
    if (want != b.category()) {
      b.set_category(want);
      c.changed = true;
    }
    switch (b.category()) {
      case elf::STATIC: ++c.n_static; c.static_bytes += b.size_bytes(); break;
      case elf::INTERMEDIATE: ++c.intermediate; break;
      case elf::WRITE: ++c.write; break;
      case elf::OUTPUT: ++c.output; break;
      default: break;
    }
  }
  return c;
}

// Host values no BO mirrors and no host step binds are gone from the host.
void RemoveDeadValues(elf::Program& p) {
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
}

}  // namespace

absl::StatusOr<PassResult> Run(elf::Program& p, const registry::TargetConstraints& target) {
  const int64_t bytes_before = BytesWrittenPerToken(p);
  const int bos_before = p.bos_size();
  DK_ASSIGN_OR_RETURN(const Dataflow before, ComputeDataflow(p));
  bool changed = BindCanonical(p, CanonicalBos(p, before));
  const int removed = RemoveUnusedBos(p);
  DK_ASSIGN_OR_RETURN(const Dataflow after, ComputeDataflow(p));
  const Categories c = Categorize(p, after);
  changed |= c.changed;
  RemoveDeadValues(p);

  if (!changed && removed == 0) {
    return Unchanged("nothing to do: weights already STATIC and every value has one BO");
  }
  return Changed(absl::StrCat(c.n_static, " weight BOs STATIC, written once at load (", HumanBytes(c.static_bytes),
                              "); ", bos_before, " -> ", p.bos_size(), " BOs (", c.intermediate, " INTERMEDIATE, ",
                              c.write, " WRITE, ", c.output, " OUTPUT); host writes per token ",
                              HumanBytes(bytes_before), " -> ", HumanBytes(BytesWrittenPerToken(p))));
}

}  // namespace dk::opt::buffer_object_reuse
