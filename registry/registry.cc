#include "registry/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/ascii.h"
#include "formats/weight_format.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace dk::registry {

extern const char kRegistryTextProto[];  // registry_data.cc, generated

absl::StatusOr<Registry> Parse(absl::string_view text) {
  Registry registry;
  google::protobuf::TextFormat::Parser parser;
  std::string errors;
  struct Collector : google::protobuf::io::ErrorCollector {
    std::string* out;
    explicit Collector(std::string* o) : out(o) {}
    void AddError(int line, int column, const std::string& message) override {
      absl::StrAppend(out, "line ", line + 1, ":", column + 1, ": ", message, "; ");
    }
  } collector(&errors);
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(std::string(text), &registry)) {
    return absl::InvalidArgumentError(absl::StrCat("kernel registry: ", errors));
  }
  std::set<std::string> ids, symbols, targets;
  for (const Kernel& k : registry.kernels()) {
    if (k.id().empty()) return absl::InvalidArgumentError("kernel registry: a kernel has no id");
    if (!ids.insert(k.id()).second) {
      return absl::InvalidArgumentError(absl::StrCat("kernel registry: duplicate kernel id ", k.id()));
    }
    if (k.variants().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("kernel registry: kernel ", k.id(), " has no variants"));
    }
    for (const KernelVariant& v : k.variants()) {
      if (!v.block_format().empty() && !formats::FromRegistry(kRowMajor, v.block_format()).ok()) {
        return absl::InvalidArgumentError(absl::StrCat("kernel registry: symbol ", v.symbol(),
                                                       " has unknown block format ", v.block_format()));
      }
      if (!symbols.insert(v.symbol()).second) {
        return absl::InvalidArgumentError(absl::StrCat("kernel registry: duplicate symbol ", v.symbol()));
      }
    }
  }
  for (const TargetConstraints& t : registry.targets()) {
    if (!targets.insert(t.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("kernel registry: duplicate target ", t.name()));
    }
  }
  return registry;
}

const Registry& Get() {
  static const Registry* registry = [] {
    auto parsed = Parse(kRegistryTextProto);
    // The data is compiled in and covered by a test; failing here is a build bug.
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
      std::abort();
    }
    return new Registry(*std::move(parsed));
  }();
  return *registry;
}

absl::StatusOr<const Kernel*> FindKernel(absl::string_view id) {
  for (const Kernel& k : Get().kernels()) {
    if (k.id() == id) return &k;
  }
  return absl::NotFoundError(absl::StrCat("no kernel with id \"", id, "\" in the registry"));
}

absl::StatusOr<const TargetConstraints*> FindTarget(absl::string_view name) {
  std::string known;
  for (const TargetConstraints& t : Get().targets()) {
    if (t.name() == name) return &t;
    absl::StrAppend(&known, known.empty() ? "" : ", ", t.name());
  }
  return absl::NotFoundError(
      absl::StrCat("unknown target \"", name, "\" (known targets: ", known, ")"));
}

absl::StatusOr<const KernelVariant*> FindSymbol(absl::string_view symbol,
                                                const Kernel** kernel) {
  for (const Kernel& k : Get().kernels()) {
    for (const KernelVariant& v : k.variants()) {
      if (v.symbol() == symbol) {
        if (kernel) *kernel = &k;
        return &v;
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("unknown kernel symbol \"", symbol, "\""));
}

bool IsWeightParam(const Kernel& kernel, absl::string_view param) {
  if (kernel.variants().empty() || kernel.variants(0).layout().empty()) return false;
  const bool named = param == "w" || (param.size() > 1 && param[0] == 'w' &&
                                      (absl::ascii_isdigit(param[1]) || param[1] == '_'));
  if (!named) return false;
  for (const std::string& in : kernel.inputs()) {
    if (in == param) return true;
  }
  return false;
}

absl::StatusOr<const KernelVariant*> SelectVariant(absl::string_view kernel_id,
                                                   absl::string_view layout, int64_t k,
                                                   absl::string_view block_format) {
  auto kernel = FindKernel(kernel_id);
  if (!kernel.ok()) return kernel.status();
  const KernelVariant* generic = nullptr;
  for (const KernelVariant& v : (*kernel)->variants()) {
    if (v.layout() != layout || v.block_format() != block_format) continue;
    if (v.k() == k && k != 0) return &v;
    if (v.k() == 0) generic = &v;
  }
  if (generic) return generic;
  return absl::NotFoundError(absl::StrCat("kernel ", kernel_id, " has no variant for layout \"",
                                          layout, "\"", block_format.empty() ? "" : " in block format ",
                                          block_format, " and K=", k));
}

namespace {

// The tiling of a GEMV of `rows` rows whose tiles each reduce `k` columns (all of
// them, or one K-split chunk).
absl::StatusOr<GemvPlan> Tile(const TargetConstraints& target, int64_t rows, int64_t k) {
  const GemvLimits& g = target.gemv();
  const std::string& t = target.name();
  if (g.max_rows_per_launch() > 0 && rows > g.max_rows_per_launch()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "N=", rows, " exceeds ", t, " rows per launch ", g.max_rows_per_launch(),
        "; partition it"));
  }
  if (g.herd_m() <= 0 || g.local_memory_bytes() <= 0) return GemvPlan{};
  // Largest even tile_m whose tiles fit the local memory and that divides rows.
  for (int64_t tile_m = g.max_tile_m() - g.max_tile_m() % 2; tile_m >= 2; tile_m -= 2) {
    const int64_t bytes = g.herd_m() * tile_m * k * 2 + g.herd_m() * tile_m * 2;
    if (bytes <= g.local_memory_bytes() && rows % (tile_m * g.herd_m()) == 0) {
      return GemvPlan{tile_m};
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no even tile_m fits ", t, " local memory (", g.local_memory_bytes(),
      " bytes, herd_m ", g.herd_m(), ") for K=", k, " with N=", rows,
      " divisible by tile_m * herd_m"));
}

absl::Status CheckShape(const TargetConstraints& target, int64_t rows, int64_t k) {
  const GemvLimits& g = target.gemv();
  if (rows <= 0 || k <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("GEMV shape ", rows, "x", k, " is empty"));
  }
  if (g.k_multiple() > 0 && k % g.k_multiple() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("K=", k, " is not a multiple of ", g.k_multiple(), " required by ", target.name()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GemvPlan> CheckGemv(const TargetConstraints& target, int64_t rows,
                                   int64_t k) {
  if (absl::Status st = CheckShape(target, rows, k); !st.ok()) return st;
  const GemvLimits& g = target.gemv();
  if (g.k_max() > 0 && k > g.k_max()) {
    return absl::FailedPreconditionError(
        absl::StrCat("K=", k, " exceeds ", target.name(), " K_max ", g.k_max()));
  }
  return Tile(target, rows, k);
}

absl::StatusOr<GemvPlan> CheckKSplitGemv(const TargetConstraints& target, int64_t rows,
                                         int64_t k) {
  if (absl::Status st = CheckShape(target, rows, k); !st.ok()) return st;
  const int64_t chunk = target.gemv().k_split_chunk();
  if (chunk <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(target.name(), " has no K-split GEMV"));
  }
  if (k % chunk != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "K=", k, " is not a multiple of ", target.name(), "'s K-split chunk ", chunk));
  }
  auto plan = Tile(target, rows, chunk);
  if (plan.ok()) plan->k_chunk = chunk;
  return plan;
}

absl::StatusOr<int64_t> CheckPrefillRows(const TargetConstraints& target, int64_t rows) {
  if (rows <= 0) return absl::InvalidArgumentError(absl::StrCat("a prompt chunk of ", rows, " rows"));
  if (!target.has_prefill()) return 0;
  const PrefillLimits& p = target.prefill();
  if (p.row_tile() <= 0 || rows % p.row_tile() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        target.name(), " runs a prompt chunk as GEMMs over tiles of ", p.row_tile(),
        " token rows: the chunk must be a multiple of ", p.row_tile(), ", not ", rows));
  }
  int64_t herd = std::max<int64_t>(p.max_herd_m(), 1);
  while (herd > 1 && rows % (p.row_tile() * herd) != 0) herd /= 2;
  return herd;
}

absl::Status CheckPrefillGemm(const TargetConstraints& target, int64_t k) {
  const int64_t multiple = target.prefill().k_multiple();
  if (multiple > 0 && k % multiple != 0) {
    return absl::FailedPreconditionError(absl::StrCat("K=", k, " is not a multiple of ", target.name(),
                                                      "'s prefill GEMM K tile ", multiple));
  }
  return absl::OkStatus();
}

absl::Status CheckGroupSize(const TargetConstraints& target, int bodies) {
  if (target.max_launches_per_group() > 0 && bodies > target.max_launches_per_group()) {
    return absl::FailedPreconditionError(
        absl::StrCat(bodies, " distinct launch bodies in one group exceed ", target.name(),
                     "'s limit of ", target.max_launches_per_group()));
  }
  return absl::OkStatus();
}

}  // namespace dk::registry
