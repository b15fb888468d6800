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
        "the goldens ", setup.goldens_name, " (reference: ", goldens.Reference(), ") were recorded with weights ",
        goldens.weights_digest,
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

namespace {

// Opens `program` on the CPU backend with the setup's options.
absl::StatusOr<std::unique_ptr<runtime::CpuSession>> OpenSession(const GateSetup& setup,
                                                                  const elf::Program& program,
                                                                  const std::string& elf_name) {
  DK_RETURN_IF_ERROR(CheckGoldens(setup));
  runtime::SessionOptions options;
  options.validate = setup.validate;
  options.cpu = setup.cpu;
  options.pool = setup.pool;
  options.prefill_rows = setup.prefill_rows;
  options.wrap_host = setup.wrap_host;
  return runtime::CpuSession::Open(program, elf_name, setup.weights, options);
}

std::vector<GoldenPrompt> Prompts(const GateSetup& setup) {
  return std::vector<GoldenPrompt>(setup.goldens->prompts.begin(),
                                   setup.goldens->prompts.begin() + setup.prompts);
}

}  // namespace

absl::StatusOr<std::vector<Sequence>> RunGoldenPrompts(const GateSetup& setup,
                                                       const elf::Program& program,
                                                       const std::string& elf_name) {
  DK_ASSIGN_OR_RETURN(auto session, OpenSession(setup, program, elf_name));
  return RunGreedy(session->decoder(), Prompts(setup), setup.goldens->new_tokens);
}

absl::StatusOr<StageGate> RunStageGate(const GateSetup& setup, const elf::Program& program,
                                       const std::string& elf_name, const std::string& name,
                                       const StageGate* parent, const std::vector<Sequence>* greedy) {
  if (!setup.greedy && !setup.numeric) {
    return absl::InvalidArgumentError("the gate needs the greedy run, the numeric run, or both");
  }
  if (!setup.greedy && parent != nullptr) {
    return absl::InvalidArgumentError("the parent's tokens are compared on the greedy run only");
  }
  if (greedy != nullptr && (!setup.greedy || static_cast<int>(greedy->size()) != setup.prompts)) {
    return absl::InvalidArgumentError(absl::StrCat("a recorded greedy run needs setup.greedy and ", setup.prompts,
                                                   " sequences (it has ", greedy->size(), ")"));
  }
  DK_RETURN_IF_ERROR(CheckGoldens(setup));
  StageGate stage;
  stage.name = name;
  const int tokens = setup.goldens->new_tokens;
  const std::vector<GoldenPrompt> prompts = Prompts(setup);
  // The session (its weights packed for the program) only when something runs.
  std::unique_ptr<runtime::CpuSession> session;
  if (setup.numeric || (setup.greedy && greedy == nullptr)) {
    DK_ASSIGN_OR_RETURN(session, OpenSession(setup, program, elf_name));
  }
  if (greedy != nullptr) {
    stage.sequences = *greedy;
  } else if (setup.greedy) {
    DK_ASSIGN_OR_RETURN(stage.sequences, RunGreedy(session->decoder(), prompts, tokens));
  }
  if (setup.numeric) {
    ForcedLogits logits;
    for (const GoldenPrompt& prompt : prompts) {
      DK_ASSIGN_OR_RETURN(ForcedRun run, RunTeacherForced(session->decoder(), prompt, tokens));
      logits.push_back(std::move(run.logits));
      // Without the greedy run, the forced run's choices stand in for it: identical
      // up to the first divergence, where the top-5 gate stops (runner.h).
      if (!setup.greedy) stage.sequences.push_back(std::move(run.sequence));
    }
    DK_ASSIGN_OR_RETURN(stage.numeric, CheckNumeric(setup.goldens->Sequences(setup.prompts), logits,
                                                    program.model().n_layers(), tokens));
  }
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
