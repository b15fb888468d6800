#include "optimizations/compress_weights/compress_weights.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "optimizations/common/program_util.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::opt::compress_weights {
namespace {

// One launch that reads GEMV weights.
struct Reader {
  elf::Launch* launch;
  const registry::Kernel* kernel;
  std::vector<elf::BufferObject*> weights;
  std::string blocker;  // why it cannot switch ("" if it can)
};

// Every launch that reads GEMV weights, with why it cannot switch to the x12
// layout on its own account.
absl::StatusOr<std::vector<Reader>> ReadersOf(elf::Program& p) {
  std::map<std::string, elf::BufferObject*> bos;
  for (auto& b : *p.mutable_bos()) bos[b.name()] = &b;
  std::vector<Reader> readers;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(l));
      Reader r{&l, kernel, {}, ""};
      const elf::BufferObject* x = nullptr;
      for (const auto& b : l.bindings()) {
        if (b.param() == "x") x = bos.at(b.bo());
        if (!registry::IsWeightParam(*kernel, b.param())) continue;
        elf::BufferObject* w = bos.at(b.bo());
        if (!w->weight_tensor().empty()) r.weights.push_back(w);
      }
      if (r.weights.empty()) continue;
      for (const elf::BufferObject* w : r.weights) {
        if (w->block_format() != elf::BLOCK_FORMAT_NONE) {
          r.blocker = absl::StrCat("weight in ", elf::BlockFormatName(w->block_format()), " blocks");
        } else if (w->layout() != registry::kPackedPanelV1 && w->layout() != registry::kPackedPanelX12V1) {
          r.blocker = absl::StrCat("weight ", w->layout().empty() ? std::string(registry::kRowMajor) : w->layout(),
                                   ", not ", registry::kPackedPanelV1);
        }
      }
      if (r.blocker.empty() && !registry::SelectVariant(kernel->id(), registry::kPackedPanelX12V1, 0).ok()) {
        r.blocker = absl::StrCat(kernel->id(), " has no ", registry::kPackedPanelX12V1, " variant");
      }
      if (r.blocker.empty() && x != nullptr && x->dtype() != elf::BF16) r.blocker = "f32 x";
      readers.push_back(std::move(r));
    }
  }
  return readers;
}

// A weight switches only if every launch reading it does; a launch only if all
// its weights do: blocks each reader of a weight that stays.
void BlockReadersOfStayingWeights(std::vector<Reader>& readers) {
  std::set<const elf::BufferObject*> stay;
  for (bool changed = true; changed;) {
    changed = false;
    for (Reader& r : readers) {
      bool blocked = !r.blocker.empty();
      for (const elf::BufferObject* w : r.weights) blocked = blocked || stay.count(w);
      if (!blocked) continue;
      if (r.blocker.empty()) r.blocker = "fused with a weight that stays";
      for (const elf::BufferObject* w : r.weights) changed = stay.insert(w).second || changed;
    }
  }
}

}  // namespace

absl::StatusOr<PassResult> Run(elf::Program& p, const registry::TargetConstraints& target) {
  if (!target.supports_x12_layout()) {
    return Unchanged(absl::StrCat(target.name(), " has no ", registry::kPackedPanelX12V1, " weight layout"));
  }
  DK_ASSIGN_OR_RETURN(std::vector<Reader> readers, ReadersOf(p));
  BlockReadersOfStayingWeights(readers);
  int weights = 0;
  int64_t bf16_bytes = 0, x12_bytes = 0;
  std::set<std::string> symbols;
  std::map<std::string, std::set<std::string>> kept;  // reason -> kernel ids
  for (Reader& r : readers) {
    if (!r.blocker.empty()) {
      if (r.weights[0]->layout() == registry::kPackedPanelV1) kept[r.blocker].insert(r.kernel->id());
      continue;
    }
    const int64_t k = r.kernel->id() == "gemv" ? r.launch->params().at("cols") : 0;
    DK_ASSIGN_OR_RETURN(const registry::KernelVariant* variant,
                        registry::SelectVariant(r.kernel->id(), registry::kPackedPanelX12V1, k));
    if (r.launch->kernel_symbol() != variant->symbol()) {
      r.launch->set_kernel_symbol(variant->symbol());
      symbols.insert(variant->symbol());
    }
    for (elf::BufferObject* w : r.weights) {
      if (w->layout() == registry::kPackedPanelX12V1) continue;
      bf16_bytes += w->size_bytes();
      w->set_layout(std::string(registry::kPackedPanelX12V1));
      DK_ASSIGN_OR_RETURN(const int64_t bytes, elf::BoBytes(*w));
      w->set_size_bytes(bytes);
      x12_bytes += elf::X12StreamedBytes(*w);
      ++weights;
    }
  }
  std::string kept_note;
  for (const auto& [why, kernels] : kept) {
    absl::StrAppend(&kept_note, "; kept ", registry::kPackedPanelV1, " (", why, "): ", absl::StrJoin(kernels, ", "));
  }
  if (weights == 0) {
    return Unchanged(
        absl::StrCat("nothing to do: no bf16 ", registry::kPackedPanelV1, " GEMV weight to compress", kept_note));
  }
  return Changed(absl::StrCat(weights, " GEMV weights (", HumanBytes(bf16_bytes),
                              " bf16) stored in 12 bits each at load (", registry::kPackedPanelX12V1,
                              ", lossless): ", HumanBytes(x12_bytes),
                              " streamed per token where every block compresses (a block needing more than 8 exponent "
                              "pairs stays bf16, decided at load); launches use ",
                              absl::StrJoin(symbols, ", "), kept_note));
}

}  // namespace dk::opt::compress_weights
