#include "optimizations/quantize_weights/quantize_weights.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "formats/weight_format.h"
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
  if (scheme == "gguf") return elf::BLOCK_FORMAT_NONE;  // per tensor, from `stored`
  const std::vector<std::string>& schemes = Schemes();
  if (std::find(schemes.begin(), schemes.end(), scheme) != schemes.end()) {
    DK_ASSIGN_OR_RETURN(const formats::WeightFormat format, formats::ParseWeightFormat(scheme));
    return elf::BlockFormatOf(format);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown scheme '", scheme, "' (known: ",
                                                 absl::StrJoin(Schemes(), ", "), ")"));
}

// The block format a kernel reads that a file's ggml type name is, or NONE.
elf::BlockFormat StoredFormat(const std::string& type) {
  const std::optional<formats::WeightFormat> format = formats::FromGgufTypeName(type);
  return format ? elf::BlockFormatOf(*format) : elf::BLOCK_FORMAT_NONE;
}

// "tensor=TYPE" entries -> tensor -> TYPE.
absl::StatusOr<std::map<std::string, std::string>> ParseStored(const std::vector<std::string>& stored) {
  std::map<std::string, std::string> out;
  for (const std::string& entry : stored) {
    const size_t eq = entry.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      return absl::InvalidArgumentError(absl::StrCat("stored: '", entry, "' is not tensor=type"));
    }
    out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

// The options, checked and resolved for the scheme.
struct Plan {
  std::string scheme;
  elf::BlockFormat scheme_format = elf::BLOCK_FORMAT_NONE;
  bool as_stored = false;  // scheme gguf: each weight as the file stores it
  std::map<std::string, std::string> stored_types;  // tensor -> ggml type
  std::set<std::string> keep;                       // classes that stay as they are
};

absl::StatusOr<Plan> PlanOf(const Options& options) {
  Plan plan;
  plan.scheme = options.scheme;
  DK_ASSIGN_OR_RETURN(plan.scheme_format, FormatOf(options.scheme));
  plan.as_stored = options.scheme == "gguf";
  DK_ASSIGN_OR_RETURN(plan.stored_types, ParseStored(options.stored));
  if (plan.as_stored && plan.stored_types.empty()) {
    return absl::InvalidArgumentError(
        "scheme gguf needs the file's tensor types (option stored; elf_opt --weights FILE.gguf fills it)");
  }
  if (!plan.as_stored && !plan.stored_types.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("option stored is for scheme gguf, not ", options.scheme));
  }
  plan.keep = options.keep;
  if (plan.keep.count(kKeepDefault)) {
    if (plan.keep.size() != 1) return absl::InvalidArgumentError("keep: 'default' cannot be combined with classes");
    plan.keep = plan.as_stored ? std::set<std::string>{} : std::set<std::string>{"lm_head"};
  }
  return plan;
}

// What this scheme does with one GEMV weight.
enum class Action { kKeep, kStays, kAlready, kUnfit, kQuantize };
struct Decision {
  Action action;
  elf::BlockFormat format = elf::BLOCK_FORMAT_NONE;
  std::string cls;
  std::string stored_type;  // kStays: the file's type
};

absl::StatusOr<Decision> Decide(const Plan& plan, const elf::BufferObject& w, int64_t cols) {
  const std::string cls = ClassOf(w.weight_tensor());
  if (cls.empty() || plan.keep.count(cls)) return Decision{Action::kKeep, w.block_format(), cls, ""};
  elf::BlockFormat format = plan.scheme_format;
  if (plan.as_stored) {
    const auto type = plan.stored_types.find(w.weight_tensor());
    if (type == plan.stored_types.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the weights file has no tensor '", w.weight_tensor(), "' (BO '", w.name(), "')"));
    }
    format = StoredFormat(type->second);
    // An earlier stage's blocks stay: the weight's bf16 form (its packed layout
    // and kernel) is that stage's parent's, not this program's to restore.
    if (format == elf::BLOCK_FORMAT_NONE) return Decision{Action::kStays, format, cls, type->second};
  }
  if (w.block_format() == format && w.blocks_as_stored() == plan.as_stored) {
    return Decision{Action::kAlready, format, cls, ""};
  }
  const std::optional<formats::WeightFormat> blocks = elf::WeightFormatOfBlocks(format);
  if (!blocks || cols % formats::BlockElems(*blocks) != 0) return Decision{Action::kUnfit, format, cls, ""};
  return Decision{Action::kQuantize, format, cls, ""};
}

// What the run changed and left, for the lineage summary.
struct Tally {
  std::map<std::string, int> quantized;  // class (+ " FORMAT" for gguf) -> weight BOs this run quantized
  std::set<std::string> symbols, requantized;
  std::map<int64_t, std::set<std::string>> unfit;  // block elements -> classes (K) not a multiple of them
  std::map<std::string, std::set<std::string>> kept;  // the format they keep ("bf16", "Q8_0") -> classes
  // gguf: (a file type no kernel reads, the block format an earlier stage gave the
  // weight, "" if none) -> classes
  std::map<std::pair<std::string, std::string>, std::set<std::string>> stays;
  int already = 0;
  std::set<std::string> ksplit_kept;  // classes read by K-split GEMVs
};

// A launch whose weights stay as they are: why, per weight.
void TallyUnchanged(const std::vector<elf::BufferObject*>& weights, const std::vector<Decision>& decisions,
                    int64_t cols, Tally& tally) {
  for (size_t i = 0; i < weights.size(); ++i) {
    const Decision& d = decisions[i];
    const elf::BufferObject& w = *weights[i];
    switch (d.action) {
      case Action::kKeep:
        // As they are: bf16, or an earlier stage's blocks.
        tally.kept[w.block_format() == elf::BLOCK_FORMAT_NONE ? "bf16" : elf::BlockFormatName(w.block_format())]
            .insert(d.cls.empty() ? w.weight_tensor() : d.cls);
        break;
      case Action::kStays:
        tally.stays[{d.stored_type, elf::BlockFormatName(w.block_format())}].insert(d.cls);
        break;
      case Action::kAlready:
        ++tally.already;
        break;
      case Action::kUnfit: {
        const std::optional<formats::WeightFormat> blocks = elf::WeightFormatOfBlocks(d.format);
        tally.unfit[blocks ? formats::BlockElems(*blocks) : 0].insert(absl::StrCat(d.cls, " (K=", cols, ")"));
        break;
      }
      case Action::kQuantize:
        break;
    }
  }
}

// Switches launch `l` to the quantized variant of its kernel and its weights to
// the decisions' (one) block format.
absl::Status QuantizeLaunch(elf::Launch& l, const registry::Kernel& kernel,
                            const std::vector<elf::BufferObject*>& weights, const std::vector<Decision>& decisions,
                            int64_t cols, bool as_stored, Tally& tally) {
  const elf::BlockFormat format = decisions[0].format;
  // A plain GEMV takes the variant specialized for its K where one exists.
  DK_ASSIGN_OR_RETURN(const registry::KernelVariant* variant,
                      registry::SelectVariant(kernel.id(), registry::kRowMajor, kernel.id() == "gemv" ? cols : 0,
                                              elf::BlockFormatName(format)));
  l.set_kernel_symbol(variant->symbol());
  tally.symbols.insert(variant->symbol());
  for (size_t i = 0; i < weights.size(); ++i) {
    elf::BufferObject* w = weights[i];
    // Already in another block format (an earlier quantize_weights stage): the
    // runtime quantizes from the bf16 weights at load, so this stage's scheme
    // simply replaces that one.
    if (w->block_format() != elf::BLOCK_FORMAT_NONE) tally.requantized.insert(elf::BlockFormatName(w->block_format()));
    w->set_layout(std::string(registry::kRowMajor));
    w->set_block_format(format);
    w->set_blocks_as_stored(as_stored);
    DK_ASSIGN_OR_RETURN(const int64_t bytes, elf::BoBytes(*w));
    w->set_size_bytes(bytes);
    ++tally.quantized[as_stored ? absl::StrCat(decisions[i].cls, " ", elf::BlockFormatName(format))
                                : decisions[i].cls];
  }
  return absl::OkStatus();
}

// One launch: its GEMV weights (one for gemv, up to three for the fused kernels)
// all get quantized, or all stay; a launch whose weights the scheme would leave
// in different formats is refused (one launch reads one format).
absl::Status ApplyToLaunch(const Plan& plan, elf::Launch& l, const std::map<std::string, elf::BufferObject*>& bos,
                           Tally& tally) {
  DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(l));
  std::vector<elf::BufferObject*> weights;
  for (const auto& b : l.bindings()) {
    if (!registry::IsWeightParam(*kernel, b.param())) continue;
    elf::BufferObject* w = bos.at(b.bo());
    if (!w->weight_tensor().empty()) weights.push_back(w);
  }
  if (weights.empty()) return absl::OkStatus();
  if (kernel->id() == "gemv_ksplit") {  // npu2's K-split GEMV reads bf16 only
    for (const elf::BufferObject* w : weights) tally.ksplit_kept.insert(ClassOf(w->weight_tensor()));
    return absl::OkStatus();
  }
  const int64_t cols = l.params().at("cols");
  std::vector<Decision> decisions;
  std::set<std::pair<bool, elf::BlockFormat>> quantize_formats;  // (quantize?, format)
  for (elf::BufferObject* w : weights) {
    DK_ASSIGN_OR_RETURN(Decision d, Decide(plan, *w, cols));
    const bool quantize = d.action == Action::kQuantize;
    quantize_formats.insert({quantize, quantize ? d.format : elf::BLOCK_FORMAT_NONE});
    decisions.push_back(std::move(d));
  }
  if (quantize_formats.size() > 1) {
    std::vector<std::string> classes;
    for (const Decision& d : decisions) classes.push_back(d.cls);
    return absl::InvalidArgumentError(absl::StrCat(
        "launch ", l.kernel_symbol(), " fuses weights (", absl::StrJoin(classes, ", "), ") that scheme ", plan.scheme,
        " would leave in different formats; one launch reads one format: keep all or none of them, or "
        "quantize before fuse_kernels"));
  }
  if (decisions[0].action != Action::kQuantize) {
    TallyUnchanged(weights, decisions, cols, tally);
    return absl::OkStatus();
  }
  return QuantizeLaunch(l, *kernel, weights, decisions, cols, plan.as_stored, tally);
}

// The summary's notes on what stayed and why.
struct Notes {
  std::string kept, requantized, stays, unfit;
};

Notes NotesOf(const Tally& tally, bool as_stored) {
  Notes notes;
  for (const auto& [format, classes] : tally.kept) {
    absl::StrAppend(&notes.kept, "; kept ", format, ": ", absl::StrJoin(classes, ", "));
  }
  if (!tally.ksplit_kept.empty()) {
    absl::StrAppend(&notes.kept, "; K-split GEMVs (npu2) stay bf16, no block-format variant: ",
                    absl::StrJoin(tally.ksplit_kept, ", "));
  }
  if (!tally.requantized.empty()) {
    notes.requantized = absl::StrCat("; replaces the earlier ", absl::StrJoin(tally.requantized, ", "),
                                     as_stored ? " (the file's own blocks instead)"
                                               : " (quantized from the bf16 weights, not re-quantized)");
  }
  for (const auto& [type_earlier, classes] : tally.stays) {
    const auto& [type, earlier] = type_earlier;
    absl::StrAppend(&notes.stays, "; stored ", type,
                    earlier.empty() ? " (no block kernel reads it), stays bf16: "
                                    : absl::StrCat(", keeps the earlier ", earlier, ": "),
                    absl::StrJoin(classes, ", "));
  }
  for (const auto& [elems, classes] : tally.unfit) {
    absl::StrAppend(&notes.unfit, "; not a multiple of ", elems, " columns: ", absl::StrJoin(classes, ", "));
  }
  return notes;
}

std::string AppliedSummary(const Plan& plan, const Tally& tally, const Notes& notes, int64_t bytes_before,
                           int64_t bytes_after) {
  std::vector<std::string> parts;
  int total = 0;
  for (const std::string& c : WeightClasses()) {  // in class order; gguf keys are "class format"
    for (const auto& [key, n] : tally.quantized) {
      if (key != c && !absl::StartsWith(key, c + " ")) continue;
      parts.push_back(absl::StrCat(key, " x", n));
      total += n;
    }
  }
  const std::string how = plan.as_stored ? "read as the GGUF stores them, its blocks copied at load"
                                         : absl::StrCat("quantized to ", plan.scheme, " at load");
  return absl::StrCat(total, " GEMV weights ", how, " (", absl::StrJoin(parts, ", "), "); launches use ",
                      absl::StrJoin(tally.symbols, ", "), notes.requantized, notes.kept, notes.stays, notes.unfit,
                      "; weight bytes/token ", HumanBytes(bytes_before), " -> ", HumanBytes(bytes_after), " (",
                      bytes_before, " -> ", bytes_after, ")");
}

}  // namespace

absl::StatusOr<PassResult> Run(elf::Program& p, const registry::TargetConstraints&, const Options& options) {
  DK_ASSIGN_OR_RETURN(const Plan plan, PlanOf(options));
  std::map<std::string, elf::BufferObject*> bos;
  for (auto& b : *p.mutable_bos()) bos[b.name()] = &b;
  const int64_t bytes_before = WeightBytesPerToken(p);
  Tally tally;
  for (auto& step : *p.mutable_steps()) {
    if (!step.has_group()) continue;
    for (auto& l : *step.mutable_group()->mutable_launches()) {
      DK_RETURN_IF_ERROR(ApplyToLaunch(plan, l, bos, tally));
    }
  }
  const Notes notes = NotesOf(tally, plan.as_stored);
  if (tally.quantized.empty()) {
    return Unchanged(absl::StrCat("nothing to do: no bf16 GEMV weight left to quantize to ", plan.scheme,
                                  tally.already ? absl::StrCat(" (", tally.already, " already are)") : "", notes.kept,
                                  notes.stays, notes.unfit));
  }
  return Changed(AppliedSummary(plan, tally, notes, bytes_before, WeightBytesPerToken(p)));
}

}  // namespace dk::opt::quantize_weights
