// The passes' output run on the CPU device: the tiny model's programs
// (optimizations/testing/tiny.h) decoded with BO validation on and synthetic
// weights (seed 1). These helpers live here, not in optimizations/testing, because
// no package under optimizations/ depends on the runtime.
// Thread-safety: stateless functions.
#ifndef DK_TESTS_PASSES_CPU_RUN_H_
#define DK_TESTS_PASSES_CPU_RUN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "runtime/cpu/session.h"
#include "weights/weights.h"

namespace dk::passes_test {

// A CPU session on `program` (named `elf_name` in errors) with BO validation on
// and `weights` (nullptr: synthetic weights, seed 1).
absl::StatusOr<std::unique_ptr<runtime::CpuSession>> OpenValidating(
    const elf::Program& program, const std::string& elf_name,
    std::shared_ptr<const weights::Weights> weights = nullptr);

// Decodes `tokens` (fed one by one, greedy choices ignored) in `session` (on
// `program`); returns the f32 logits after each token.
absl::StatusOr<std::vector<std::vector<float>>> SessionLogits(runtime::CpuSession& session,
                                                              const elf::Program& program,
                                                              const std::vector<uint32_t>& tokens);

// SessionLogits in a fresh OpenValidating session.
absl::StatusOr<std::vector<std::vector<float>>> CpuLogits(
    const elf::Program& program, const std::vector<uint32_t>& tokens,
    std::shared_ptr<const weights::Weights> weights = nullptr);

}  // namespace dk::passes_test

#endif  // DK_TESTS_PASSES_CPU_RUN_H_
