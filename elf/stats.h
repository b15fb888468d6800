// Per-token statistics of a decode program, read off its schema: device runs,
// host-written bytes, weight bytes (the bandwidth floor's numerator). Used by the
// passes (lineage reasons), elf_dump --diff, the profile and the benchmarks.
// Thread-safety: stateless functions.
#ifndef DK_ELF_STATS_H_
#define DK_ELF_STATS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "registry/registry.pb.h"

namespace dk::elf {

// The kernel a launch runs (NotFound for unknown symbols).
absl::StatusOr<const registry::Kernel*> KernelOf(const Launch& launch);

// Integer launch parameter `name` ("rows", "cols", ...), 0 when the launch has none.
int64_t LaunchParam(const Launch& launch, const std::string& name);

// The merge a launch group came from: its name without the ".partN" that
// merge_multi_launch appends where it splits a merge at a target limit
// ("L0.o_gemv_ffn.part2" -> "L0.o_gemv_ffn"; other names as they are).
std::string MergeName(const std::string& group_name);

// Device runs per token: one per launch group.
int RunsPerToken(const Program& program);

// Device runs by layer: launch groups of each layer (0 .. n_layers - 1, every layer
// listed), and model-wide ones (layer -1: the LM head) under key -1.
std::map<int, int> RunsPerLayer(const Program& program);

// RunsPerLayer in words: "2 per layer (all 16 layers) + 1 model-wide = 33 per token",
// or with layers that differ: "per layer L0 2, L1 3 + 1 model-wide = 6 per token".
// `unit` names what the runs are counted per ("token", or "chunk" for a prefill plan).
std::string DescribeRuns(const std::map<int, int>& runs_per_layer, const std::string& unit = "token");

// Bytes written to BOs per token by the host (WRITE BOs, counted once per group
// that binds them as input).
int64_t BytesWrittenPerToken(const Program& program);

// Bytes of the weight BOs (weight_tensor set) the launch groups read per token,
// each BO counted once: the numerator of the memory-bandwidth floor
// (packed_panel_x12_v1 BOs: X12StreamedBytes, what their compact blocks stream).
int64_t WeightBytesPerToken(const Program& program);

// "12.3 MiB" style.
std::string HumanBytes(int64_t bytes);

}  // namespace dk::elf

#endif  // DK_ELF_STATS_H_
