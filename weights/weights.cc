// Weights in memory, the tensors a model needs, and the loader by path; the formats
// are in hf_checkpoint.cc, gguf_weights.cc and synthetic.cc, the digest in digest.cc.
#include "weights/weights.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/read_file.h"
#include "util/status.h"
#include "weights/common.h"
#include "weights/dequant.h"

namespace dk::weights {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status CopyStoredRows(const Tensor& t, int64_t begin, int64_t end, uint8_t* out) {
  const StoredBlocks& b = t.stored;
  if (b.format == elf::BLOCK_FORMAT_NONE || b.data == nullptr || t.shape.size() != 2) {
    return absl::FailedPreconditionError("the tensor is not stored in blocks");
  }
  const int64_t rows = t.shape[0];
  if (begin < 0 || end > rows || begin > end) {
    return absl::OutOfRangeError(absl::StrCat("rows [", begin, ", ", end, ") of a tensor of ", rows, " rows"));
  }
  for (int64_t r = begin; r < end; ++r) {
    const int64_t file_row = b.qk_heads > 0 ? HfRowToGgufQkRow(r, rows, b.qk_heads) : r;
    std::memcpy(out + (r - begin) * b.row_bytes, b.data + file_row * b.row_bytes, b.row_bytes);
  }
  return absl::OkStatus();
}

void Weights::Add(std::string name, Tensor tensor) {
  tensors_[std::move(name)] = std::move(tensor);
}

int64_t Weights::ReleaseData(absl::string_view name) {
  const auto it = tensors_.find(std::string(name));
  if (it == tensors_.end()) return 0;
  // The file's blocks, copied into BOs by now: their pages of the (private, read-only)
  // mapping go back to the page cache, re-read from the file if ever touched again.
  if (const Tensor& t = it->second; t.stored.data != nullptr && t.shape.size() == 2) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t base = reinterpret_cast<uintptr_t>(t.stored.data);
    const uintptr_t from = (base + page - 1) / page * page;
    const uintptr_t to = (base + static_cast<uintptr_t>(t.shape[0]) * t.stored.row_bytes) / page * page;
    if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);  // advice only
  }
  if (it->second.data.size() == 0) return 0;
  const int64_t bytes = static_cast<int64_t>(it->second.data.size() * sizeof(bf16));
  it->second.data = AlignedBuffer<bf16>();
  return bytes;
}

int64_t Weights::ReleaseRows(absl::string_view name, int64_t begin, int64_t end) {
  const auto it = tensors_.find(std::string(name));
  if (it == tensors_.end() || it->second.shape.size() != 2 || it->second.data.size() == 0) return 0;
  Tensor& t = it->second;
  const int64_t rows = t.shape[0], row_bytes = t.shape[1] * int64_t{sizeof(bf16)};
  begin = std::max<int64_t>(begin, 0);
  end = std::min(end, rows);
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data.data());
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t from = (base + begin * row_bytes + page - 1) / page * page;
  const uintptr_t to = (base + std::max(begin, end) * row_bytes) / page * page;
  if (to <= from) return 0;
  t.rows_released = true;
  if (madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED) != 0) return 0;
  return static_cast<int64_t>(to - from);
}

const Tensor* Weights::Find(absl::string_view name) const {
  const auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<const Tensor*> Weights::Get(
    absl::string_view name, const std::vector<int64_t>& expected_shape) const {
  const Tensor* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor \"", name, "\" (expected shape ",
                                            ShapeStr(expected_shape), ") not found in ",
                                            source_));
  }
  if (t->shape != expected_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor \"", name, "\" in ", source_, " has shape ", ShapeStr(t->shape),
        ", expected ", ShapeStr(expected_shape)));
  }
  return t;
}

std::vector<std::string> Weights::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

int64_t Weights::total_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : tensors_) bytes += t.numel() * int64_t{sizeof(bf16)};
  return bytes;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> ExpectedTensors(
    const elf::ModelShape& s) {
  const int64_t hidden = s.hidden();
  const int64_t q_rows = int64_t{s.n_heads()} * s.head_dim();
  const int64_t kv_rows = int64_t{s.n_kv_heads()} * s.head_dim();
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {s.vocab(), hidden}});
  for (int l = 0; l < s.n_layers(); ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    out.push_back({p + "input_layernorm.weight", {hidden}});
    if (s.sandwich_norms()) {
      out.push_back({p + "pre_feedforward_layernorm.weight", {hidden}});
      out.push_back({p + "post_feedforward_layernorm.weight", {hidden}});
    }
    out.push_back({p + "self_attn.q_proj.weight", {q_rows, hidden}});
    out.push_back({p + "self_attn.k_proj.weight", {kv_rows, hidden}});
    out.push_back({p + "self_attn.v_proj.weight", {kv_rows, hidden}});
    if (s.attention_bias()) {
      out.push_back({p + "self_attn.q_proj.bias", {q_rows}});
      out.push_back({p + "self_attn.k_proj.bias", {kv_rows}});
      out.push_back({p + "self_attn.v_proj.bias", {kv_rows}});
    }
    if (s.qk_norm()) {
      out.push_back({p + "self_attn.q_norm.weight", {s.head_dim()}});
      out.push_back({p + "self_attn.k_norm.weight", {s.head_dim()}});
    }
    out.push_back({p + "self_attn.o_proj.weight", {hidden, q_rows}});
    out.push_back({p + "post_attention_layernorm.weight", {hidden}});
    out.push_back({p + "mlp.gate_proj.weight", {s.ffn(), hidden}});
    out.push_back({p + "mlp.up_proj.weight", {s.ffn(), hidden}});
    out.push_back({p + "mlp.down_proj.weight", {hidden, s.ffn()}});
  }
  out.push_back({"model.norm.weight", {hidden}});
  if (!s.tied_embeddings()) out.push_back({"lm_head.weight", {s.vocab(), hidden}});
  return out;
}

absl::Status CheckWeights(const Weights& w, const elf::ModelShape& shape) {
  for (const auto& [name, dims] : ExpectedTensors(shape)) {
    DK_RETURN_IF_ERROR(w.Get(name, dims).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<Weights> LoadWeights(const std::string& path) { return LoadWeights(path, nullptr); }

absl::StatusOr<Weights> LoadWeights(const std::string& path, const BlocksOnly& blocks_only, ThreadPool* pool) {
  absl::StatusOr<OpenedPath> opened = OpenUserPath(path, "weights", PathKinds::kFileOrDirectory);
  if (absl::IsNotFound(opened.status())) {
    return absl::NotFoundError(absl::StrCat(opened.status().message(),
                                            " (expected an HF checkpoint directory or a .gguf file)"));
  }
  if (!opened.ok()) return opened.status();
  if (opened->is_directory) return LoadHfCheckpoint(path, pool);
  // By content, not by name: a GGUF file starts with its magic.
  DK_ASSIGN_OR_RETURN(std::string magic, ReadHead(*opened, path, 4));
  if (magic == "GGUF") return LoadGguf(path, blocks_only, pool);
  return absl::InvalidArgumentError(absl::StrCat(
      "weights ", path, " are not a GGUF file (", magic.size() < 4 ? "shorter than" : "no",
      " GGUF magic) and not an HF checkpoint directory"));
}

}  // namespace dk::weights
