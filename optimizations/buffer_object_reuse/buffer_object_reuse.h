// buffer_object_reuse: weights become STATIC BOs written once at load (one per
// weight and layer, shared by every launch that reads it); a value produced and
// consumed on the device gets one INTERMEDIATE BO (never synced, never read back);
// only what the host produces is written per run (WRITE) and only what a host step
// needs is read back (OUTPUT). docs/architecture.md s.5.
#ifndef DK_OPTIMIZATIONS_BUFFER_OBJECT_REUSE_BUFFER_OBJECT_REUSE_H_
#define DK_OPTIMIZATIONS_BUFFER_OBJECT_REUSE_BUFFER_OBJECT_REUSE_H_

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "optimizations/common/pass_result.h"
#include "registry/registry.pb.h"

namespace dk::opt::buffer_object_reuse {

inline constexpr char kName[] = "buffer_object_reuse";

// Returns whether the program changed and what (or why not), for the lineage.
absl::StatusOr<PassResult> Run(elf::Program& program, const registry::TargetConstraints& target);

}  // namespace dk::opt::buffer_object_reuse

#endif  // DK_OPTIMIZATIONS_BUFFER_OBJECT_REUSE_BUFFER_OBJECT_REUSE_H_
