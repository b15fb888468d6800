// Test helpers for the optimization passes: a tiny Llama model, the passes by
// name, the golden cases (text protos of a pass's output, checked in under
// optimizations/<pass>/testdata/ and rewritten by `bazel run
// //optimizations:update_goldens`). Runs on the CPU device are in tests/passes/
// (nothing under optimizations/ depends on the runtime).
// Thread-safety: stateless functions.
#ifndef DK_OPTIMIZATIONS_TESTING_TINY_H_
#define DK_OPTIMIZATIONS_TESTING_TINY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"

namespace dk::opt::testing {

// 1 layer (by default), hidden 64, 4 heads, 2 KV heads, head_dim 16, FFN 96,
// vocab 300, tied embeddings.
elf::ModelShape TinyShape(int n_layers = 1);

// The LM-head partition the tests use: vocab 300 > 128 rows, so layout_alignment
// splits the LM head (into 3 partitions of 104, 104 and 92 rows).
inline constexpr int64_t kTinyPartitionRows = 128;

// Runs pass `name` of the pass table (optimizations/passes.h) on `target` ("cpu",
// "npu2") with the table's default options, except an LM-head partition of
// `partition_rows` rows (option lm_head_partition_rows, for the passes that have it).
absl::StatusOr<bool> RunPass(const std::string& name, elf::Program& program,
                             const std::string& target = "cpu",
                             int64_t partition_rows = kTinyPartitionRows);

// BuildBaseline(shape), then every pass of `chain` in order; an error if a pass
// fails or if its output does not pass ValidateProgram.
absl::StatusOr<elf::Program> BuildChain(const elf::ModelShape& shape,
                                        const std::vector<std::string>& chain,
                                        const std::string& target = "cpu",
                                        int64_t partition_rows = kTinyPartitionRows);

// A golden: the text proto of the tiny model's program after `chain` (cpu).
// GoldenCases: every pass of the table on the baseline ("baseline"), and the
// passes after the ones the models' chain runs before them.
struct GoldenCase {
  std::string pass;                // the folder: optimizations/<pass>/testdata/
  std::string name;                // <name>.after.textproto
  std::vector<std::string> chain;  // passes applied to the baseline; the last is `pass`
};
std::vector<GoldenCase> GoldenCases();
// "optimizations/<pass>/testdata/<name>.after.textproto" (workspace-relative).
std::string GoldenPath(const GoldenCase& c);
// The golden file's expected contents: a header comment and the program as text.
absl::StatusOr<std::string> RenderGolden(const GoldenCase& c);

// OK if the checked-in golden (read from the runfiles: a test's `data`) equals
// RenderGolden(c); else an error naming the first differing line and the command
// that rewrites the goldens.
absl::Status CheckGolden(const GoldenCase& c);

// The cases of `pass` (for the pass's own test).
std::vector<GoldenCase> GoldenCasesOf(const std::string& pass);

// Field-by-field differences, "" if equal (map order does not matter, unlike in
// serialized bytes).
std::string ProgramDiff(const elf::Program& a, const elf::Program& b);

// Count of BOs per category name ("STATIC" -> 9, ...).
std::map<std::string, int> CategoryCounts(const elf::Program& program);

}  // namespace dk::opt::testing

#endif  // DK_OPTIMIZATIONS_TESTING_TINY_H_
