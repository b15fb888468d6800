#include "optimizations/layout_alignment/layout_alignment.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "elf/elf.h"
#include "registry/registry.h"
#include "optimizations/common/program_util.h"
#include "util/status.h"

namespace dk::opt::layout_alignment {
namespace {

constexpr int64_t kPanelRows = 8;  // packed_panel_v1 (kernels/gemv/gemv.h)

const std::string* Bound(const elf::Launch& l, const std::string& param) {
  for (const auto& b : l.bindings()) {
    if (b.param() == param) return &b.bo();
  }
  return nullptr;
}

std::map<std::string, elf::BufferObject*> BosByName(elf::Program& p) {
  std::map<std::string, elf::BufferObject*> bos;
  for (auto& b : *p.mutable_bos()) bos[b.name()] = &b;
  return bos;
}

// Rows per LM-head partition: the requested size, capped by the target's GEMV
// row limit (0: no split).
int64_t PartitionRows(const registry::TargetConstraints& target, const Options& options) {
  int64_t limit = options.lm_head_partition_rows;
  if (target.gemv().max_rows_per_launch() > 0) {
    limit = limit > 0 ? std::min(limit, target.gemv().max_rows_per_launch())
                      : target.gemv().max_rows_per_launch();
  }
  return limit;
}

// The partitions of an LM-head launch and the BOs they bind.
struct LmHeadSplit {
  std::vector<elf::Launch> launches;
  std::vector<elf::BufferObject> bos;  // per partition: weight rows, logits slice
  int64_t rows_per_part = 0;
};

// LM-head launch `l` (weight `w`, logits `y`) as partitions of at most `limit`
// rows, of equal size rounded up to the 8-row panel (the last takes the rest).
absl::StatusOr<LmHeadSplit> Partition(const elf::Launch& l, const elf::BufferObject& w,
                                      const elf::BufferObject& y, int64_t limit) {
  const int64_t rows = l.params().at("rows");
  const int64_t parts = (rows + limit - 1) / limit;
  LmHeadSplit split;
  split.rows_per_part = ((rows + parts - 1) / parts + kPanelRows - 1) / kPanelRows * kPanelRows;
  const int64_t per = split.rows_per_part;
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
      DK_ASSIGN_OR_RETURN(const int64_t bytes, elf::BoBytes(*b));
      b->set_size_bytes(bytes);
    }
    elf::Launch lp = l;
    for (auto& b : *lp.mutable_bindings()) {
      if (b.param() == "w") b.set_bo(wp.name());
      if (b.param() == "y") b.set_bo(yp.name());
    }
    (*lp.mutable_params())["rows"] = n;
    split.launches.push_back(std::move(lp));
    split.bos.push_back(std::move(wp));
    split.bos.push_back(std::move(yp));
  }
  return split;
}

// Puts `split` in place of launch `li` of step `s`: in its group if it shares one
// (already merged), else each in a group of its own as the baseline has it.
void ReplaceLaunch(elf::Program& p, int s, int li, const std::vector<elf::Launch>& split) {
  const elf::Step original = p.steps(s);
  if (original.group().launches_size() > 1) {
    auto* launches = p.mutable_steps(s)->mutable_group()->mutable_launches();
    google::protobuf::RepeatedPtrField<elf::Launch> rebuilt;
    for (int i = 0; i < launches->size(); ++i) {
      if (i == li) {
        for (const auto& lp : split) *rebuilt.Add() = lp;
      } else {
        *rebuilt.Add() = launches->Get(i);
      }
    }
    launches->Swap(&rebuilt);
    return;
  }
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
    for (const auto& lp : split) {
      auto* g = steps.Add()->mutable_group();
      g->set_name(part_name());
      g->set_entry_symbol(absl::StrReplaceAll(g->name(), {{".", "_"}}));
      g->set_layer(original.group().layer());
      *g->add_launches() = lp;
    }
  }
  p.mutable_steps()->Swap(&steps);
}

// Splits the LM head (the first GEMV producing f32 logits read by the host, on a
// whole weight, with more than `limit` rows) into vocab partitions. Returns the
// note for the lineage record ("" if nothing was split).
absl::StatusOr<std::string> SplitLmHead(elf::Program& p, int64_t limit) {
  if (limit <= 0) return std::string();
  const std::map<std::string, elf::BufferObject*> bos = BosByName(p);
  for (int s = 0; s < p.steps_size(); ++s) {
    if (!p.steps(s).has_group()) continue;
    const auto& launches = p.steps(s).group().launches();
    for (int li = 0; li < launches.size(); ++li) {
      const elf::Launch l = launches.Get(li);
      DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(l));
      if (kernel->id() != "gemv") continue;
      const std::string* w_name = Bound(l, "w");
      const std::string* y_name = Bound(l, "y");
      if (!w_name || !y_name) continue;
      const elf::BufferObject& w = *bos.at(*w_name);
      const elf::BufferObject& y = *bos.at(*y_name);
      if (y.dtype() != elf::F32 || y.host_value().empty() || w.weight_tensor().empty() ||
          w.weight_row_end() != 0 || l.params().at("rows") <= limit) {
        continue;
      }
      DK_ASSIGN_OR_RETURN(LmHeadSplit split, Partition(l, w, y, limit));
      ReplaceLaunch(p, s, li, split.launches);
      for (auto& b : split.bos) *p.add_bos() = std::move(b);
      return absl::StrCat("; LM head split into ", split.launches.size(), " vocab partitions of ",
                          split.rows_per_part, " rows");
    }
  }
  return std::string();
}

// What PackGemvWeights did.
struct Packing {
  int weights = 0;  // weights switched to packed_panel_v1
  int64_t bytes = 0;
  std::set<std::string> symbols;  // the packed variants launches switched to
};

// Every GEMV on a weight switches to the packed variant for its K, and the weight
// to packed_panel_v1 (packed once, at load).
absl::StatusOr<Packing> PackGemvWeights(elf::Program& p) {
  const std::map<std::string, elf::BufferObject*> bos = BosByName(p);
  Packing packing;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(l));
      if (kernel->id() != "gemv") continue;
      const std::string* w_name = Bound(l, "w");
      if (!w_name) continue;
      elf::BufferObject* w = bos.at(*w_name);
      // Weights in GGUF blocks (quantize_weights) are read row-major by their kernel.
      if (w->weight_tensor().empty() || w->block_format() != elf::BLOCK_FORMAT_NONE) continue;
      DK_ASSIGN_OR_RETURN(const registry::KernelVariant* variant,
                          registry::SelectVariant("gemv", registry::kPackedPanelV1, l.params().at("cols")));
      if (l.kernel_symbol() != variant->symbol()) {
        l.set_kernel_symbol(variant->symbol());
        packing.symbols.insert(variant->symbol());
      }
      if (w->layout() != registry::kPackedPanelV1) {
        w->set_layout(std::string(registry::kPackedPanelV1));
        DK_ASSIGN_OR_RETURN(const int64_t bytes, elf::BoBytes(*w));
        w->set_size_bytes(bytes);
        ++packing.weights;
        packing.bytes += bytes;
      }
    }
  }
  return packing;
}

}  // namespace

absl::StatusOr<PassResult> Run(elf::Program& p, const registry::TargetConstraints& target,
                               const Options& options) {
  // A negative size made a negative partition count: LM-head launches of no rows.
  if (options.lm_head_partition_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("layout_alignment option lm_head_partition_rows ",
                                                   options.lm_head_partition_rows,
                                                   " is negative (0: do not split)"));
  }
  if (!target.supports_packed_layout()) {
    return Unchanged(absl::StrCat(target.name(), " has no packed weight layout"));
  }
  DK_ASSIGN_OR_RETURN(const std::string partition_note, SplitLmHead(p, PartitionRows(target, options)));
  RemoveUnusedBos(p);
  DK_ASSIGN_OR_RETURN(const Packing packing, PackGemvWeights(p));
  if (packing.weights == 0 && partition_note.empty()) {
    return Unchanged("nothing to do: every GEMV weight is already packed");
  }
  return Changed(absl::StrCat(packing.weights, " GEMV weights (", HumanBytes(packing.bytes),
                              ") packed once at load into packed_panel_v1; launches use ",
                              absl::StrJoin(packing.symbols, ", "), partition_note));
}

}  // namespace dk::opt::layout_alignment
