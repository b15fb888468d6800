#include "verify/stage_gate.h"

#include "absl/strings/str_cat.h"
#include "runtime/cpu/session.h"
#include "util/status.h"
#include "verify/runner.h"

namespace dk::verify {

absl::Status CheckGoldens(const GateSetup& setup) {
  if (setup.goldens == nullptr || setup.weights == nullptr) {
    return absl::InvalidArgumentError("the gate needs goldens and weights");
  }
  const Goldens& goldens = *setup.goldens;
  if (setup.weights_digest != goldens.weights_digest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the goldens ", setup.goldens_name, " were recorded with weights ", goldens.weights_digest,
        " but this run uses ", setup.weights->source(), " = ", setup.weights_digest,
        "; goldens from other weights are meaningless: regenerate them with tools/hf_reference "
        "or run with the weights they were made from"));
  }
  if (setup.prompts <= 0 || setup.prompts > static_cast<int>(goldens.prompts.size())) {
    return absl::InvalidArgumentError(absl::StrCat("the gate asks for ", setup.prompts,
                                                   " prompts but the goldens ", setup.goldens_name,
                                                   " have ", goldens.prompts.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Sequence>> RunGoldenPrompts(const GateSetup& setup,
                                                       const elf::Program& program,
                                                       const std::string& elf_name) {
  DK_RETURN_IF_ERROR(CheckGoldens(setup));
  runtime::SessionOptions options;
  options.validate = setup.validate;
  DK_ASSIGN_OR_RETURN(auto session,
                      runtime::CpuSession::Open(program, elf_name, setup.weights, options));
  const std::vector<GoldenPrompt> prompts(setup.goldens->prompts.begin(),
                                          setup.goldens->prompts.begin() + setup.prompts);
  return RunGreedy(session->decoder(), prompts, setup.goldens->new_tokens);
}

absl::StatusOr<StageGate> RunStageGate(const GateSetup& setup, const elf::Program& program,
                                       const std::string& elf_name, const std::string& name,
                                       const StageGate* parent) {
  StageGate stage;
  stage.name = name;
  DK_ASSIGN_OR_RETURN(stage.sequences, RunGoldenPrompts(setup, program, elf_name));
  const int tokens = setup.goldens->new_tokens;
  GateOptions gate_options;
  gate_options.num_tokens = tokens;
  DK_ASSIGN_OR_RETURN(stage.gate, CheckLogprobsClose(setup.goldens->Sequences(setup.prompts),
                                                     stage.sequences, setup.decode, gate_options));
  if (parent != nullptr) {
    DK_ASSIGN_OR_RETURN(stage.exact, CompareExact(parent->sequences, stage.sequences, setup.decode,
                                                  tokens, parent->name, name));
  }
  return stage;
}

}  // namespace dk::verify
