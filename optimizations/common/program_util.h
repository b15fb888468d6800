// Helpers shared by the optimization passes: who produces and who consumes each
// BO and host value of a decode program, BO bookkeeping.
// Passes see only the ELF schema and the kernel registry (docs/architecture.md s.2).
#ifndef DK_OPTIMIZATIONS_COMMON_PROGRAM_UTIL_H_
#define DK_OPTIMIZATIONS_COMMON_PROGRAM_UTIL_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "elf/stats.h"
#include "registry/registry.h"

namespace dk::opt {

// One use of a BO or host value: step index, launch index within the group (-1
// for a host step), parameter name, and whether the use writes it.
struct Use {
  int step = -1;
  int launch = -1;
  std::string param;
  bool writes = false;
};

// Data flow of a program. A launch output bound to a BO that mirrors host value v
// produces v (the host copy after read-back); a host step binding produces or
// consumes its value directly.
struct Dataflow {
  std::map<std::string, std::vector<Use>> bo_uses;     // by BO name
  std::map<std::string, std::vector<Use>> value_uses;  // by host value name (direct + via mirrors)
};

// InvalidArgument for unknown kernel symbols or host-step kinds.
absl::StatusOr<Dataflow> ComputeDataflow(const elf::Program& program);

// True if a host step (not a launch) reads `value`.
bool HostReads(const elf::Program& program, const Dataflow& flow, const std::string& value);

// Removes BOs no launch binds any more; returns how many.
int RemoveUnusedBos(elf::Program& program);

// The per-token statistics live with the schema (elf/stats.h); passes call them
// unqualified.
using elf::BytesWrittenPerToken;
using elf::HumanBytes;
using elf::KernelOf;
using elf::LaunchParam;
using elf::MergeName;
using elf::RunsPerToken;
using elf::WeightBytesPerToken;

}  // namespace dk::opt

#endif  // DK_OPTIMIZATIONS_COMMON_PROGRAM_UTIL_H_
