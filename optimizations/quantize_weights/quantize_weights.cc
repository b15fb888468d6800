#include "optimizations/quantize_weights/quantize_weights.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "optimizations/common/program_util.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::opt::quantize_weights {
namespace {

// The class of a GEMV weight tensor (WeightClasses()), "" if it is none of them.
std::string ClassOf(const std::string& tensor) {
  if (tensor == "lm_head.weight" || tensor == "model.embed_tokens.weight") return "lm_head";
  if (!absl::EndsWith(tensor, ".weight")) return "";
  const std::string stem = tensor.substr(0, tensor.size() - 7);
  const size_t dot = stem.rfind('.');
  const std::string last = dot == std::string::npos ? stem : stem.substr(dot + 1);
  for (const std::string& c : WeightClasses()) {
    if (c == last) return c;
  }
  return "";
}

absl::StatusOr<elf::BlockFormat> FormatOf(const std::string& scheme) {
  if (scheme == "q8_0") return elf::Q8_0;
  if (scheme == "q4_0") return elf::Q4_0;
  return absl::InvalidArgumentError(absl::StrCat("unknown scheme '", scheme, "' (known: ",
                                                 absl::StrJoin(Schemes(), ", "), ")"));
}

}  // namespace

absl::StatusOr<bool> Run(elf::Program& p, const registry::TargetConstraints& target,
                         const Options& options) {
  DK_ASSIGN_OR_RETURN(const elf::BlockFormat format, FormatOf(options.scheme));
  std::map<std::string, elf::BufferObject*> bos;
  for (auto& b : *p.mutable_bos()) bos[b.name()] = &b;
  const int64_t bytes_before = WeightBytesPerToken(p);
  std::map<std::string, int> quantized;  // class -> weight BOs this run quantized
  std::set<std::string> symbols, kept, unfit, requantized;
  int already = 0;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(l));
      if (kernel->id() != "gemv") continue;
      elf::BufferObject* w = nullptr;
      for (const auto& b : l.bindings()) {
        if (b.param() == "w") w = bos.at(b.bo());
      }
      if (w == nullptr || w->weight_tensor().empty()) continue;
      const std::string cls = ClassOf(w->weight_tensor());
      if (cls.empty() || options.keep.count(cls)) {
        kept.insert(cls.empty() ? w->weight_tensor() : cls);
        continue;
      }
      if (w->block_format() == format) {
        ++already;
        continue;
      }
      // Already in another block format (an earlier quantize_weights stage): the
      // runtime quantizes from the bf16 weights at load, so this stage's scheme
      // simply replaces that one.
      if (w->block_format() != elf::BLOCK_FORMAT_NONE) {
        requantized.insert(elf::BlockFormatName(w->block_format()));
      }
      const int64_t cols = l.params().at("cols");
      if (cols % elf::kBlockElems != 0) {
        unfit.insert(absl::StrCat(cls, " (K=", cols, ")"));
        continue;
      }
      DK_ASSIGN_OR_RETURN(const registry::KernelVariant* variant,
                          registry::SelectVariant("gemv", registry::kRowMajor, cols, options.scheme));
      l.set_kernel_symbol(variant->symbol());
      symbols.insert(variant->symbol());
      w->set_layout(std::string(registry::kRowMajor));
      w->set_block_format(format);
      DK_ASSIGN_OR_RETURN(const int64_t bytes, elf::BoBytes(*w));
      w->set_size_bytes(bytes);
      ++quantized[cls];
    }
  }
  const std::string kept_note =
      kept.empty() ? "" : absl::StrCat("; kept bf16: ", absl::StrJoin(kept, ", "));
  const std::string requantized_note =
      requantized.empty() ? ""
                          : absl::StrCat("; replaces the earlier ", absl::StrJoin(requantized, ", "),
                                         " (quantized from the bf16 weights, not re-quantized)");
  const std::string unfit_note =
      unfit.empty() ? "" : absl::StrCat("; not a multiple of 32 columns: ", absl::StrJoin(unfit, ", "));
  if (quantized.empty()) {
    Record(p, kName, target.name(), false,
           absl::StrCat("nothing to do: no bf16 GEMV weight left to quantize to ", options.scheme,
                        already ? absl::StrCat(" (", already, " already are)") : "", kept_note, unfit_note));
    return false;
  }
  std::vector<std::string> parts;
  int total = 0;
  for (const std::string& c : WeightClasses()) {
    auto it = quantized.find(c);
    if (it == quantized.end()) continue;
    parts.push_back(absl::StrCat(c, " x", it->second));
    total += it->second;
  }
  const int64_t bytes_after = WeightBytesPerToken(p);
  Record(p, kName, target.name(), true,
         absl::StrCat(total, " GEMV weights quantized to ", options.scheme, " at load (",
                      absl::StrJoin(parts, ", "), "); launches use ", absl::StrJoin(symbols, ", "),
                      requantized_note, kept_note, unfit_note, "; weight bytes/token ", HumanBytes(bytes_before), " -> ",
                      HumanBytes(bytes_after), " (", bytes_before, " -> ", bytes_after, ")"));
  return true;
}

}  // namespace dk::opt::quantize_weights
