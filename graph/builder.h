// ProgramBuilder: assembles a baseline decode program one step at a time, in
// execution order. It knows the ELF schema's bookkeeping (BOs, bindings, sizes,
// lineage), nothing about any model: the model graph (baseline.cc) says which
// values, launches and host steps there are.
//  * Value() declares a host value (SSA: produced once per token);
//  * Launch() adds one kernel launch in a launch group of its own: every input
//    and weight gets a WRITE BO, every output an OUTPUT BO, named
//    "<group>.<param>";
//  * Host() adds a host step binding host values.
// Thread-safety: none (one builder per program).
#ifndef DK_GRAPH_BUILDER_H_
#define DK_GRAPH_BUILDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"

namespace dk::graph {

class ProgramBuilder {
 public:
  // kernel param -> host value (launch inputs and outputs, host step bindings).
  using Bindings = std::vector<std::pair<std::string, std::string>>;
  // kernel or host step param -> value ("rows" -> 2048).
  using Params = std::vector<std::pair<std::string, int64_t>>;
  // A weight a launch reads: kernel param, checkpoint tensor, shape.
  struct Weight {
    std::string param, tensor;
    std::vector<int64_t> shape;
  };

  explicit ProgramBuilder(const elf::ModelShape& model);

  // Declares host value `name`; a launch or host step may bind it afterwards.
  void Value(const std::string& name, std::vector<int64_t> shape, elf::DType dtype = elf::BF16);

  // Kernel `symbol` in launch group `group` (entry symbol: `group` with '.' ->
  // '_'); `layer` -1 for model-wide groups. Every value named must be declared.
  void Launch(const std::string& group, int layer, const std::string& symbol, const Bindings& inputs,
              const std::vector<Weight>& weights, const Bindings& outputs, const Params& params);

  // Host step `kind`.
  void Host(elf::HostStep::Kind kind, int layer, const Bindings& bindings, const Params& params = {});

  // The program with its lineage record ("baseline" on cpu); InternalError if it
  // does not pass elf::ValidateProgram (a bug in the graph, not in the input).
  absl::StatusOr<elf::Program> Finish() &&;

 private:
  elf::BufferObject* NewBo(const std::string& name, const std::vector<int64_t>& shape,
                           elf::DType dtype, elf::BoCategory category, int layer);
  // A BO mirroring host value `value`.
  std::string ActivationBo(const std::string& group, const std::string& param, const std::string& value,
                           elf::BoCategory category, int layer);
  static void Bind(elf::Launch& launch, const std::string& param, const std::string& bo);
  int Groups() const;

  elf::Program p_;
  std::map<std::string, std::pair<std::vector<int64_t>, elf::DType>> values_;  // name -> shape, dtype
};

}  // namespace dk::graph

#endif  // DK_GRAPH_BUILDER_H_
