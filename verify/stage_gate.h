// The verify gate of one stage of a decode chain, written once for the verify tool
// and the profile: the weights digest checked against the goldens', the stage's
// greedy run over the first N golden prompts on the CPU backend, the top-5 gate
// (gate.h) against the goldens, the numeric check (numeric.h: a teacher-forced run,
// its logits at the goldens' top-5 ids within a bf16 tolerance), and, when the stage
// has a parent, the check that it generates exactly the parent's tokens. The verify
// test needs all three; the profile's revert decision reads the top-5 gate (and the
// parent's tokens) only, and records the numeric result beside it.
//
//   verify::GateSetup setup{weights, weights->Digest(), &goldens, goldens_path, 2};
//   DK_RETURN_IF_ERROR(verify::CheckGoldens(setup));  // once, before any stage
//   DK_ASSIGN_OR_RETURN(verify::StageGate parent,
//                       verify::RunStageGate(setup, p0, "decode.elf", "decode"));
//   DK_ASSIGN_OR_RETURN(verify::StageGate child,
//                       verify::RunStageGate(setup, p1, "decode_opt.elf", "decode_opt", &parent));
//   child.passed();  // child.gate, child.numeric and child.exact hold what the reports print
//
// Errors (unreadable data, a run that fails, weights that are not the goldens') are
// statuses; a gate that does not pass is a result. Thread-safety: one caller at a time
// per setup.pool (null: each session runs on a pool of its own).
#ifndef DK_VERIFY_STAGE_GATE_H_
#define DK_VERIFY_STAGE_GATE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "verify/gate.h"
#include "verify/goldens.h"
#include "verify/numeric.h"
#include "runtime/cpu/session.h"
#include "util/thread_pool.h"
#include "weights/weights.h"

namespace dk::verify {

// What every stage of one gate run shares.
struct GateSetup {
  std::shared_ptr<const weights::Weights> weights;
  std::string weights_digest;  // weights->Digest(), computed once (it hashes every tensor)
  const Goldens* goldens = nullptr;
  std::string goldens_name;    // the goldens' path, for messages
  int prompts = 2;             // the goldens' first N prompts
  bool validate = true;        // check the BO protocol while running
  runtime::CpuDeviceOptions cpu;  // how the sessions' devices run (tools' runtime flags)
  ThreadPool* pool = nullptr;  // the sessions' threads (SessionOptions::pool; null: each its own)
  int prefill_rows = 0;  // the prompt chunk (SessionOptions; 0: the default)
  DecodeFn decode;             // ids -> text in the reports (null: the ids)
  bool numeric = true;         // also run the numeric check (a second, teacher-forced run)
  bool greedy = true;          // run the greedy top-5 gate; false: numeric only (no parent)
  // Test only (tests/mutations): wraps the CPU host ops of every session the gate opens.
  runtime::HostOpsWrapper wrap_host;
};

// OK when the goldens were recorded with these weights (same digest) and have at
// least setup.prompts >= 1 prompts; else InvalidArgument saying which.
absl::Status CheckGoldens(const GateSetup& setup);

// One stage's gate: its greedy tokens and the reports on them.
struct StageGate {
  std::string name;                 // the stage, as the reports label it
  std::vector<Sequence> sequences;  // greedy run over the prompts, goldens->new_tokens each
  GateReport gate;                  // top-5 agreement with the goldens (when setup.greedy)
  std::optional<NumericReport> numeric;  // teacher-forced logits (when setup.numeric)
  std::optional<ExactReport> exact; // same tokens as the parent (when one was given)

  bool gate_passed() const { return gate.passed; }
  bool numeric_passed() const { return !numeric || numeric->passed; }
  // What the verify test requires: the top-5 gate, the numeric check, the parent's tokens.
  bool passed() const { return gate.passed && numeric_passed() && (!exact || exact->same); }
  bool same_as_parent() const { return !exact || exact->same; }
};

// The greedy run of `program` (named `elf_name` in messages) over the prompts.
absl::StatusOr<std::vector<Sequence>> RunGoldenPrompts(const GateSetup& setup,
                                                       const elf::Program& program,
                                                       const std::string& elf_name);

// CheckGoldens, RunGoldenPrompts, the top-5 gate, and with `parent` (an earlier
// StageGate over the same setup) the exact comparison with its tokens. `name` labels
// the stage in the reports; `elf_name` names the ELF in run errors. `greedy`: this
// program's greedy run, made earlier over the same setup (greedy_tokens.h, which
// checks that); it stands for RunGoldenPrompts, which then does not run.
absl::StatusOr<StageGate> RunStageGate(const GateSetup& setup, const elf::Program& program,
                                       const std::string& elf_name, const std::string& name,
                                       const StageGate* parent = nullptr,
                                       const std::vector<Sequence>* greedy = nullptr);

}  // namespace dk::verify

#endif  // DK_VERIFY_STAGE_GATE_H_
