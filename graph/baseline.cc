#include "graph/baseline.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "graph/builder.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::graph {
namespace {

// The sizes every block reads.
struct Dims {
  explicit Dims(const elf::ModelShape& m)
      : hidden(m.hidden()),
        q(int64_t{m.n_heads()} * m.head_dim()),
        kv(int64_t{m.n_kv_heads()} * m.head_dim()),
        ffn(m.ffn()),
        half(m.head_dim() / 2) {}
  int64_t hidden, q, kv, ffn, half;
};

// The row-major GEMV variant for K = `cols` (the registry specializes some K).
std::string GemvSymbol(int64_t cols) {
  auto v = registry::SelectVariant("gemv", registry::kRowMajor, cols);
  return v.ok() ? (*v)->symbol() : "dk_gemv_bf16_rowmajor";
}


// The kernels of the graph. Each op is one launch in a group of its own, named
// `prefix` + op, at `layer`; values and weight tensors are named in full.
class Ops {
 public:
  Ops(ProgramBuilder& b, const elf::ModelShape& m, int layer, std::string prefix)
      : b_(b), m_(m), d_(m), layer_(layer), prefix_(std::move(prefix)) {}

  void Norm(const char* op, const std::string& x, const std::string& weight, const std::string& y) {
    b_.Launch(prefix_ + op, layer_, m_.norm_plus_one() ? "dk_rmsnorm_plus1_bf16" : "dk_rmsnorm_bf16",
              {{"x", x}}, {{"w", weight, {d_.hidden}}}, {{"y", y}}, {{"n", d_.hidden}});
  }
  void Gemv(const char* op, const std::string& x, const std::string& weight, int64_t rows, int64_t cols,
            const std::string& y) {
    b_.Launch(prefix_ + op, layer_, GemvSymbol(cols), {{"x", x}}, {{"w", weight, {rows, cols}}},
              {{"y", y}}, {{"rows", rows}, {"cols", cols}});
  }
  // y = bf16(x + bias), x the f32 output of the GEMV before it: torch's
  // addmm rounds W x + b once.
  void BiasAdd(const char* op, const std::string& x, const std::string& bias, int64_t n,
               const std::string& y) {
    b_.Launch(prefix_ + op, layer_, "dk_bias_add_f32_bf16", {{"x", x}}, {{"bias", bias, {n}}},
              {{"y", y}}, {{"n", n}});
  }
  // A q/k/v projection, with its bias (into an f32 value `y` + "_acc") when the model has one.
  void Projection(const char* op, const char* bias_op, const std::string& x, const std::string& weight,
                  int64_t rows, const std::string& y) {
    if (!m_.attention_bias()) return Gemv(op, x, weight + ".weight", rows, d_.hidden, y);
    b_.Value(y + "_acc", {rows}, elf::F32);
    Gemv(op, x, weight + ".weight", rows, d_.hidden, y + "_acc");
    BiasAdd(bias_op, y + "_acc", weight + ".bias", rows, y);
  }
  // RMSNorm of each of `heads` heads of x (QK-norm), weight [head_dim].
  void HeadNorm(const char* op, const std::string& x, const std::string& weight, int64_t heads,
                const std::string& y) {
    b_.Launch(prefix_ + op, layer_, m_.norm_plus_one() ? "dk_head_rmsnorm_plus1_bf16" : "dk_head_rmsnorm_bf16",
              {{"x", x}}, {{"w", weight, {m_.head_dim()}}}, {{"y", y}},
              {{"heads", heads}, {"head_dim", m_.head_dim()}});
  }
  // RoPE with the sliding layers' table ("rope_local.*") when this layer is one.
  void Rope(const char* op, const std::string& x, int64_t heads, const std::string& y) {
    const std::string table = elf::SlidingLayer(m_, layer_) ? "rope_local." : "rope.";
    b_.Launch(prefix_ + op, layer_, "dk_rope_halfsplit_bf16",
              {{"x", x}, {"cos", table + "cos"}, {"sin", table + "sin"}}, {}, {{"y", y}},
              {{"heads", heads}, {"head_dim", m_.head_dim()}});
  }
  void Add(const char* op, const std::string& a, const std::string& b, const std::string& y) {
    b_.Launch(prefix_ + op, layer_, "dk_add_bf16", {{"a", a}, {"b", b}}, {}, {{"y", y}},
              {{"n", d_.hidden}});
  }
  // The FFN's activation times up: SiLU, or Gemma's GELU-tanh.
  void ActMul(const char* op, const std::string& gate, const std::string& up, const std::string& y) {
    b_.Launch(prefix_ + op, layer_, m_.ffn_activation() == elf::ModelShape::GELU_TANH ? "dk_gelu_tanh_mul_bf16" : "dk_silu_mul_bf16",
              {{"gate", gate}, {"up", up}}, {}, {{"y", y}}, {{"n", d_.ffn}});
  }

 private:
  ProgramBuilder& b_;
  const elf::ModelShape& m_;
  const Dims d_;
  const int layer_;
  const std::string prefix_;
};

// Token -> "h0"; position -> the RoPE tables "rope.cos", "rope.sin".
std::string Embedding(ProgramBuilder& b, const elf::ModelShape& m) {
  const Dims d(m);
  b.Value("h0", {d.hidden});
  b.Value("rope.cos", {d.half});
  b.Value("rope.sin", {d.half});
  b.Host(elf::HostStep::EMBEDDING, -1, {{"out", "h0"}});
  b.Host(elf::HostStep::ROPE_LOOKUP, -1, {{"cos", "rope.cos"}, {"sin", "rope.sin"}});
  for (int i = 0; i < m.n_layers(); ++i) {
    if (!elf::SlidingLayer(m, i)) continue;
    b.Value("rope_local.cos", {d.half});
    b.Value("rope_local.sin", {d.half});
    b.Host(elf::HostStep::ROPE_LOOKUP, -1, {{"cos", "rope_local.cos"}, {"sin", "rope_local.sin"}}, {{"local", 1}});
    break;
  }
  return "h0";
}

// Decoder layer `i`: hidden state `h_in` -> "L<i>.h_out" (returned).
std::string DecoderLayer(ProgramBuilder& b, const elf::ModelShape& m, int i, const std::string& h_in) {
  const std::string L = absl::StrCat("L", i, "."), W = absl::StrCat("model.layers.", i, ".");
  const Dims d(m);
  // attn is n_heads x head_dim wide like q (hidden only when head_dim = hidden / n_heads).
  for (const std::string v : {"xn", "attn", "o", "h_mid", "xn2", "down", "h_out"}) {
    b.Value(L + v, {v == "attn" ? d.q : d.hidden});
  }
  for (const char* v : {"q", "q_rot"}) b.Value(L + v, {d.q});
  for (const char* v : {"k", "k_rot", "v"}) b.Value(L + v, {d.kv});
  for (const char* v : {"gate", "up", "act"}) b.Value(L + v, {d.ffn});
  Ops op(b, m, i, L);

  // Attention: h_mid = h_in + o_proj(attention(rope(q), rope(k), v)).
  op.Norm("attn_norm", h_in, W + "input_layernorm.weight", L + "xn");
  op.Projection("q_proj", "q_bias", L + "xn", W + "self_attn.q_proj", d.q, L + "q");
  op.Projection("k_proj", "k_bias", L + "xn", W + "self_attn.k_proj", d.kv, L + "k");
  op.Projection("v_proj", "v_bias", L + "xn", W + "self_attn.v_proj", d.kv, L + "v");
  std::string q = L + "q", k = L + "k";
  if (m.qk_norm()) {
    b.Value(L + "q_n", {d.q});
    b.Value(L + "k_n", {d.kv});
    op.HeadNorm("q_norm", q, W + "self_attn.q_norm.weight", m.n_heads(), L + "q_n");
    op.HeadNorm("k_norm", k, W + "self_attn.k_norm.weight", m.n_kv_heads(), L + "k_n");
    q = L + "q_n";
    k = L + "k_n";
  }
  op.Rope("rope_q", q, m.n_heads(), L + "q_rot");
  op.Rope("rope_k", k, m.n_kv_heads(), L + "k_rot");
  b.Host(elf::HostStep::KV_WRITE, i, {{"k", L + "k_rot"}, {"v", L + "v"}});
  b.Host(elf::HostStep::ATTENTION, i, {{"q", L + "q_rot"}, {"out", L + "attn"}});
  op.Gemv("o_proj", L + "attn", W + "self_attn.o_proj.weight", d.hidden, d.q, L + "o");
  // Gemma 3's sandwich: the attention output normed before its residual add.
  std::string o = L + "o";
  if (m.sandwich_norms()) {
    b.Value(L + "o_n", {d.hidden});
    op.Norm("post_attn_norm", o, W + "post_attention_layernorm.weight", L + "o_n");
    o = L + "o_n";
  }
  op.Add("attn_add", h_in, o, L + "h_mid");

  // MLP: h_out = h_mid + down(act(gate) * up) (Gemma 3: the down output normed first).
  op.Norm("ffn_norm", L + "h_mid",
          W + (m.sandwich_norms() ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"),
          L + "xn2");
  op.Gemv("gate_proj", L + "xn2", W + "mlp.gate_proj.weight", d.ffn, d.hidden, L + "gate");
  op.Gemv("up_proj", L + "xn2", W + "mlp.up_proj.weight", d.ffn, d.hidden, L + "up");
  op.ActMul(m.ffn_activation() == elf::ModelShape::GELU_TANH ? "gelu_mul" : "silu_mul", L + "gate", L + "up", L + "act");
  op.Gemv("down_proj", L + "act", W + "mlp.down_proj.weight", d.hidden, d.ffn, L + "down");
  std::string down = L + "down";
  if (m.sandwich_norms()) {
    b.Value(L + "down_n", {d.hidden});
    op.Norm("post_ffn_norm", down, W + "post_feedforward_layernorm.weight", L + "down_n");
    down = L + "down_n";
  }
  op.Add("ffn_add", L + "h_mid", down, L + "h_out");
  return L + "h_out";
}

// Hidden state `h` -> f32 "logits" -> the host's top-k, which writes the k best ids
// (i32, best first) and their logits into the program values "topk.ids" and
// "topk.logits"; the runtime reads the token from them.
void LmHead(ProgramBuilder& b, const elf::ModelShape& m, const std::string& h) {
  const Dims d(m);
  b.Value("final.xn", {d.hidden});
  b.Value("logits", {m.vocab()}, elf::F32);
  Ops op(b, m, -1, "");
  op.Norm("final_norm", h, "model.norm.weight", "final.xn");
  op.Gemv("lm_head", "final.xn", m.tied_embeddings() ? "model.embed_tokens.weight" : "lm_head.weight",
          m.vocab(), d.hidden, "logits");
  constexpr int64_t kTopK = 5;  // the verify gate's top-5
  b.Value("topk.ids", {kTopK}, elf::I32);
  b.Value("topk.logits", {kTopK}, elf::F32);
  b.Host(elf::HostStep::TOPK, -1, {{"logits", "logits"}, {"ids", "topk.ids"}, {"values", "topk.logits"}}, {{"k", kTopK}});
}

}  // namespace

absl::Status ValidateModelShape(const elf::ModelShape& m) { return elf::ValidateModelShape(m); }

absl::StatusOr<elf::Program> BuildBaseline(const elf::ModelShape& m) {
  DK_RETURN_IF_ERROR(elf::ValidateModelShape(m));
  ProgramBuilder b(m);
  std::string h = Embedding(b, m);
  for (int i = 0; i < m.n_layers(); ++i) h = DecoderLayer(b, m, i, h);
  LmHead(b, m, h);
  return std::move(b).Finish();
}

}  // namespace dk::graph
