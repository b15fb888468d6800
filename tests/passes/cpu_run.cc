#include "tests/passes/cpu_run.h"

#include "util/status.h"
#include "weights/weights.h"

namespace dk::passes_test {

absl::StatusOr<std::unique_ptr<runtime::CpuSession>> OpenValidating(
    const elf::Program& program, const std::string& elf_name, std::shared_ptr<const weights::Weights> w) {
  if (w == nullptr) {
    DK_ASSIGN_OR_RETURN(weights::Weights synthetic, weights::MakeSyntheticWeights(program.model(), 1));
    w = std::make_shared<const weights::Weights>(std::move(synthetic));
  }
  runtime::SessionOptions options;
  options.validate = true;
  return runtime::CpuSession::Open(program, elf_name, w, options);
}

absl::StatusOr<std::vector<std::vector<float>>> CpuLogits(const elf::Program& program,
                                                          const std::vector<uint32_t>& tokens,
                                                          std::shared_ptr<const weights::Weights> w) {
  DK_ASSIGN_OR_RETURN(auto session, OpenValidating(program, "tiny.elf", std::move(w)));
  return SessionLogits(*session, program, tokens);
}

absl::StatusOr<std::vector<std::vector<float>>> SessionLogits(runtime::CpuSession& session,
                                                              const elf::Program& program,
                                                              const std::vector<uint32_t>& tokens) {
  std::vector<std::vector<float>> out;
  for (uint32_t token : tokens) {
    DK_RETURN_IF_ERROR(session.decoder().Step(token).status());
    const float* logits = session.decoder().logits();
    out.emplace_back(logits, logits + program.model().vocab());
  }
  return out;
}

}  // namespace dk::passes_test
