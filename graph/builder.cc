#include "graph/builder.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "elf/elf.h"

namespace dk::graph {

ProgramBuilder::ProgramBuilder(const elf::ModelShape& model) {
  p_.set_schema_version(elf::kSchemaVersion);
  *p_.mutable_model() = model;
}

void ProgramBuilder::Value(const std::string& name, std::vector<int64_t> shape, elf::DType dtype) {
  auto* v = p_.add_values();
  v->set_name(name);
  for (int64_t d : shape) v->add_shape(d);
  v->set_dtype(dtype);
  values_[name] = {std::move(shape), dtype};
}

void ProgramBuilder::Launch(const std::string& group, int layer, const std::string& symbol,
                            const Bindings& inputs, const std::vector<Weight>& weights,
                            const Bindings& outputs, const Params& params) {
  auto* g = p_.add_steps()->mutable_group();
  g->set_name(group);
  g->set_entry_symbol(absl::StrReplaceAll(group, {{".", "_"}}));
  g->set_layer(layer);
  elf::Launch& l = *g->add_launches();
  l.set_kernel_symbol(symbol);
  for (const auto& [param, value] : inputs) {
    Bind(l, param, ActivationBo(group, param, value, elf::WRITE, layer));
  }
  for (const Weight& w : weights) {
    elf::BufferObject* bo = NewBo(absl::StrCat(group, ".", w.param), w.shape, elf::BF16, elf::WRITE, layer);
    bo->set_weight_tensor(w.tensor);
    Bind(l, w.param, bo->name());
  }
  for (const auto& [param, value] : outputs) {
    Bind(l, param, ActivationBo(group, param, value, elf::OUTPUT, layer));
  }
  for (const auto& [k, v] : params) (*l.mutable_params())[k] = v;
}

void ProgramBuilder::Host(elf::HostStep::Kind kind, int layer, const Bindings& bindings,
                          const Params& params) {
  auto* h = p_.add_steps()->mutable_host();
  h->set_kind(kind);
  h->set_layer(layer);
  for (const auto& [param, value] : bindings) {
    auto* b = h->add_bindings();
    b->set_param(param);
    b->set_value(value);
  }
  for (const auto& [k, v] : params) (*h->mutable_params())[k] = v;
}

absl::StatusOr<elf::Program> ProgramBuilder::Finish() && {
  auto* l = p_.add_lineage();
  l->set_pass("baseline");
  l->set_target("cpu");
  l->set_applied(true);
  l->set_reason(absl::StrCat("straight port: ", Groups(), " launch groups per token, every BO "
                             "written before / read after every run"));
  if (auto s = elf::ValidateProgram(p_); !s.ok()) {
    return absl::InternalError(absl::StrCat("baseline builder produced an invalid program: ", s.message()));
  }
  return std::move(p_);
}

elf::BufferObject* ProgramBuilder::NewBo(const std::string& name, const std::vector<int64_t>& shape,
                                         elf::DType dtype, elf::BoCategory category, int layer) {
  elf::BufferObject* bo = p_.add_bos();
  bo->set_name(name);
  for (int64_t d : shape) bo->add_shape(d);
  bo->set_dtype(dtype);
  bo->set_category(category);
  bo->set_layer(layer);
  bo->set_size_bytes(elf::BoBytes(*bo).value_or(0));  // Finish's ValidateProgram checks it
  return bo;
}

std::string ProgramBuilder::ActivationBo(const std::string& group, const std::string& param,
                                         const std::string& value, elf::BoCategory category, int layer) {
  const auto& [shape, dtype] = values_.at(value);
  elf::BufferObject* bo = NewBo(absl::StrCat(group, ".", param), shape, dtype, category, layer);
  bo->set_host_value(value);
  return bo->name();
}

void ProgramBuilder::Bind(elf::Launch& launch, const std::string& param, const std::string& bo) {
  auto* b = launch.add_bindings();
  b->set_param(param);
  b->set_bo(bo);
}

int ProgramBuilder::Groups() const {
  int n = 0;
  for (const auto& s : p_.steps()) n += s.has_group();
  return n;
}

}  // namespace dk::graph
