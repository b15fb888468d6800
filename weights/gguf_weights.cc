// GGUF files as Weights: metadata -> ModelShape, tensors renamed to HF names,
// dequantized to bf16, Q/K rows un-permuted (the file format itself is gguf.h).
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "elf/elf.h"
#include "formats/weight_format.h"
#include "util/printable.h"
#include "util/status.h"
#include "weights/common.h"
#include "weights/dequant.h"
#include "weights/gguf.h"
#include "weights/parallel.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; "" when the
// tensor has no HF counterpart (e.g. rope_freqs.weight).
std::string GgufNameToHf(absl::string_view name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (!absl::ConsumePrefix(&name, "blk.")) return "";
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos) return "";
  int layer = 0;
  if (!absl::SimpleAtoi(name.substr(0, dot), &layer) || layer < 0) return "";
  const absl::string_view rest = name.substr(dot + 1);
  static constexpr std::pair<const char*, const char*> kMap[] = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  for (const auto& [gguf, hf] : kMap) {
    if (rest == gguf) return absl::StrCat("model.layers.", layer, ".", hf);
  }
  return "";
}

// A positive metadata integer of at most `max` (elf/elf.h's limits), checked before
// anything is sized by it.
absl::StatusOr<int32_t> GgufPositiveInt(const GgufFile& f, const std::string& key,
                                        int64_t default_value, int64_t max) {
  if (f.Find(key) == nullptr) {
    if (default_value > 0 && default_value <= max) return static_cast<int32_t>(default_value);
    if (default_value > max) {
      return absl::InvalidArgumentError(absl::StrCat(f.name(), ": metadata ", key, " (default ",
                                                     default_value, ") exceeds the limit ", max));
    }
    return absl::NotFoundError(absl::StrCat(f.name(), ": missing metadata key ", key));
  }
  DK_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v <= 0 || v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.name(), ": metadata ", key, " = ", v, " is not a positive int32"));
  }
  if (v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.name(), ": metadata ", key, " = ", v, " exceeds the limit ", max));
  }
  return static_cast<int32_t>(v);
}

absl::StatusOr<double> GgufNumber(const GgufFile& f, const std::string& key,
                                  double default_value) {
  if (f.Find(key) == nullptr) return default_value;
  return f.GetDouble(key);
}

std::string ToLowerSnake(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.') {
      out.push_back(c);
    } else {
      out.push_back('_');
    }
  }
  return out;
}

absl::StatusOr<elf::ModelShape> ShapeFromGguf(const GgufFile& f, const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch != "llama") {
    return absl::UnimplementedError(absl::StrCat(
        path, ": GGUF general.architecture \"", Printable(arch), "\" is not supported (only llama)"));
  }
  elf::ModelShape s;
  DK_ASSIGN_OR_RETURN(int32_t layers, GgufPositiveInt(f, "llama.block_count", 0, elf::kMaxLayers));
  DK_ASSIGN_OR_RETURN(int32_t hidden,
                      GgufPositiveInt(f, "llama.embedding_length", 0, elf::kMaxDimension));
  DK_ASSIGN_OR_RETURN(int32_t ffn,
                      GgufPositiveInt(f, "llama.feed_forward_length", 0, elf::kMaxDimension));
  DK_ASSIGN_OR_RETURN(int32_t heads,
                      GgufPositiveInt(f, "llama.attention.head_count", 0, elf::kMaxHeads));
  DK_ASSIGN_OR_RETURN(int32_t kv_heads,
                      GgufPositiveInt(f, "llama.attention.head_count_kv", heads, elf::kMaxHeads));
  DK_ASSIGN_OR_RETURN(int32_t head_dim, GgufPositiveInt(f, "llama.rope.dimension_count",
                                                        hidden / heads, elf::kMaxHeadDim));
  if (f.Find("llama.attention.key_length") != nullptr) {
    DK_ASSIGN_OR_RETURN(head_dim,
                        GgufPositiveInt(f, "llama.attention.key_length", 0, elf::kMaxHeadDim));
  }
  DK_ASSIGN_OR_RETURN(int32_t context,
                      GgufPositiveInt(f, "llama.context_length", 2048, elf::kMaxDimension));
  int32_t vocab = 0;
  if (f.Find("tokenizer.ggml.tokens") != nullptr) {
    DK_ASSIGN_OR_RETURN(const GgufArray* tokens,
                        f.Find("tokenizer.ggml.tokens")->AsArray());
    if (tokens->elements.size() > static_cast<uint64_t>(elf::kMaxDimension)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tokenizer.ggml.tokens has ",
                                                     tokens->elements.size(),
                                                     " entries, more than the vocabulary limit ",
                                                     elf::kMaxDimension));
    }
    vocab = static_cast<int32_t>(tokens->elements.size());
  } else {
    DK_ASSIGN_OR_RETURN(vocab, GgufPositiveInt(f, "llama.vocab_size", 0, elf::kMaxDimension));
  }
  DK_ASSIGN_OR_RETURN(double theta, GgufNumber(f, "llama.rope.freq_base", 10000.0));
  DK_ASSIGN_OR_RETURN(double eps,
                      GgufNumber(f, "llama.attention.layer_norm_rms_epsilon", 1e-5));
  if (f.Find("llama.rope.scaling.type") != nullptr) {
    DK_ASSIGN_OR_RETURN(std::string type, f.GetString("llama.rope.scaling.type"));
    if (type != "none") {
      return absl::UnimplementedError(absl::StrCat(
          path, ": rope scaling type \"", type, "\" is not supported for GGUF"));
    }
  }
  std::string name;
  if (f.Find("general.basename") != nullptr) {
    DK_ASSIGN_OR_RETURN(std::string base, f.GetString("general.basename"));
    name = base;
    if (f.Find("general.size_label") != nullptr) {
      DK_ASSIGN_OR_RETURN(std::string size, f.GetString("general.size_label"));
      name = absl::StrCat(base, "_", size);
    }
  } else {
    name = Basename(path);
    if (absl::EndsWith(name, ".gguf")) name.resize(name.size() - 5);
  }
  s.set_name(ToLowerSnake(name));
  s.set_n_layers(layers);
  s.set_hidden(hidden);
  s.set_n_heads(heads);
  s.set_n_kv_heads(kv_heads);
  s.set_head_dim(head_dim);
  s.set_ffn(ffn);
  s.set_vocab(vocab);
  s.set_rms_eps(static_cast<float>(eps));
  s.set_rope_theta(static_cast<float>(theta));
  s.set_tied_embeddings(f.FindTensor("output.weight") == nullptr);
  s.set_max_context(context);
  // What the sizes imply together (heads dividing, the KV cache's size, ...).
  if (absl::Status st = elf::ValidateModelShape(s); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": metadata: ", st.message()));
  }
  return s;
}

// The block format the GEMV kernels read that `type` is, or NONE.
elf::BlockFormat BlockFormatOf(GgmlType type) {
  const std::optional<formats::WeightFormat> f = formats::FromGgmlTypeId(static_cast<uint32_t>(type));
  return f ? elf::BlockFormatOf(*f) : elf::BLOCK_FORMAT_NONE;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> GgufStoredTypes(const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  // The types only mean something for a file LoadGguf would load: another
  // architecture's tensors would be matched to this one's names by accident.
  DK_RETURN_IF_ERROR(ShapeFromGguf(*f, path).status());
  std::map<std::string, std::string> types;
  for (const GgufTensorInfo& info : f->tensors()) {
    const std::string name = GgufNameToHf(info.name);
    if (name.empty()) continue;
    auto traits = GetGgmlTypeTraits(info.type);
    types[name] = traits.ok() ? traits->name : absl::StrCat("ggml type ", static_cast<uint32_t>(info.type));
  }
  return types;
}

absl::StatusOr<Weights> LoadGguf(const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> owned, GgufFile::Open(path));
  // Kept mapped while the weights live: the StoredBlocks point into it.
  const std::shared_ptr<const GgufFile> file(std::move(owned));
  const GgufFile* f = file.get();
  DK_ASSIGN_OR_RETURN(elf::ModelShape shape, ShapeFromGguf(*f, path));
  std::map<std::string, std::vector<int64_t>> expected;
  for (auto& [name, dims] : ExpectedTensors(shape)) expected[name] = dims;

  Weights w;
  w.set_source(path);
  w.set_shape(shape);
  for (const GgufTensorInfo& info : f->tensors()) {
    const std::string name = GgufNameToHf(info.name);
    const auto exp = expected.find(name);
    if (exp == expected.end()) continue;  // no HF counterpart (e.g. rope_freqs)
    auto where = [&] {
      return absl::StrCat("tensor \"", info.name, "\" (", name, ") in ", path);
    };
    Tensor t;
    t.shape.assign(info.dims.rbegin(), info.dims.rend());  // ggml order -> PyTorch order
    if (t.shape != exp->second) {
      return absl::InvalidArgumentError(absl::StrCat(where(), " has shape ",
                                                     ShapeStr(t.shape), ", expected ",
                                                     ShapeStr(exp->second)));
    }
    const int64_t cols = t.shape.back();
    const int64_t rows = cols == 0 ? 0 : t.numel() / cols;
    absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(info.type, cols);
    if (!row_bytes.ok()) {
      return absl::Status(row_bytes.status().code(),
                          absl::StrCat(where(), ": ", row_bytes.status().message()));
    }
    absl::StatusOr<absl::Span<const uint8_t>> bytes = f->TensorData(info);
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat(where(), ": ", bytes.status().message()));
    }
    if (bytes->size() != *row_bytes * static_cast<uint64_t>(rows)) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": ", bytes->size(),
                                                     " bytes of data, expected ",
                                                     *row_bytes * rows));
    }
    // Q and K rows are stored permuted for interleaved RoPE; undo it as transformers'
    // GGUF loader does (n_head = attention heads for Q, KV heads for K).
    int64_t n_head = 0;
    if (absl::EndsWith(name, "q_proj.weight")) n_head = shape.n_heads();
    if (absl::EndsWith(name, "k_proj.weight")) n_head = shape.n_kv_heads();
    if (n_head > 0 && rows % (2 * n_head) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": ", rows, " rows cannot be split into ", n_head, " heads x 2 halves"));
    }
    t.data = AlignedBuffer<bf16>(static_cast<size_t>(t.numel()));
    if (t.numel() > 0 && t.data.empty()) {
      return absl::ResourceExhaustedError(absl::StrCat(where(), ": out of memory"));
    }
    const uint8_t* src = bytes->data();
    bf16* dst = t.data.data();
    const GgmlType type = info.type;
    const uint64_t rb = *row_bytes;
    const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(cols, 1));
    ParallelChunks(rows, rows_per_chunk, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t hf_row = n_head > 0 ? GgufQkRowToHfRow(r, rows, n_head) : r;
        DequantizeToBf16(type, src + r * rb, cols, dst + hf_row * cols);
      }
    });
    if (const elf::BlockFormat format = BlockFormatOf(type); format != elf::BLOCK_FORMAT_NONE && t.shape.size() == 2) {
      t.stored = StoredBlocks{format, src, static_cast<size_t>(rb), n_head};
    }
    w.Add(name, std::move(t));
  }
  DK_RETURN_IF_ERROR(CheckWeights(w, shape));
  // Dequantizing touched every page; the blocks are read again (from the page cache)
  // only by an ELF that copies them, so they need not stay resident.
  f->ReleaseResidentPages();
  w.Retain(file);
  return w;
}

}  // namespace dk::weights
