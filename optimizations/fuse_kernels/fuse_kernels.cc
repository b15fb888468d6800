#include "optimizations/fuse_kernels/fuse_kernels.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "optimizations/common/program_util.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::opt::fuse_kernels {

std::vector<std::string> Fusions() { return {"rms_gemv", "rms_gemv_silu_mul", "gemv_add"}; }

namespace {

const std::string* Bound(const elf::Launch& l, const std::string& param) {
  for (const auto& b : l.bindings()) {
    if (b.param() == param) return &b.bo();
  }
  return nullptr;
}

void Bind(elf::Launch& l, const std::string& param, const std::string& bo) {
  auto* b = l.add_bindings();
  b->set_param(param);
  b->set_bo(bo);
}

// The fusion rewriting of one program: what it knows of every BO, and its notes.
class Fuser {
 public:
  Fuser(elf::Program& p, const Dataflow& flow) : p_(p), flow_(flow) {
    for (const auto& b : p.bos()) bos_[b.name()] = &b;
  }

  // The group of step `s`, its launches rewritten; returns the number of fusions.
  absl::StatusOr<int> FuseGroup(int s, const std::set<std::string>& fusions);

  std::map<std::string, int> made;  // fused kernel id -> launches made
  std::set<std::string> notes;      // why something was left unfused

 private:
  // A launch of the group being fused (nullopt once fused away).
  struct Slot {
    std::optional<elf::Launch> launch;
    std::string kernel;  // its kernel id
  };

  // True if BO `bo` lives inside step `s` only: INTERMEDIATE, mirrors no host value,
  // and has exactly `uses` uses, all in that step.
  bool Private(const std::string& bo, int s, size_t uses) const {
    const auto b = bos_.find(bo);
    if (b == bos_.end() || b->second->category() != elf::INTERMEDIATE || !b->second->host_value().empty()) {
      return false;
    }
    const auto u = flow_.bo_uses.find(bo);
    if (u == flow_.bo_uses.end() || u->second.size() != uses) return false;
    for (const Use& use : u->second) {
      if (use.step != s) return false;
    }
    return true;
  }
  // The launch of the group that writes `bo` (-1 if none).
  int Writer(const std::vector<Slot>& slots, const std::string& bo) const {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i].launch) continue;
      for (const auto& b : slots[i].launch->bindings()) {
        if (b.bo() == bo && IsOutput(slots[i].kernel, b.param())) return static_cast<int>(i);
      }
    }
    return -1;
  }
  // The launches of the group that read `bo`.
  std::vector<int> Readers(const std::vector<Slot>& slots, const std::string& bo) const {
    std::vector<int> out;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!slots[i].launch) continue;
      for (const auto& b : slots[i].launch->bindings()) {
        if (b.bo() == bo && !IsOutput(slots[i].kernel, b.param())) {
          out.push_back(static_cast<int>(i));
          break;
        }
      }
    }
    return out;
  }
  static bool IsOutput(const std::string& kernel_id, const std::string& param) {
    auto k = registry::FindKernel(kernel_id);
    if (!k.ok()) return false;
    for (const auto& o : (*k)->outputs()) {
      if (o == param) return true;
    }
    return false;
  }
  // The variant of fused kernel `id` that reads the weights of these plain GEMV
  // launches: they must share one layout and block format, and bf16 x.
  absl::StatusOr<std::string> FusedSymbol(const std::string& id, const std::vector<const elf::Launch*>& gemvs,
                                          const std::string& where) const {
    std::set<std::pair<std::string, std::string>> formats;
    for (const elf::Launch* g : gemvs) {
      DK_ASSIGN_OR_RETURN(const registry::KernelVariant* v, registry::FindSymbol(g->kernel_symbol()));
      formats.insert({v->layout(), v->block_format()});
      const std::string* x = Bound(*g, "x");
      if (x == nullptr || bos_.at(*x)->dtype() != elf::BF16) {
        return absl::FailedPreconditionError(absl::StrCat(where, ": a GEMV's x is not bf16"));
      }
    }
    if (formats.size() != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": its GEMVs' weights differ in layout or block format"));
    }
    const auto& [layout, block_format] = *formats.begin();
    DK_ASSIGN_OR_RETURN(const registry::KernelVariant* v, registry::SelectVariant(id, layout, 0, block_format));
    return v->symbol();
  }
  int64_t Param(const elf::Launch& l, const char* name) const { return l.params().at(name); }

  bool FuseAdd(std::vector<Slot>& slots, int s, int j);
  bool FuseNorm(std::vector<Slot>& slots, int s, int n, const std::set<std::string>& fusions);
  bool FuseNormSiluMul(std::vector<Slot>& slots, int s, const std::vector<const elf::Launch*>& gemvs,
                       const std::string& where, const std::set<std::string>& fusions, elf::Launch& fused,
                       std::string& id, std::vector<int>& gone);
  bool FuseNormGemvs(const std::vector<const elf::Launch*>& gemvs, const std::string& where,
                     const std::set<std::string>& fusions, elf::Launch& fused, std::string& id);

  elf::Program& p_;
  const Dataflow& flow_;
  std::map<std::string, const elf::BufferObject*> bos_;
  std::string group_;
};

// Add launch `j`: one input written by a plain GEMV of the group that nothing else
// reads -> gemv_add at j.
bool Fuser::FuseAdd(std::vector<Slot>& slots, int s, int j) {
  const elf::Launch& add = *slots[j].launch;
  for (const char* mine : {"b", "a"}) {
    const std::string* in = Bound(add, mine);
    const std::string* other = Bound(add, mine[0] == 'a' ? "b" : "a");
    if (in == nullptr || other == nullptr || !Private(*in, s, 2)) continue;
    const int g = Writer(slots, *in);
    if (g >= 0 && g < j && slots[g].kernel == "gemv_ksplit") {
      notes.insert(absl::StrCat(group_, " ", add.kernel_symbol(), ": its GEMV is K-split (npu2), which has no fused variant"));
    }
    if (g < 0 || g > j || slots[g].kernel != "gemv") continue;
    const elf::Launch& gemv = *slots[g].launch;
    if (bos_.at(*in)->dtype() != elf::BF16) continue;
    auto symbol = FusedSymbol("gemv_add", {&gemv}, absl::StrCat(group_, " ", add.kernel_symbol()));
    if (!symbol.ok()) {
      notes.insert(std::string(symbol.status().message()));
      continue;
    }
    elf::Launch fused;
    fused.set_kernel_symbol(*symbol);
    Bind(fused, "x", *Bound(gemv, "x"));
    Bind(fused, "w", *Bound(gemv, "w"));
    Bind(fused, "residual", *other);
    Bind(fused, "y", *Bound(add, "y"));
    (*fused.mutable_params())["rows"] = Param(gemv, "rows");
    (*fused.mutable_params())["cols"] = Param(gemv, "cols");
    slots[g].launch.reset();
    slots[j].launch = std::move(fused);
    slots[j].kernel = "gemv_add";
    ++made["gemv_add"];
    return true;
  }
  return false;
}

// FuseNorm's norm feeding two GEMVs: gate and up, both read only by one SiLU*mul
// (gate -> "gate", up -> "up") -> rms_gemv_silu_mul. Completes `fused` (x and norm
// bound) and `gone`, or says why not.
bool Fuser::FuseNormSiluMul(std::vector<Slot>& slots, int s, const std::vector<const elf::Launch*>& gemvs,
                            const std::string& where, const std::set<std::string>& fusions, elf::Launch& fused,
                            std::string& id, std::vector<int>& gone) {
  const std::string *y0 = Bound(*gemvs[0], "y"), *y1 = Bound(*gemvs[1], "y");
  const std::vector<int> r0 = Readers(slots, *y0), r1 = Readers(slots, *y1);
  if (r0.size() != 1 || r1.size() != 1 || r0 != r1 || slots[r0[0]].kernel != "silu_mul" ||
      !Private(*y0, s, 2) || !Private(*y1, s, 2)) {
    notes.insert(absl::StrCat(where, ": feeds 2 GEMVs that are not the gate and up of one SiLU*mul"));
    return false;
  }
  if (!fusions.count("rms_gemv_silu_mul")) return false;
  const elf::Launch& silu = *slots[r0[0]].launch;
  const bool swapped = *Bound(silu, "gate") == *y1;
  const elf::Launch& gate = *gemvs[swapped ? 1 : 0];
  const elf::Launch& up = *gemvs[swapped ? 0 : 1];
  if (Param(gate, "rows") != Param(up, "rows") || Param(gate, "cols") != Param(up, "cols")) {
    notes.insert(absl::StrCat(where, ": gate and up differ in shape"));
    return false;
  }
  id = "rms_gemv_silu_mul";
  Bind(fused, "w_gate", *Bound(gate, "w"));
  Bind(fused, "w_up", *Bound(up, "w"));
  Bind(fused, "y", *Bound(silu, "y"));
  (*fused.mutable_params())["rows"] = Param(gate, "rows");
  (*fused.mutable_params())["cols"] = Param(gate, "cols");
  gone.push_back(r0[0]);
  return true;
}

// FuseNorm's norm feeding 1 or 3 GEMVs of one K and output dtype -> rms_gemv,
// rms_gemv3. Completes `fused` (x and norm bound), or says why not.
bool Fuser::FuseNormGemvs(const std::vector<const elf::Launch*>& gemvs, const std::string& where,
                          const std::set<std::string>& fusions, elf::Launch& fused, std::string& id) {
  if (!fusions.count("rms_gemv")) return false;
  std::set<elf::DType> y_types;
  for (const elf::Launch* g : gemvs) y_types.insert(bos_.at(*Bound(*g, "y"))->dtype());
  if (y_types.size() != 1) {
    notes.insert(absl::StrCat(where, ": its GEMVs' outputs differ in dtype"));
    return false;
  }
  if (gemvs.size() == 1) {
    id = "rms_gemv";
    Bind(fused, "w", *Bound(*gemvs[0], "w"));
    Bind(fused, "y", *Bound(*gemvs[0], "y"));
    (*fused.mutable_params())["rows"] = Param(*gemvs[0], "rows");
  } else {
    id = "rms_gemv3";
    for (int i = 0; i < 3; ++i) {
      Bind(fused, absl::StrCat("w", i), *Bound(*gemvs[i], "w"));
      (*fused.mutable_params())[absl::StrCat("rows", i)] = Param(*gemvs[i], "rows");
    }
    for (int i = 0; i < 3; ++i) Bind(fused, absl::StrCat("y", i), *Bound(*gemvs[i], "y"));
  }
  const int64_t cols = Param(*gemvs[0], "cols");
  for (const elf::Launch* g : gemvs) {
    if (Param(*g, "cols") != cols) {
      notes.insert(absl::StrCat(where, ": its GEMVs differ in K"));
      return false;
    }
  }
  (*fused.mutable_params())["cols"] = cols;
  return true;
}

// RMSNorm launch `n` whose output only GEMVs of the group read -> a fused launch at n.
bool Fuser::FuseNorm(std::vector<Slot>& slots, int s, int n, const std::set<std::string>& fusions) {
  const elf::Launch norm = *slots[n].launch;
  const std::string* xn = Bound(norm, "y");
  if (xn == nullptr) return false;
  const std::vector<int> readers = Readers(slots, *xn);
  const std::string where = absl::StrCat(group_, " rmsnorm");
  if (!Private(*xn, s, readers.size() + 1)) {
    notes.insert(absl::StrCat(where, ": its output leaves the group"));
    return false;
  }
  std::vector<const elf::Launch*> gemvs;
  for (int r : readers) {
    if (slots[r].kernel != "gemv") {
      notes.insert(absl::StrCat(where, ": read by a ", slots[r].kernel, " launch, not only GEMVs"));
      return false;
    }
    gemvs.push_back(&*slots[r].launch);
  }
  elf::Launch fused;
  Bind(fused, "x", *Bound(norm, "x"));
  Bind(fused, "norm", *Bound(norm, "w"));
  std::string id;
  std::vector<int> gone = readers;
  if (gemvs.size() == 2) {
    if (!FuseNormSiluMul(slots, s, gemvs, where, fusions, fused, id, gone)) return false;
  } else if (gemvs.size() == 1 || gemvs.size() == 3) {
    if (!FuseNormGemvs(gemvs, where, fusions, fused, id)) return false;
  } else {
    notes.insert(absl::StrCat(where, ": feeds ", gemvs.size(), " GEMVs (the fused kernels take 1, 3, or gate + up)"));
    return false;
  }
  auto symbol = FusedSymbol(id, gemvs, where);
  if (!symbol.ok()) {
    notes.insert(std::string(symbol.status().message()));
    return false;
  }
  fused.set_kernel_symbol(*symbol);
  for (int g : gone) slots[g].launch.reset();
  slots[n].launch = std::move(fused);
  slots[n].kernel = id;
  ++made[id];
  return true;
}

absl::StatusOr<int> Fuser::FuseGroup(int s, const std::set<std::string>& fusions) {
  elf::LaunchGroup& group = *p_.mutable_steps(s)->mutable_group();
  group_ = group.name();
  std::vector<Slot> slots;
  for (const auto& l : group.launches()) {
    DK_ASSIGN_OR_RETURN(const registry::Kernel* kernel, KernelOf(l));
    slots.push_back({l, kernel->id()});
  }
  int fused = 0;
  if (fusions.count("gemv_add")) {
    for (size_t j = 0; j < slots.size(); ++j) {
      if (slots[j].launch && slots[j].kernel == "add") fused += FuseAdd(slots, s, static_cast<int>(j));
    }
  }
  for (size_t n = 0; n < slots.size(); ++n) {
    if (slots[n].launch && slots[n].kernel == "rmsnorm") fused += FuseNorm(slots, s, static_cast<int>(n), fusions);
  }
  if (fused == 0) return 0;
  group.clear_launches();
  for (auto& slot : slots) {
    if (slot.launch) *group.add_launches() = std::move(*slot.launch);
  }
  return fused;
}

// Launches that run a GEMV (one pass of the pool over weight rows each).
int GemvPasses(const elf::Program& p) {
  int n = 0;
  for (const auto& s : p.steps()) {
    if (!s.has_group()) continue;
    for (const auto& l : s.group().launches()) {
      auto kernel = KernelOf(l);
      if (!kernel.ok()) continue;
      for (const auto& in : (*kernel)->inputs()) {
        if (registry::IsWeightParam(**kernel, in)) {
          ++n;
          break;
        }
      }
    }
  }
  return n;
}

int Launches(const elf::Program& p) {
  int n = 0;
  for (const auto& s : p.steps()) n += s.has_group() ? s.group().launches_size() : 0;
  return n;
}

}  // namespace

absl::StatusOr<PassResult> Run(elf::Program& p, const registry::TargetConstraints& target, const Options& options) {
  const std::vector<std::string> all = Fusions();
  std::set<std::string> fusions = options.fusions;
  for (const std::string& f : fusions) {
    if (std::find(all.begin(), all.end(), f) == all.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown fusion '", f, "' (known: ", absl::StrJoin(all, ", "), ")"));
    }
  }
  if (fusions.empty()) fusions.insert(all.begin(), all.end());
  DK_ASSIGN_OR_RETURN(const Dataflow flow, ComputeDataflow(p));
  const int launches_before = Launches(p), passes_before = GemvPasses(p);
  Fuser fuser(p, flow);
  int fused = 0;
  for (int s = 0; s < p.steps_size(); ++s) {
    if (!p.steps(s).has_group()) continue;
    DK_ASSIGN_OR_RETURN(const int n, fuser.FuseGroup(s, fusions));
    fused += n;
  }
  std::string notes;
  if (!fuser.notes.empty()) {
    // One line: the distinct reasons with the layer numbers folded away.
    std::set<std::string> reasons;
    for (const std::string& note : fuser.notes) {
      const size_t dot = note.find('.');
      reasons.insert(note.rfind("L", 0) == 0 && dot != std::string::npos ? "L*" + note.substr(dot) : note);
    }
    notes = absl::StrCat("; left unfused: ", absl::StrJoin(reasons, "; "));
  }
  if (fused == 0) {
    return Unchanged(
        absl::StrCat("nothing to do: no RMSNorm shares a launch group with the GEMVs it feeds, nor a GEMV "
                     "with its residual add, as values that stay in the group (run merge_multi_launch and "
                     "buffer_object_reuse first)",
                     notes));
  }
  const int removed = RemoveUnusedBos(p);
  std::vector<std::string> parts;
  for (const auto& [id, n] : fuser.made) parts.push_back(absl::StrCat(id, " x", n));
  return Changed(absl::StrCat(fused, " fused launches (", absl::StrJoin(parts, ", "), "); launches per token ",
                              launches_before, " -> ", Launches(p), ", GEMV passes ", passes_before, " -> ",
                              GemvPasses(p), "; ", removed,
                              " intermediate BOs gone; bit-identical to the parent (rounded where the unfused "
                              "kernels round)",
                              notes));
}

}  // namespace dk::opt::fuse_kernels
