// A decode stage's program and the weights it runs on, read from the test's runfiles:
// the end-to-end tests that open CPU sessions of one stage with several options.
#ifndef DK_TESTS_E2E_STAGE_MODEL_H_
#define DK_TESTS_E2E_STAGE_MODEL_H_

#include <memory>
#include <string>

#include "elf/elf.h"
#include "gtest/gtest.h"
#include "runtime/cpu/session.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace dk::e2e {

// A runfiles path (e.g. "smollm2_135m/model.gguf") as a file path.
inline std::string RunfilePath(const std::string& rel) {
  static std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest());
  return runfiles->Rlocation(rel);
}

struct StageModel {
  elf::Program program;
  std::shared_ptr<const weights::Weights> weights;
};

// The ELF's program and the weights (runfiles paths); a failure is a test failure,
// and leaves the model empty.
inline StageModel LoadStage(const std::string& elf, const std::string& weights) {
  StageModel m;
  auto program = elf::ReadElfFile(RunfilePath(elf));
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return m;
  m.program = *program;
  auto w = runtime::LoadWeightsSpec(RunfilePath(weights), m.program.model());
  EXPECT_TRUE(w.ok()) << w.status();
  if (w.ok()) m.weights = *w;
  return m;
}

}  // namespace dk::e2e

#endif  // DK_TESTS_E2E_STAGE_MODEL_H_
