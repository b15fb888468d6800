#include "tools/elfc/baseline.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "elf/elf.h"
#include "registry/registry.h"

namespace dk::elfc {
namespace {

using elf::BufferObject;
using elf::DType;
using elf::Program;


// Builds the program one launch at a time.
class Builder {
 public:
  explicit Builder(const elf::ModelShape& m) : m_(m) {
    p_.set_schema_version(elf::kSchemaVersion);
    *p_.mutable_model() = m;
  }

  void Value(const std::string& name, std::vector<int64_t> shape, DType dtype = elf::BF16) {
    auto* v = p_.add_values();
    v->set_name(name);
    for (int64_t d : shape) v->add_shape(d);
    v->set_dtype(dtype);
    shapes_[name] = {std::move(shape), dtype};
  }

  // One launch in its own group. `inputs` / `outputs`: param -> host value;
  // `weights`: param -> (tensor, shape).
  struct WeightRef {
    std::string param, tensor;
    std::vector<int64_t> shape;
  };
  void Launch(const std::string& group, int layer, const std::string& symbol,
              const std::vector<std::pair<std::string, std::string>>& inputs,
              const std::vector<WeightRef>& weights,
              const std::vector<std::pair<std::string, std::string>>& outputs,
              const std::vector<std::pair<std::string, int64_t>>& params) {
    auto* g = p_.add_steps()->mutable_group();
    g->set_name(group);
    g->set_entry_symbol(absl::StrReplaceAll(group, {{".", "_"}}));
    g->set_layer(layer);
    auto* l = g->add_launches();
    l->set_kernel_symbol(symbol);
    for (const auto& [param, value] : inputs) {
      Bind(l, group, layer, param, ActivationBo(group, param, value, elf::WRITE, layer));
    }
    for (const WeightRef& w : weights) {
      BufferObject* bo = NewBo(absl::StrCat(group, ".", w.param), w.shape, elf::BF16, elf::WRITE, layer);
      bo->set_weight_tensor(w.tensor);
      Bind(l, group, layer, w.param, bo->name());
    }
    for (const auto& [param, value] : outputs) {
      Bind(l, group, layer, param, ActivationBo(group, param, value, elf::OUTPUT, layer));
    }
    for (const auto& [k, v] : params) (*l->mutable_params())[k] = v;
  }

  void Host(const std::string& kind, int layer,
            const std::vector<std::pair<std::string, std::string>>& bindings,
            const std::vector<std::pair<std::string, int64_t>>& params = {}) {
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

  Program Finish() {
    auto* l = p_.add_lineage();
    l->set_pass("baseline");
    l->set_target("cpu");
    l->set_applied(true);
    l->set_reason(absl::StrCat("straight port: ", groups(), " launch groups per token, every BO "
                               "written before / read after every run"));
    return std::move(p_);
  }

  int groups() const {
    int n = 0;
    for (const auto& s : p_.steps()) n += s.has_group();
    return n;
  }

 private:
  BufferObject* NewBo(const std::string& name, const std::vector<int64_t>& shape, DType dtype,
                      elf::BoCategory category, int layer) {
    BufferObject* bo = p_.add_bos();
    bo->set_name(name);
    for (int64_t d : shape) bo->add_shape(d);
    bo->set_dtype(dtype);
    bo->set_category(category);
    bo->set_layer(layer);
    bo->set_size_bytes(elf::BoBytes(*bo).value_or(0));  // ValidateProgram checks it at the end
    return bo;
  }
  std::string ActivationBo(const std::string& group, const std::string& param,
                           const std::string& value, elf::BoCategory category, int layer) {
    const auto& [shape, dtype] = shapes_.at(value);
    BufferObject* bo = NewBo(absl::StrCat(group, ".", param), shape, dtype, category, layer);
    bo->set_host_value(value);
    return bo->name();
  }
  static void Bind(elf::Launch* l, const std::string&, int, const std::string& param,
                   const std::string& bo) {
    auto* b = l->add_bindings();
    b->set_param(param);
    b->set_bo(bo);
  }

  const elf::ModelShape& m_;
  Program p_;
  std::map<std::string, std::pair<std::vector<int64_t>, DType>> shapes_;
};

std::string GemvSymbol(int64_t k) {
  auto v = registry::SelectVariant("gemv", registry::kRowMajor, k);
  return v.ok() ? (*v)->symbol() : "dk_gemv_bf16_rowmajor";
}

}  // namespace

absl::Status ValidateModelShape(const elf::ModelShape& m) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("model \"", m.name(), "\": ", parts...));
  };
  if (m.n_layers() <= 0 || m.hidden() <= 0 || m.n_heads() <= 0 || m.n_kv_heads() <= 0 ||
      m.head_dim() <= 0 || m.ffn() <= 0 || m.vocab() <= 0 || m.max_context() <= 0) {
    return bad("every size (n_layers, hidden, n_heads, n_kv_heads, head_dim, ffn, vocab, "
               "max_context) must be positive");
  }
  if (m.n_heads() % m.n_kv_heads() != 0) {
    return bad("n_heads ", m.n_heads(), " is not a multiple of n_kv_heads ", m.n_kv_heads());
  }
  if (m.head_dim() % 2 != 0) return bad("head_dim ", m.head_dim(), " must be even for RoPE");
  if (!(m.rms_eps() > 0)) return bad("rms_eps must be > 0");
  if (!(m.rope_theta() > 0)) return bad("rope_theta must be > 0");
  if (!m.rope_scaling().type().empty() && m.rope_scaling().type() != "llama3") {
    return bad("unsupported rope_scaling type \"", m.rope_scaling().type(), "\"");
  }
  return absl::OkStatus();
}

absl::StatusOr<Program> BuildBaseline(const elf::ModelShape& m) {
  if (auto s = ValidateModelShape(m); !s.ok()) return s;
  Builder b(m);
  const int64_t hidden = m.hidden(), q_dim = int64_t{m.n_heads()} * m.head_dim(),
                kv_dim = int64_t{m.n_kv_heads()} * m.head_dim(), ffn = m.ffn(),
                half = m.head_dim() / 2;
  b.Value("h0", {hidden});
  b.Value("rope.cos", {half});
  b.Value("rope.sin", {half});
  b.Host("embedding", -1, {{"out", "h0"}});
  b.Host("rope_lookup", -1, {{"cos", "rope.cos"}, {"sin", "rope.sin"}});

  std::string h_in = "h0";
  for (int i = 0; i < m.n_layers(); ++i) {
    const std::string L = absl::StrCat("L", i, ".");
    const std::string W = absl::StrCat("model.layers.", i, ".");
    for (const char* v : {"xn", "attn", "o", "h_mid", "xn2", "down", "h_out"}) b.Value(L + v, {hidden});
    for (const char* v : {"q", "q_rot"}) b.Value(L + v, {q_dim});
    for (const char* v : {"k", "k_rot", "v"}) b.Value(L + v, {kv_dim});
    for (const char* v : {"gate", "up", "act"}) b.Value(L + v, {ffn});

    auto norm = [&](const char* group, const std::string& in, const char* weight,
                    const std::string& out) {
      b.Launch(L + group, i, "dk_rmsnorm_bf16", {{"x", in}}, {{"w", W + weight, {hidden}}},
               {{"y", out}}, {{"n", hidden}});
    };
    auto gemv = [&](const char* group, const std::string& in, const char* weight, int64_t rows,
                    int64_t cols, const std::string& out) {
      b.Launch(L + group, i, GemvSymbol(cols), {{"x", in}}, {{"w", W + weight, {rows, cols}}},
               {{"y", out}}, {{"rows", rows}, {"cols", cols}});
    };
    auto rope = [&](const char* group, const std::string& in, int64_t heads, const std::string& out) {
      b.Launch(L + group, i, "dk_rope_halfsplit_bf16",
               {{"x", in}, {"cos", "rope.cos"}, {"sin", "rope.sin"}}, {}, {{"y", out}},
               {{"heads", heads}, {"head_dim", m.head_dim()}});
    };
    auto add = [&](const char* group, const std::string& a, const std::string& c,
                   const std::string& out) {
      b.Launch(L + group, i, "dk_add_bf16", {{"a", a}, {"b", c}}, {}, {{"y", out}}, {{"n", hidden}});
    };

    norm("attn_norm", h_in, "input_layernorm.weight", L + "xn");
    gemv("q_proj", L + "xn", "self_attn.q_proj.weight", q_dim, hidden, L + "q");
    gemv("k_proj", L + "xn", "self_attn.k_proj.weight", kv_dim, hidden, L + "k");
    gemv("v_proj", L + "xn", "self_attn.v_proj.weight", kv_dim, hidden, L + "v");
    rope("rope_q", L + "q", m.n_heads(), L + "q_rot");
    rope("rope_k", L + "k", m.n_kv_heads(), L + "k_rot");
    b.Host("kv_write", i, {{"k", L + "k_rot"}, {"v", L + "v"}});
    b.Host("attention", i, {{"q", L + "q_rot"}, {"out", L + "attn"}});
    gemv("o_proj", L + "attn", "self_attn.o_proj.weight", hidden, q_dim, L + "o");
    add("attn_add", h_in, L + "o", L + "h_mid");
    norm("ffn_norm", L + "h_mid", "post_attention_layernorm.weight", L + "xn2");
    gemv("gate_proj", L + "xn2", "mlp.gate_proj.weight", ffn, hidden, L + "gate");
    gemv("up_proj", L + "xn2", "mlp.up_proj.weight", ffn, hidden, L + "up");
    b.Launch(L + "silu_mul", i, "dk_silu_mul_bf16", {{"gate", L + "gate"}, {"up", L + "up"}}, {},
             {{"y", L + "act"}}, {{"n", ffn}});
    gemv("down_proj", L + "act", "mlp.down_proj.weight", hidden, ffn, L + "down");
    add("ffn_add", L + "h_mid", L + "down", L + "h_out");
    h_in = L + "h_out";
  }
  b.Value("final.xn", {hidden});
  b.Value("logits", {m.vocab()}, elf::F32);
  b.Launch("final_norm", -1, "dk_rmsnorm_bf16", {{"x", h_in}}, {{"w", "model.norm.weight", {hidden}}},
           {{"y", "final.xn"}}, {{"n", hidden}});
  const std::string head = m.tied_embeddings() ? "model.embed_tokens.weight" : "lm_head.weight";
  b.Launch("lm_head", -1, GemvSymbol(hidden), {{"x", "final.xn"}}, {{"w", head, {m.vocab(), hidden}}},
           {{"y", "logits"}}, {{"rows", m.vocab()}, {"cols", hidden}});
  b.Host("topk", -1, {{"logits", "logits"}}, {{"k", 5}});
  Program p = b.Finish();
  if (auto s = elf::ValidateProgram(p); !s.ok()) {
    return absl::InternalError(absl::StrCat("baseline builder produced an invalid program: ", s.message()));
  }
  return p;
}

}  // namespace dk::elfc
