// ValidateProgram: the one rule set of a decode program (elf.h).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "elf/internal.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::elf {
namespace {

using BoMap = std::map<std::string, const BufferObject*>;

// The host values by name, and their elements.
struct HostValues {
  std::map<std::string, const HostValue*> values;
  std::map<std::string, int64_t> elements;
};

// OK when `layer` is -1 (model-wide) or a layer of the model.
absl::Status CheckLayer(int64_t layer, const ModelShape& m, const std::string& what) {
  if (layer < -1 || layer >= m.n_layers()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has layer ", layer, ", outside [-1, ",
                                                   m.n_layers(), ")"));
  }
  return absl::OkStatus();
}

// Integer parameters of a launch or host step: each in [0, kMaxDimension].
absl::Status CheckParams(const google::protobuf::Map<std::string, int64_t>& params,
                         const std::string& where) {
  for (const auto& [key, value] : params) {
    if (value < 0 || value > kMaxDimension) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"", key, "\" = ", value,
                                                     " is outside [0, ", kMaxDimension, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBinding(const Binding& b, const BoMap& bos, absl::string_view where) {
  if (bos.count(b.bo()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"", b.param(),
                                                   "\" is bound to unknown BO \"", b.bo(), "\""));
  }
  return absl::OkStatus();
}

// The operands of one launch, checked against what its kernel reads and writes:
// every input and output parameter bound, a weight [rows, cols] in the variant's
// layout (and of its specialized K), every other operand BF16 (F32 where the kernel
// takes it) and large enough for the launch. These are the kernels' contracts, the
// same for every device; a device checks them again at load only as a guard.
class Operands {
 public:
  Operands(const Launch& l, const registry::KernelVariant& variant, const BoMap& bos, const std::string& where)
      : launch_(l), variant_(variant), where_(where) {
    for (const Binding& b : l.bindings()) bound_[b.param()] = bos.at(b.bo());
  }

  template <typename... Parts>
  absl::Status Bad(const Parts&... parts) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", parts...));
  }
  bool IsBound(const std::string& p) const { return bound_.count(p) > 0; }
  const BufferObject& Bound(const std::string& p) const { return *bound_.at(p); }
  const std::map<std::string, const BufferObject*>& bound() const { return bound_; }
  const registry::KernelVariant& variant() const { return variant_; }

  // The launch's integer parameter `name`, 0 when absent.
  int64_t Param(const std::string& name) const {
    const auto it = launch_.params().find(name);
    return it == launch_.params().end() ? 0 : it->second;
  }

  // Operand `p` is BF16 (or F32 if allowed) and holds at least `elements`.
  absl::Status Expect(const std::string& p, int64_t elements, bool allow_f32) const {
    const BufferObject& b = Bound(p);
    const bool f32 = b.dtype() == F32;
    if (b.dtype() != BF16 && !(allow_f32 && f32)) {
      return Bad("BO \"", b.name(), "\" (parameter \"", p, "\") has dtype ", DType_Name(b.dtype()),
                 ", expected BF16", allow_f32 ? " or F32" : "");
    }
    if (b.size_bytes() < elements * DTypeBytes(b.dtype())) {
      return Bad("BO \"", b.name(), "\" (parameter \"", p, "\") holds ", b.size_bytes(),
                 " bytes, the launch needs ", elements * DTypeBytes(b.dtype()));
    }
    return absl::OkStatus();
  }

  // Weight `p` is a BF16 [rows, cols] in the variant's layout (and K).
  absl::Status Weight(const std::string& p, int64_t rows, int64_t cols) const {
    const BufferObject& w = Bound(p);
    const std::string layout = w.layout().empty() ? std::string(registry::kRowMajor) : w.layout();
    if (layout != variant_.layout()) {
      return Bad("weight BO \"", w.name(), "\" has layout ", layout, " but the kernel reads ", variant_.layout());
    }
    if (variant_.k() != 0 && variant_.k() != cols) {
      return Bad("symbol is specialized for K=", variant_.k(), " but cols=", cols);
    }
    BufferObject need = w;
    need.clear_shape();
    need.add_shape(rows);
    need.add_shape(cols);
    const absl::StatusOr<int64_t> bytes = BoBytes(need);
    if (!bytes.ok()) return Bad(bytes.status().message());
    if (w.dtype() != BF16 || w.size_bytes() < *bytes) {
      return Bad("weight BO \"", w.name(), "\" (parameter \"", p, "\") must be BF16 of at least ", *bytes,
                 " bytes for [", rows, ", ", cols, "]");
    }
    return absl::OkStatus();
  }

 private:
  const Launch& launch_;
  const registry::KernelVariant& variant_;
  const std::string& where_;
  std::map<std::string, const BufferObject*> bound_;
};

// gemv and gemv_ksplit.
absl::Status CheckGemvOperands(const Operands& o, const std::string& id) {
  const int64_t rows = o.Param("rows"), cols = o.Param("cols");
  if (id == "gemv_ksplit") {
    const int64_t chunk = o.Param("k_chunk");
    if (chunk % formats::kBlockElems != 0 || cols % chunk != 0) {
      return o.Bad("K-split GEMV needs cols (", cols, ") a multiple of k_chunk (", chunk,
                   "), itself a multiple of ", formats::kBlockElems);
    }
  }
  DK_RETURN_IF_ERROR(o.Weight("w", rows, cols));
  DK_RETURN_IF_ERROR(o.Expect("x", cols, true));
  DK_RETURN_IF_ERROR(o.Expect("y", rows, true));
  if (o.variant().layout() == registry::kPackedPanelX12V1 && o.Bound("x").dtype() == F32) {
    return o.Bad("the ", registry::kPackedPanelX12V1, " GEMV reads bf16 x, BO \"", o.Bound("x").name(),
                 "\" is F32");
  }
  return absl::OkStatus();
}

// rms_gemv, gemv_add, rms_gemv_silu_mul.
absl::Status CheckFusedGemvOperands(const Operands& o, const std::string& id) {
  const int64_t rows = o.Param("rows"), cols = o.Param("cols");
  const bool silu = id == "rms_gemv_silu_mul";
  DK_RETURN_IF_ERROR(o.Weight(silu ? "w_gate" : "w", rows, cols));
  if (silu) DK_RETURN_IF_ERROR(o.Weight("w_up", rows, cols));
  DK_RETURN_IF_ERROR(o.Expect("x", cols, false));
  if (id == "gemv_add") {
    DK_RETURN_IF_ERROR(o.Expect("residual", rows, false));
  } else {
    DK_RETURN_IF_ERROR(o.Expect("norm", cols, false));
  }
  return o.Expect("y", rows, id == "rms_gemv");
}

absl::Status CheckRmsGemv3Operands(const Operands& o) {
  const int64_t cols = o.Param("cols");
  DK_RETURN_IF_ERROR(o.Expect("x", cols, false));
  DK_RETURN_IF_ERROR(o.Expect("norm", cols, false));
  for (int i = 0; i < 3; ++i) {
    const int64_t rows = o.Param(absl::StrCat("rows", i));
    DK_RETURN_IF_ERROR(o.Weight(absl::StrCat("w", i), rows, cols));
    DK_RETURN_IF_ERROR(o.Expect(absl::StrCat("y", i), rows, true));
  }
  if (o.Bound("y1").dtype() != o.Bound("y0").dtype() || o.Bound("y2").dtype() != o.Bound("y0").dtype()) {
    return o.Bad("outputs y0, y1, y2 differ in dtype");
  }
  return absl::OkStatus();
}

// The kernels without weights: norms, RoPE, bias_add, and the elementwise ones
// (silu_mul, gelu_tanh_mul, add: every BO holds n bf16).
absl::Status CheckVectorOperands(const Operands& o, const std::string& id) {
  if (id == "rmsnorm") {
    for (const char* p : {"x", "w", "y"}) DK_RETURN_IF_ERROR(o.Expect(p, o.Param("n"), false));
    return absl::OkStatus();
  }
  if (id == "rope") {
    const int64_t heads = o.Param("heads"), head_dim = o.Param("head_dim");
    if (head_dim % 2 != 0) return o.Bad("head_dim ", head_dim, " must be even");
    DK_RETURN_IF_ERROR(o.Expect("x", heads * head_dim, false));
    DK_RETURN_IF_ERROR(o.Expect("y", heads * head_dim, false));
    DK_RETURN_IF_ERROR(o.Expect("cos", head_dim / 2, false));
    return o.Expect("sin", head_dim / 2, false);
  }
  if (id == "head_rmsnorm") {
    const int64_t n = o.Param("heads") * o.Param("head_dim");
    DK_RETURN_IF_ERROR(o.Expect("x", n, false));
    DK_RETURN_IF_ERROR(o.Expect("w", o.Param("head_dim"), false));
    return o.Expect("y", n, false);
  }
  if (id == "bias_add") {
    if (o.Bound("x").dtype() != F32) {
      return o.Bad("BO \"", o.Bound("x").name(), "\" (parameter \"x\") has dtype ",
                   DType_Name(o.Bound("x").dtype()), ", expected F32");
    }
    DK_RETURN_IF_ERROR(o.Expect("x", o.Param("n"), true));
    DK_RETURN_IF_ERROR(o.Expect("bias", o.Param("n"), false));
    return o.Expect("y", o.Param("n"), false);
  }
  for (const auto& [p, bo] : o.bound()) DK_RETURN_IF_ERROR(o.Expect(p, o.Param("n"), false));
  return absl::OkStatus();
}

absl::Status CheckLaunchOperands(const Launch& l, const registry::Kernel& kernel,
                                 const registry::KernelVariant& variant, const BoMap& bos,
                                 const std::string& where) {
  const Operands o(l, variant, bos, where);
  for (const auto* params : {&kernel.inputs(), &kernel.outputs()}) {
    for (const std::string& p : *params) {
      if (!o.IsBound(p)) return o.Bad("parameter \"", p, "\" is not bound");
    }
  }
  // Gemma's norms bind the sizes Llama's do.
  const std::string id = kernel.id() == "rmsnorm_plus1"        ? "rmsnorm"
                         : kernel.id() == "head_rmsnorm_plus1" ? "head_rmsnorm"
                                                               : kernel.id();
  if (id == "gemv" || id == "gemv_ksplit") return CheckGemvOperands(o, id);
  if (id == "rms_gemv" || id == "gemv_add" || id == "rms_gemv_silu_mul") return CheckFusedGemvOperands(o, id);
  if (id == "rms_gemv3") return CheckRmsGemv3Operands(o);
  return CheckVectorOperands(o, id);
}

// The logits (an F32 host value of vocab elements) are written whole, once per
// token: the OUTPUT BOs mirroring them (the LM head's partitions) cover every
// element and no two overlap. A gap leaves logits of the previous token (or zeros)
// that top-k would pick from; an overlap means a gap elsewhere.
absl::Status CheckLogits(const Program& p, const HostValues& host) {
  const auto v = host.values.find("logits");
  if (v == host.values.end() || v->second->dtype() != F32) {
    return absl::InvalidArgumentError("the program has no F32 host value \"logits\"");
  }
  const int64_t n = host.elements.at("logits");
  if (n != p.model().vocab()) {
    return absl::InvalidArgumentError(absl::StrCat("host value \"logits\" has ", n,
                                                   " elements, the model's vocab is ", p.model().vocab()));
  }
  std::vector<std::pair<int64_t, const BufferObject*>> parts;  // (host_offset, BO)
  for (const BufferObject& bo : p.bos()) {
    if (bo.category() == OUTPUT && bo.host_value() == "logits") parts.push_back({bo.host_offset(), &bo});
  }
  std::sort(parts.begin(), parts.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t covered = 0;  // logits [0, covered) are written
  const BufferObject* last = nullptr;
  for (const auto& [offset, bo] : parts) {
    const int64_t end = offset + bo->size_bytes() / DTypeBytes(F32);
    if (offset < covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OUTPUT BOs \"", last->name(), "\" and \"", bo->name(), "\" both write logits [", offset, ", ",
          std::min(covered, end), ") (the LM-head partitions overlap)"));
    }
    if (offset > covered) {
      return absl::InvalidArgumentError(absl::StrCat("logits [", covered, ", ", offset,
                                                     ") are written by no OUTPUT BO (the LM-head partitions "
                                                     "leave a gap)"));
    }
    covered = end;
    last = bo;
  }
  if (covered < n) {
    return absl::InvalidArgumentError(absl::StrCat("logits [", covered, ", ", n,
                                                   ") are written by no OUTPUT BO (the LM-head partitions "
                                                   "do not cover the vocab)"));
  }
  return absl::OkStatus();
}


// Named, unique host values of a dtype and a shape within kMaxBytes.
absl::Status CheckHostValues(const Program& p, HostValues* host) {
  for (const HostValue& v : p.values()) {
    if (v.name().empty()) return absl::InvalidArgumentError("a host value has no name");
    if (!host->values.emplace(v.name(), &v).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate host value \"", v.name(), "\""));
    }
    const std::string what = absl::StrCat("host value \"", v.name(), "\"");
    if (DTypeBytes(v.dtype()) == 0) return absl::InvalidArgumentError(absl::StrCat(what, " has no dtype"));
    DK_ASSIGN_OR_RETURN(const int64_t n, internal::CheckedNumel(v.shape(), what));
    int64_t bytes = 0;
    if (!internal::MulWithinLimit(n, DTypeBytes(v.dtype()), &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " would be more than ", kMaxBytes, " bytes"));
    }
    host->elements[v.name()] = n;
  }
  return absl::OkStatus();
}

// One BO on its own: category, layer, size, weight rows and the host value it
// mirrors.
absl::Status CheckBo(const BufferObject& bo, const ModelShape& m, const HostValues& host) {
  const std::string what = absl::StrCat("BO \"", bo.name(), "\"");
  auto bad = [&](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(what, parts...)); };
  if (bo.category() == CATEGORY_UNSPECIFIED) return bad(" has no category");
  if (!BoCategory_IsValid(bo.category())) return bad(" has unknown category ", bo.category());
  DK_RETURN_IF_ERROR(CheckLayer(bo.layer(), m, what));
  auto bytes = BoBytes(bo);
  if (!bytes.ok()) return bytes.status();
  if (*bytes != bo.size_bytes()) {
    return bad(" size_bytes ", bo.size_bytes(), " does not match its shape (", *bytes, " bytes)");
  }
  if (!bo.weight_tensor().empty() && bo.shape_size() > 2) {
    return bad(" mirrors weight tensor \"", bo.weight_tensor(), "\" but has rank ", bo.shape_size(),
               " (a weight BO is 1-D or 2-D)");
  }
  // weight_row_begin/end: rows [begin, end) of the tensor, end 0 = all rows from 0.
  const int64_t begin = bo.weight_row_begin(), end = bo.weight_row_end();
  if (bo.weight_tensor().empty() && (begin != 0 || end != 0)) {
    return bad(" has a weight row range [", begin, ", ", end, ") but no weight_tensor");
  }
  if (begin < 0 || end < 0 || (end == 0 && begin != 0) || (end != 0 && begin >= end)) {
    return bad(" has an empty or negative weight row range [weight_row_begin ", begin,
               ", weight_row_end ", end, ")");
  }
  if (end != 0 && end - begin != bo.shape(0)) {
    return bad(" weight rows [", begin, ", ", end, ") are ", end - begin, " rows but the BO has ",
               bo.shape(0));
  }
  // host_value/host_offset: the BO is elements [offset, offset + numel) of the value.
  if (bo.host_value().empty()) {
    if (bo.host_offset() != 0) return bad(" has host_offset ", bo.host_offset(), " but no host_value");
    return absl::OkStatus();
  }
  const auto v = host.values.find(bo.host_value());
  if (v == host.values.end()) return bad(" mirrors unknown host value \"", bo.host_value(), "\"");
  if (v->second->dtype() != bo.dtype()) {
    return bad(" is ", DType_Name(bo.dtype()), " but mirrors host value \"", bo.host_value(),
               "\" of dtype ", DType_Name(v->second->dtype()));
  }
  const int64_t bo_elements = bo.size_bytes() / DTypeBytes(bo.dtype());
  const int64_t value_n = host.elements.at(bo.host_value());
  if (bo.host_offset() < 0 || bo.host_offset() > value_n || bo_elements > value_n - bo.host_offset()) {
    return bad(" (", bo_elements, " elements) at host_offset ", bo.host_offset(),
               " does not lie inside host value \"", bo.host_value(), "\" (", value_n, " elements)");
  }
  return absl::OkStatus();
}

// One binding of a launch: the BO exists; where its bytes come from and go to (an
// OUTPUT BO is read back into its host value, a WRITE BO the kernel reads is written
// from a host value or a weight before each run); a weight's blocks are read only by
// a variant of that block format (and a block-format variant reads only such a
// weight).
absl::Status CheckLaunchBinding(const Binding& b, const registry::Kernel& kernel,
                                const registry::KernelVariant& variant, const std::set<std::string>& outputs,
                                const BoMap& bos, const std::string& where) {
  DK_RETURN_IF_ERROR(CheckBinding(b, bos, where));
  const BufferObject& bo = *bos.at(b.bo());
  if (outputs.count(b.param()) > 0) {
    if (bo.category() == OUTPUT && bo.host_value().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": OUTPUT BO \"", bo.name(), "\" (parameter \"",
                                                     b.param(), "\") mirrors no host value"));
    }
  } else if (bo.category() == WRITE && bo.host_value().empty() && bo.weight_tensor().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": WRITE BO \"", bo.name(), "\" (parameter \"",
                                                   b.param(), "\") mirrors neither a host value nor a weight"));
  }
  if (!registry::IsWeightParam(kernel, b.param())) return absl::OkStatus();
  const std::string format = BlockFormatName(bo.block_format());
  if (format != variant.block_format()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": weight BO \"", b.bo(), "\" is ",
        format.empty() ? "plain bf16" : absl::StrCat("in block format ", format), " but the kernel reads ",
        variant.block_format().empty() ? "plain bf16" : absl::StrCat("block format ", variant.block_format())));
  }
  return absl::OkStatus();
}

// One launch: a known device kernel, its bindings, its integer parameters and its
// operands.
absl::Status CheckLaunch(const Launch& l, const BoMap& bos, const std::string& where) {
  const registry::Kernel* kernel = nullptr;
  auto variant = registry::FindSymbol(l.kernel_symbol(), &kernel);
  if (!variant.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": unknown kernel symbol \"", l.kernel_symbol(), "\""));
  }
  if (kernel->host_only()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": kernel \"", kernel->id(), "\" runs on the host, not in a launch group"));
  }
  const std::set<std::string> outputs(kernel->outputs().begin(), kernel->outputs().end());
  for (const Binding& b : l.bindings()) {
    DK_RETURN_IF_ERROR(CheckLaunchBinding(b, *kernel, **variant, outputs, bos, where));
  }
  DK_RETURN_IF_ERROR(CheckParams(l.params(), where));
  for (const std::string& param : kernel->int_params()) {
    const auto it = l.params().find(param);
    if (it == l.params().end() || it->second <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": integer parameter \"", param, "\" is missing or not positive"));
    }
  }
  return CheckLaunchOperands(l, *kernel, **variant, bos, where);
}

// A launch group: unique name and entry symbol, a layer, launches.
absl::Status CheckGroup(const LaunchGroup& g, const ModelShape& m, const BoMap& bos,
                        std::set<std::string>* groups, std::set<std::string>* entries) {
  const std::string where = absl::StrCat("group \"", g.name(), "\"");
  if (!groups->insert(g.name()).second) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate ", where));
  }
  if (g.entry_symbol().empty() || !entries->insert(g.entry_symbol()).second) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has a missing or duplicate entry symbol \"", g.entry_symbol(), "\""));
  }
  DK_RETURN_IF_ERROR(CheckLayer(g.layer(), m, where));
  if (g.launches().empty()) return absl::InvalidArgumentError(absl::StrCat(where, " is empty"));
  for (int j = 0; j < g.launches_size(); ++j) {
    const Launch& l = g.launches(j);
    DK_RETURN_IF_ERROR(CheckLaunch(l, bos, absl::StrCat(where, " launch ", j, " (", l.kernel_symbol(), ")")));
  }
  return absl::OkStatus();
}

// Top-k: k within the vocab, and its result in values "ids" (i32) and "values"
// (f32) of k elements each, where the runtime reads the token.
absl::Status CheckTopK(const HostStep& h, const std::string& where, const ModelShape& m, const HostValues& host) {
  const auto kp = h.params().find("k");
  const int64_t k = kp == h.params().end() ? 5 : kp->second;
  if (k < 1 || k > m.vocab()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": parameter \"k\" = ", k, " is outside [1, vocab ", m.vocab(), "]"));
  }
  for (const auto& [param, dtype] : {std::pair<const char*, DType>{"ids", I32}, {"values", F32}}) {
    const Binding* bound = nullptr;
    for (const Binding& b : h.bindings()) {
      if (b.param() == param) bound = &b;
    }
    if (bound == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no \"", param, "\" binding (top-k's result)"));
    }
    const HostValue* v = host.values.at(bound->value());
    if (v->dtype() != dtype || host.elements.at(bound->value()) != k) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"", param, "\" is bound to \"", bound->value(),
                                                     "\", which must be ", DType_Name(dtype), " of k = ", k,
                                                     " elements"));
    }
  }
  return absl::OkStatus();
}

// A host step: a kind, a layer, bindings to host values, parameters (top-k's k
// within the vocab).
absl::Status CheckHostStep(const HostStep& h, int i, const ModelShape& m, const HostValues& host) {
  const std::string where = absl::StrCat("host step ", i, " (", HostStepName(h.kind()), ")");
  if (h.kind() == HostStep::KIND_UNSPECIFIED || !HostStep::Kind_IsValid(h.kind())) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no known kind"));
  }
  DK_RETURN_IF_ERROR(CheckLayer(h.layer(), m, where));
  for (const Binding& b : h.bindings()) {
    if (host.values.count(b.value()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": parameter \"", b.param(),
                                                     "\" is bound to unknown host value \"", b.value(), "\""));
    }
  }
  DK_RETURN_IF_ERROR(CheckParams(h.params(), where));
  if (h.kind() == HostStep::TOPK) return CheckTopK(h, where, m, host);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSpeculative(const Speculative& s) {
  if (s.draft() != kDraftPromptLookup) {
    return absl::InvalidArgumentError(absl::StrCat("speculative: unknown draft \"", s.draft(), "\" (known: ",
                                                   kDraftPromptLookup, ")"));
  }
  if (s.max_draft() < 1 || s.max_draft() > kMaxDraft) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative: max_draft ", s.max_draft(), " is outside [1, ", kMaxDraft, "]"));
  }
  if (s.max_ngram() < kMinDraftNgram || s.max_ngram() > kMaxNgram) {
    return absl::InvalidArgumentError(absl::StrCat("speculative: max_ngram ", s.max_ngram(), " is outside [",
                                                   kMinDraftNgram, ", ", kMaxNgram, "]"));
  }
  const int reach = 1 << (s.max_ngram() - kMinDraftNgram);  // the most a match of max_ngram tokens drafts
  if (s.max_draft() > reach) {
    int needed = s.max_ngram();
    while ((1 << (needed - kMinDraftNgram)) < s.max_draft()) ++needed;
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative: max_draft ", s.max_draft(), " is never reached with max_ngram ", s.max_ngram(),
        " (a match of n tokens drafts at most 2^(n - ", kMinDraftNgram, "), here ", reach,
        "): raise max_ngram to ", needed, " or lower max_draft"));
  }
  return absl::OkStatus();
}

absl::Status ValidateProgram(const Program& p) {
  if (p.schema_version() != kSchemaVersion) {
    return absl::InvalidArgumentError(absl::StrCat("schema version ", p.schema_version(),
                                                   " is not the supported version ", kSchemaVersion));
  }
  DK_RETURN_IF_ERROR(ValidateModelShape(p.model()));
  const ModelShape& m = p.model();
  HostValues host;
  DK_RETURN_IF_ERROR(CheckHostValues(p, &host));
  BoMap bos;
  for (const BufferObject& bo : p.bos()) {
    if (bo.name().empty()) return absl::InvalidArgumentError("a BO has no name");
    if (!bos.emplace(bo.name(), &bo).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate BO name \"", bo.name(), "\""));
    }
    DK_RETURN_IF_ERROR(CheckBo(bo, m, host));
  }
  std::set<std::string> groups, entries;
  for (int i = 0; i < p.steps_size(); ++i) {
    const Step& step = p.steps(i);
    if (step.has_group()) {
      DK_RETURN_IF_ERROR(CheckGroup(step.group(), m, bos, &groups, &entries));
    } else if (step.has_host()) {
      DK_RETURN_IF_ERROR(CheckHostStep(step.host(), i, m, host));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("step ", i, " is neither a group nor a host step"));
    }
  }
  if (p.has_speculative()) DK_RETURN_IF_ERROR(CheckSpeculative(p.speculative()));
  return CheckLogits(p, host);
}

}  // namespace dk::elf
