#include "optimizations/layout_alignment/layout_alignment.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "elf/elf.h"
#include "registry/registry.h"
#include "optimizations/common/program_util.h"

namespace dk::opt::layout_alignment {
namespace {

constexpr int64_t kPanelRows = 8;  // packed_panel_v1 (kernels/gemv/gemv.h)

const std::string* Bound(const elf::Launch& l, const std::string& param) {
  for (const auto& b : l.bindings()) {
    if (b.param() == param) return &b.bo();
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<bool> Run(elf::Program& p, const registry::TargetConstraints& target,
                         const Options& options) {
  if (!target.supports_packed_layout()) {
    Record(p, kName, target.name(), false, absl::StrCat(target.name(), " has no packed weight layout"));
    return false;
  }
  std::map<std::string, elf::BufferObject*> bos;
  for (auto& b : *p.mutable_bos()) bos[b.name()] = &b;

  // 1. The LM head (the GEMV producing f32 logits read by the host) into partitions.
  int64_t limit = options.lm_head_partition_rows;
  if (target.gemv().max_rows_per_launch() > 0) {
    limit = limit > 0 ? std::min(limit, target.gemv().max_rows_per_launch())
                      : target.gemv().max_rows_per_launch();
  }
  std::string partition_note;
  std::vector<elf::BufferObject> new_bos;
  for (int s = 0; s < p.steps_size() && limit > 0; ++s) {
    if (!p.steps(s).has_group()) continue;
    auto* launches = p.mutable_steps(s)->mutable_group()->mutable_launches();
    for (int li = 0; li < launches->size(); ++li) {
      const elf::Launch l = launches->Get(li);
      auto kernel = KernelOf(l);
      if (!kernel.ok()) return kernel.status();
      if ((*kernel)->id() != "gemv") continue;
      const std::string* w_name = Bound(l, "w");
      const std::string* y_name = Bound(l, "y");
      if (!w_name || !y_name) continue;
      const elf::BufferObject& w = *bos.at(*w_name);
      const elf::BufferObject& y = *bos.at(*y_name);
      const int64_t rows = l.params().at("rows"), cols = l.params().at("cols");
      if (y.dtype() != elf::F32 || y.host_value().empty() || w.weight_tensor().empty() ||
          w.weight_row_end() != 0 || rows <= limit) {
        continue;
      }
      const int64_t parts = (rows + limit - 1) / limit;
      const int64_t per = ((rows + parts - 1) / parts + kPanelRows - 1) / kPanelRows * kPanelRows;
      std::vector<elf::Launch> split;
      for (int64_t k = 0, begin = 0; begin < rows; ++k, begin += per) {
        const int64_t n = std::min(per, rows - begin);
        elf::BufferObject wp = w, yp = y;
        wp.set_name(absl::StrCat(w.name(), ".part", k));
        wp.set_weight_row_begin(begin);
        wp.set_weight_row_end(begin + n);
        wp.set_shape(0, n);
        yp.set_name(absl::StrCat(y.name(), ".part", k));
        yp.set_host_offset(y.host_offset() + begin);
        yp.set_shape(0, n);
        for (auto* b : {&wp, &yp}) {
          auto bytes = elf::BoBytes(*b);
          if (!bytes.ok()) return bytes.status();
          b->set_size_bytes(*bytes);
        }
        elf::Launch lp = l;
        for (auto& b : *lp.mutable_bindings()) {
          if (b.param() == "w") b.set_bo(wp.name());
          if (b.param() == "y") b.set_bo(yp.name());
        }
        (*lp.mutable_params())["rows"] = n;
        split.push_back(std::move(lp));
        new_bos.push_back(std::move(wp));
        new_bos.push_back(std::move(yp));
      }
      partition_note = absl::StrCat("; LM head split into ", split.size(), " vocab partitions of ", per,
                                    " rows");
      // The partitions replace the launch: in its group if it shares one (already
      // merged), else each in a group of its own as the baseline has it.
      elf::Step original = p.steps(s);
      if (original.group().launches_size() > 1) {
        google::protobuf::RepeatedPtrField<elf::Launch> rebuilt;
        for (int i = 0; i < launches->size(); ++i) {
          if (i == li) {
            for (auto& lp : split) *rebuilt.Add() = lp;
          } else {
            *rebuilt.Add() = launches->Get(i);
          }
        }
        launches->Swap(&rebuilt);
      } else {
        // Partition groups "<name>.part<k>", numbered past names already taken (a
        // merge on npu2 may have named the final norm's group "lm_head.part0").
        std::set<std::string> taken;
        for (const auto& step : p.steps()) {
          if (step.has_group()) taken.insert(step.group().name());
        }
        int next_part = 0;
        auto part_name = [&] {
          std::string name;
          do {
            name = absl::StrCat(original.group().name(), ".part", next_part++);
          } while (taken.count(name));
          return name;
        };
        google::protobuf::RepeatedPtrField<elf::Step> steps;
        for (int i = 0; i < p.steps_size(); ++i) {
          if (i != s) {
            *steps.Add() = p.steps(i);
            continue;
          }
          for (size_t k = 0; k < split.size(); ++k) {
            auto* g = steps.Add()->mutable_group();
            g->set_name(part_name());
            g->set_entry_symbol(absl::StrReplaceAll(g->name(), {{".", "_"}}));
            g->set_layer(original.group().layer());
            *g->add_launches() = split[k];
          }
        }
        p.mutable_steps()->Swap(&steps);
      }
      break;
    }
    if (!partition_note.empty()) break;
  }
  for (auto& b : new_bos) *p.add_bos() = std::move(b);
  RemoveUnusedBos(p);
  bos.clear();
  for (auto& b : *p.mutable_bos()) bos[b.name()] = &b;

  // 2. Every GEMV on a row-major weight switches to the packed variant.
  int packed = 0;
  int64_t packed_bytes = 0;
  std::set<std::string> symbols;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      auto kernel = KernelOf(l);
      if (!kernel.ok()) return kernel.status();
      if ((*kernel)->id() != "gemv") continue;
      const std::string* w_name = Bound(l, "w");
      if (!w_name) continue;
      elf::BufferObject* w = bos.at(*w_name);
      if (w->weight_tensor().empty()) continue;
      const int64_t cols = l.params().at("cols");
      auto variant = registry::SelectVariant("gemv", registry::kPackedPanelV1, cols);
      if (!variant.ok()) return variant.status();
      if (l.kernel_symbol() != (*variant)->symbol()) {
        l.set_kernel_symbol((*variant)->symbol());
        symbols.insert((*variant)->symbol());
      }
      if (w->layout() != registry::kPackedPanelV1) {
        w->set_layout(std::string(registry::kPackedPanelV1));
        auto bytes = elf::BoBytes(*w);
        if (!bytes.ok()) return bytes.status();
        w->set_size_bytes(*bytes);
        ++packed;
        packed_bytes += *bytes;
      }
    }
  }
  if (packed == 0 && partition_note.empty()) {
    Record(p, kName, target.name(), false, "nothing to do: every GEMV weight is already packed");
    return false;
  }
  std::string list;
  for (const auto& sym : symbols) absl::StrAppend(&list, list.empty() ? "" : ", ", sym);
  Record(p, kName, target.name(), true,
         absl::StrCat(packed, " GEMV weights (", HumanBytes(packed_bytes),
                      ") packed once at load into packed_panel_v1; launches use ", list, partition_note));
  return true;
}

}  // namespace dk::opt::layout_alignment
