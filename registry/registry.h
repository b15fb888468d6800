// The kernel registry: kernel ids, their variant symbols, and per-target
// constraints (kept as data in registry.textproto), for optimization passes and
// backends to query.
// Thread-safety: the registry is immutable after Get() builds it; all functions
// are safe to call concurrently.
#ifndef DK_REGISTRY_REGISTRY_H_
#define DK_REGISTRY_REGISTRY_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/weight_format.h"
#include "registry/registry.pb.h"

namespace dk::registry {

// The layouts a variant reads weights in: the names of formats/weight_format.h. Built
// from pointer and length: string_view's one-argument constructor compares the
// pointer with null, which GCC's -fsanitize=undefined does not accept in a constant
// expression for the address of another constant (--config=ubsan).
inline constexpr absl::string_view kRowMajor(formats::kRowMajorName, sizeof(formats::kRowMajorName) - 1);
inline constexpr absl::string_view kPackedPanelV1(formats::kPackedPanelV1Name,
                                                  sizeof(formats::kPackedPanelV1Name) - 1);
// bf16 weights in 12 bits each, lossless (kernels/gemv/gemv_x12.h); bf16 x only.
inline constexpr absl::string_view kPackedPanelX12V1(formats::kPackedPanelX12V1Name,
                                                     sizeof(formats::kPackedPanelX12V1Name) - 1);

// The registry compiled into this binary (parsed once).
const Registry& Get();

// Parses and validates a registry in text format (unique kernel ids, symbols and
// target names). Exposed for tests and tools.
absl::StatusOr<Registry> Parse(absl::string_view text);

absl::StatusOr<const Kernel*> FindKernel(absl::string_view id);
absl::StatusOr<const TargetConstraints*> FindTarget(absl::string_view name);
// The kernel variant a symbol names; NotFound for an unknown symbol.
absl::StatusOr<const KernelVariant*> FindSymbol(absl::string_view symbol,
                                                const Kernel** kernel = nullptr);

// The variant of `kernel_id` for `layout` ("" for kernels without weights) and
// weight block format `block_format` ("" = plain bf16, "q8_0", ...), specialized
// for reduction length k when one exists, else the generic (k = 0) one.
absl::StatusOr<const KernelVariant*> SelectVariant(absl::string_view kernel_id,
                                                   absl::string_view layout, int64_t k,
                                                   absl::string_view block_format = "");

// Whether input `param` of `kernel` is a GEMV weight, read in the variant's layout
// and block format: for kernels whose variants name a layout (gemv and the fused
// GEMV kernels), the inputs "w" and "w<suffix>" ("w0", "w_gate"); never for others
// (rmsnorm's "w" is its scale vector).
bool IsWeightParam(const Kernel& kernel, absl::string_view param);

// A GEMV launch shape accepted by a target.
struct GemvPlan {
  int64_t tile_m = 0;   // rows per tile (0 on targets without tiling)
  int64_t k_chunk = 0;  // K-split GEMV: columns per tile (0: the plain GEMV)
};
// OK with a plan if `target` can run a [rows, k] GEMV in one launch; otherwise
// FailedPrecondition with the reason (e.g. "K=8192 exceeds npu2 K_max 8160").
absl::StatusOr<GemvPlan> CheckGemv(const TargetConstraints& target, int64_t rows,
                                   int64_t k);

// OK with a plan (k_chunk set) if `target` can run a [rows, k] GEMV as its K-split
// GEMV (kernel gemv_ksplit): it has one, k is a multiple of its chunk, and the tiles
// of one chunk fit. Otherwise FailedPrecondition with the reason.
absl::StatusOr<GemvPlan> CheckKSplitGemv(const TargetConstraints& target, int64_t rows,
                                         int64_t k);

// The herd (row tiles per GEMM run) with which `target` runs a prompt chunk of `rows`
// token rows as GEMMs: the largest of max_herd_m, ..., 2, 1 whose tiles divide rows.
// 0 on a target without prefill limits (any rows). FailedPrecondition naming the row
// tile if rows is no multiple of it.
absl::StatusOr<int64_t> CheckPrefillRows(const TargetConstraints& target, int64_t rows);

// FailedPrecondition if `target`'s prefill GEMM cannot reduce over k columns.
absl::Status CheckPrefillGemm(const TargetConstraints& target, int64_t k);

// FailedPrecondition if a group of `bodies` distinct launch bodies (launches of one
// symbol with the same integer parameters count once) exceeds the target's limit.
absl::Status CheckGroupSize(const TargetConstraints& target, int bodies);

}  // namespace dk::registry

#endif  // DK_REGISTRY_REGISTRY_H_
