// Host steps of the CPU backend: embedding, RoPE lookup, KV cache, attention, top-k.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "kernels/attention/attention.h"
#include "kernels/common/scratch.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/rope/rope.h"
#include "kernels/topk/topk.h"
#include "registry/registry.h"
#include "runtime/cpu/cpu_device.h"
#include "util/aligned_buffer.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace dk::runtime {
namespace {

class CpuHostOps final : public HostOps {
 public:
  CpuHostOps(const elf::ModelShape& m, const EmbeddingRows* embedding, int max_context, ThreadPool* pool,
             kernels::RopeTable rope, std::optional<kernels::RopeTable> rope_local, int sequences)
      : m_(m),
        embedding_(embedding),
        max_context_(max_context),
        pool_(pool),
        scratch_(pool_->num_threads()),
        rope_(std::move(rope)),
        rope_local_(std::move(rope_local)),
        // Gemma: the embedding times bf16(sqrt(hidden)) (a bf16 buffer in HF).
        embedding_scale_(m.embedding_scale() ? RoundToBf16(std::sqrt(static_cast<float>(m.hidden()))) : 0.0f),
        kv_stride_(size_t{static_cast<size_t>(m.n_kv_heads())} * max_context * m.head_dim()) {
    for (int i = 0; i < sequences; ++i) {
      caches_.push_back({AlignedBuffer<bf16>(kv_stride_ * m.n_layers()), AlignedBuffer<bf16>(kv_stride_ * m.n_layers())});
      caches_.back().k.Zero();
      caches_.back().v.Zero();
    }
  }

  bool ok() const {
    for (const Cache& c : caches_) {
      if (c.k.size() != kv_stride_ * m_.n_layers() || c.v.size() != c.k.size()) return false;
    }
    return !caches_.empty();
  }

  absl::StatusOr<int> BindHostStep(const elf::HostStep& step,
                                   const std::vector<std::pair<std::string, Value>>& values) override {
    Bound b;
    b.step = &step;
    auto need = [&](const char* param, void** out, int64_t* elements = nullptr) -> absl::Status {
      for (const auto& [name, v] : values) {
        if (name == param) {
          *out = v.data;
          const int slot = out == &b.in ? 0 : out == &b.in2 ? 1 : out == &b.out ? 2 : 3;
          b.row_bytes[slot] = v.row_bytes;
          b.rows[slot] = v.rows;
          if (elements != nullptr) {
            *elements = 1;
            for (const int64_t d : v.info->shape()) *elements *= d;
          }
          return absl::OkStatus();
        }
      }
      return absl::InvalidArgumentError(
          absl::StrCat("host step '", elf::HostStepName(step.kind()), "' (layer ", step.layer(), ") has no '", param, "' binding"));
    };
    const elf::HostStep::Kind kind = step.kind();
    if (kind == elf::HostStep::EMBEDDING) {
      b.kind = Kind::kEmbedding;
      DK_RETURN_IF_ERROR(need("out", &b.out));
    } else if (kind == elf::HostStep::ROPE_LOOKUP) {
      b.kind = Kind::kRopeLookup;
      DK_RETURN_IF_ERROR(need("cos", &b.in));
      DK_RETURN_IF_ERROR(need("sin", &b.in2));
      // "local": the sliding layers' table (rope_local_theta).
      const auto local = step.params().find("local");
      b.local = local != step.params().end() && local->second != 0;
      if (b.local && !rope_local_) {
        return absl::InvalidArgumentError("rope_lookup local: the model has no rope_local_theta");
      }
    } else if (kind == elf::HostStep::KV_WRITE || kind == elf::HostStep::ATTENTION) {
      if (step.layer() < 0 || step.layer() >= m_.n_layers()) {
        return absl::InvalidArgumentError(absl::StrCat("host step '", elf::HostStepName(kind), "' has invalid layer ", step.layer()));
      }
      if (kind == elf::HostStep::KV_WRITE) {
        b.kind = Kind::kKvWrite;
        DK_RETURN_IF_ERROR(need("k", &b.in));
        DK_RETURN_IF_ERROR(need("v", &b.in2));
      } else {
        b.kind = Kind::kAttention;
        DK_RETURN_IF_ERROR(need("q", &b.in));
        DK_RETURN_IF_ERROR(need("out", &b.out));
        b.sliding = elf::SlidingLayer(m_, step.layer());
      }
    } else if (kind == elf::HostStep::TOPK) {
      b.kind = Kind::kTopK;
      DK_RETURN_IF_ERROR(need("logits", &b.in));
      auto it = step.params().find("k");
      b.k = it == step.params().end() ? 5 : static_cast<size_t>(it->second);
      int64_t ids = 0, vals = 0;
      DK_RETURN_IF_ERROR(need("ids", &b.out, &ids));
      DK_RETURN_IF_ERROR(need("values", &b.out2, &vals));
      if (ids != static_cast<int64_t>(b.k) || vals != static_cast<int64_t>(b.k)) {
        return absl::InvalidArgumentError(absl::StrCat("host step 'topk': 'ids' (", ids, " elements) and 'values' (",
                                                       vals, ") must hold k = ", b.k));
      }
    } else {
      return absl::UnimplementedError(absl::StrCat("the cpu host has no host step '", elf::HostStepName(kind), "'"));
    }
    bound_.push_back(b);
    return static_cast<int>(bound_.size()) - 1;
  }

  absl::Status RunHostStep(int handle, absl::Span<const uint32_t> tokens, int position, int first_row) override {
    if (handle < 0 || handle >= static_cast<int>(bound_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bound host step ", handle));
    }
    const int last = position + static_cast<int>(tokens.size()) - 1;
    if (position < 0 || last >= max_context_) {
      return absl::OutOfRangeError(absl::StrCat("position ", last, " exceeds the KV cache of ",
                                                max_context_, " positions; raise max_context or "
                                                "shorten the prompt / generation"));
    }
    if (tokens.empty() || first_row < 0) {
      return absl::InvalidArgumentError(absl::StrCat("host step over ", tokens.size(), " tokens from row ", first_row));
    }
    const Bound& b = bound_[handle];
    if (b.kind == Kind::kAttention && tokens.size() > 1) return AttentionRows(b, first_row, position, tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      const Row r = b.AtRow(first_row + i);
      const int pos = position + static_cast<int>(i);
      absl::Status s;
      switch (b.kind) {
        case Kind::kEmbedding: s = Embed(r, tokens[i]); break;
        case Kind::kRopeLookup: s = RopeLookup(b, r, pos); break;
        case Kind::kKvWrite: s = KvWrite(b, r, pos, caches_[0]); break;
        case Kind::kAttention: s = Attention(b, r, pos, caches_[0]); break;
        case Kind::kTopK: s = TopK(b, r); break;
      }
      DK_RETURN_IF_ERROR(s);
    }
    return absl::OkStatus();
  }

  absl::Status RunHostStepBatch(int handle, absl::Span<const BatchRow> rows) override {
    if (handle < 0 || handle >= static_cast<int>(bound_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bound host step ", handle));
    }
    for (const BatchRow& row : rows) {
      if (row.sequence < 0 || row.sequence >= static_cast<int>(caches_.size())) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", row.sequence, ": the host holds KV caches for ",
                                                       caches_.size(), " sequences"));
      }
      if (row.position < 0 || row.position >= max_context_) {
        return absl::OutOfRangeError(absl::StrCat("position ", row.position, " of sequence ", row.sequence,
                                                  " exceeds the KV cache of ", max_context_, " positions"));
      }
    }
    const Bound& b = bound_[handle];
    // Row by row, each as a one-token run of its sequence gives it (the same kernels:
    // attention is DecodeAttention at the row's position over its sequence's cache).
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row r = b.AtRow(i);
      const BatchRow& row = rows[i];
      absl::Status s;
      switch (b.kind) {
        case Kind::kEmbedding: s = Embed(r, row.token); break;
        case Kind::kRopeLookup: s = RopeLookup(b, r, row.position); break;
        case Kind::kKvWrite: s = KvWrite(b, r, row.position, caches_[row.sequence]); break;
        case Kind::kAttention: s = Attention(b, r, row.position, caches_[row.sequence]); break;
        case Kind::kTopK: s = TopK(b, r); break;
      }
      DK_RETURN_IF_ERROR(s);
    }
    return absl::OkStatus();
  }

  void Reset() override {
    caches_[0].k.Zero();
    caches_[0].v.Zero();
  }

 private:
  // A step bound once (BindHostStep): its kind and the memory of its values.
  enum class Kind { kEmbedding, kRopeLookup, kKvWrite, kAttention, kTopK };
  // A step's values at one token row.
  struct Row {
    void* in = nullptr;
    void* in2 = nullptr;
    void* out = nullptr;
    void* out2 = nullptr;
  };
  struct Bound {
    // The values at token row `row` (a value of one row: the same memory for all).
    Row AtRow(size_t row) const {
      auto at = [&](void* p, int i) {
        return p == nullptr ? p : static_cast<uint8_t*>(p) + RowSlot(row, rows[i]) * row_bytes[i];
      };
      return Row{at(in, 0), at(in2, 1), at(out, 2), at(out2, 3)};
    }
    size_t row_bytes[4] = {};  // in, in2, out, out2: HostOps::Value::row_bytes
    int rows[4] = {1, 1, 1, 1};  // and ::rows
    const elf::HostStep* step = nullptr;
    Kind kind = Kind::kEmbedding;
    void* in = nullptr;   // cos, k, q or logits
    void* in2 = nullptr;   // sin or v
    void* out = nullptr;   // embedding or attention output, or top-k's ids (i32)
    void* out2 = nullptr;  // top-k's logits (f32)
    bool local = false;   // rope_lookup: the sliding layers' table
    bool sliding = false;  // attention: a sliding-window layer
    size_t k = 0;         // topk
  };

  absl::Status Embed(const Row& b, uint32_t token) {
    bf16* h = static_cast<bf16*>(b.out);
    DK_RETURN_IF_ERROR(embedding_->Read(token, h));
    if (embedding_scale_ != 0) {
      for (int i = 0; i < m_.hidden(); ++i) h[i] = F32ToBf16(Bf16ToF32(h[i]) * embedding_scale_);
    }
    return absl::OkStatus();
  }
  absl::Status RopeLookup(const Bound& b, const Row& r, int position) {
    const kernels::RopeTable& table = b.local ? *rope_local_ : rope_;
    const size_t half = m_.head_dim() / 2;
    std::memcpy(r.in, table.cos(position), half * sizeof(bf16));
    std::memcpy(r.in2, table.sin(position), half * sizeof(bf16));
    return absl::OkStatus();
  }
  // One sequence's keys and values: [n_layers][n_kv_heads][max_context][head_dim] each.
  struct Cache {
    AlignedBuffer<bf16> k, v;
  };
  absl::Status KvWrite(const Bound& b, const Row& r, int position, Cache& cache) {
    const size_t hd = m_.head_dim();
    bf16* kc = cache.k.data() + b.step->layer() * kv_stride_;
    bf16* vc = cache.v.data() + b.step->layer() * kv_stride_;
    for (int h = 0; h < m_.n_kv_heads(); ++h) {
      const size_t at = (size_t{static_cast<size_t>(h)} * max_context_ + position) * hd;
      std::memcpy(kc + at, static_cast<const bf16*>(r.in) + h * hd, hd * sizeof(bf16));
      std::memcpy(vc + at, static_cast<const bf16*>(r.in2) + h * hd, hd * sizeof(bf16));
    }
    return absl::OkStatus();
  }
  kernels::AttentionDims Dims() const {
    kernels::AttentionDims dims;
    dims.n_heads = m_.n_heads();
    dims.n_kv_heads = m_.n_kv_heads();
    dims.head_dim = m_.head_dim();
    dims.max_ctx = max_context_;
    return dims;
  }
  // query_pre_attn_scalar^-0.5 (Gemma 3), else head_dim^-0.5.
  float Scale() const {
    const float scalar = m_.query_pre_attn_scalar() > 0 ? m_.query_pre_attn_scalar() : static_cast<float>(m_.head_dim());
    return 1.0f / std::sqrt(scalar);
  }
  absl::Status Attention(const Bound& b, const Row& r, int position, const Cache& cache) {
    const size_t hd = m_.head_dim();
    // A sliding layer attends to positions (position - window, position] only: the
    // caches from `first` on, read as a cache that starts there (the kv-head stride
    // stays max_context).
    const size_t first = b.sliding && position >= m_.sliding_window() ? position - m_.sliding_window() + 1 : 0;
    const size_t layer = b.step->layer() * kv_stride_;
    return kernels::DecodeAttention(Dims(), static_cast<const bf16*>(r.in), cache.k.data() + layer + first * hd,
                                    cache.v.data() + layer + first * hd, position - first,
                                    static_cast<bf16*>(r.out), pool_, Scale(), &scratch_);
  }
  // Attention for `m` token rows from `first_row` (positions position..position + m - 1)
  // in one call: each row as Attention() gives it (kernels::CausalAttention is
  // bit-identical per row to DecodeAttention), one pool run for the chunk. The rows
  // of q and out are consecutive slots (a chunk starts at its values' first slot).
  absl::Status AttentionRows(const Bound& b, int first_row, int position, size_t m) {
    const Row r = b.AtRow(first_row);
    const size_t window = b.sliding ? static_cast<size_t>(m_.sliding_window()) : 0;
    const size_t layer = b.step->layer() * kv_stride_;
    return kernels::CausalAttention(Dims(), static_cast<const bf16*>(r.in), b.row_bytes[0] / sizeof(bf16), m,
                                    position, window, caches_[0].k.data() + layer, caches_[0].v.data() + layer,
                                    static_cast<bf16*>(r.out), b.row_bytes[2] / sizeof(bf16), pool_, Scale(),
                                    &scratch_);
  }
  // Writes the k best ids (i32) and their logits to the step's values, best first;
  // entries past the finite logits found hold id -1 (and NaN).
  absl::Status TopK(const Bound& b, const Row& r) {
    auto* ids = static_cast<int32_t*>(r.out);
    auto* vals = static_cast<float*>(r.out2);
    static_assert(sizeof(int32_t) == sizeof(uint32_t), "ids are written in place");
    const size_t n = kernels::TopK(static_cast<const float*>(r.in), m_.vocab(), b.k,
                                   reinterpret_cast<uint32_t*>(ids), vals);
    for (size_t i = n; i < b.k; ++i) {
      ids[i] = -1;
      vals[i] = std::numeric_limits<float>::quiet_NaN();
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(
          "top-k found no finite logit among the ", m_.vocab(),
          " of value 'logits' (all NaN): the LM head produced NaN; a weight tensor holds NaN or inf, "
          "or values that overflow (check the weights with tools/diagnose)"));
    }
    return absl::OkStatus();
  }

  const elf::ModelShape m_;
  const EmbeddingRows* embedding_;
  const int max_context_;
  ThreadPool* pool_;
  kernels::KernelScratch scratch_;  // the attention kernels', one per pool thread
  kernels::RopeTable rope_;
  std::optional<kernels::RopeTable> rope_local_;  // sliding layers' (Gemma 3)
  const float embedding_scale_;                   // 0: none
  const size_t kv_stride_;  // elements per layer: [n_kv_heads][max_context][head_dim]
  std::vector<Cache> caches_;  // by sequence; RunHostStep's is caches_[0]
  std::vector<Bound> bound_;  // by handle
};

}  // namespace

absl::StatusOr<std::vector<EmbeddingRows::Part>> EmbeddingRows::Parts(
    const elf::Program& program, const std::vector<BufferObject*>* bos, const std::string& tensor) const {
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("the embedding stays a table: ", why));
  };
  std::vector<Part> parts;
  for (int i = 0; i < program.bos_size(); ++i) {
    const elf::BufferObject& b = program.bos(i);
    if (b.weight_tensor() != tensor) continue;
    const bool packed = b.layout() == registry::kPackedPanelV1;
    const bool x12 = b.layout() == registry::kPackedPanelX12V1;
    if (b.category() != elf::STATIC || b.block_format() != elf::BLOCK_FORMAT_NONE ||
        !(packed || x12 || b.layout().empty() || b.layout() == registry::kRowMajor) || b.shape_size() != 2 ||
        b.shape(1) != hidden_) {
      return refuse(absl::StrCat("BO '", b.name(), "' is not a STATIC bf16 row-major, ", registry::kPackedPanelV1,
                                 " or ", registry::kPackedPanelX12V1, " [rows, ", hidden_, "] weight"));
    }
    const uint8_t* data = nullptr;
    if (bos != nullptr) {
      data = i < static_cast<int>(bos->size()) ? CpuBoDeviceBytes(*(*bos)[i]) : nullptr;
      if (data == nullptr) return refuse(absl::StrCat("BO '", b.name(), "' is not a CPU device BO"));
    }
    parts.push_back({b.weight_row_begin(), b.weight_row_begin() + b.shape(0), data, packed, x12});
  }
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.begin < b.begin; });
  int64_t next = 0;  // the rows [0, next) the parts so far hold, each once
  for (const Part& p : parts) {
    if (p.begin != next || p.end <= p.begin) return refuse(absl::StrCat("no BO of '", tensor, "' starts at row ", next));
    next = p.end;
  }
  if (next != vocab_) {
    return refuse(absl::StrCat("the BOs of '", tensor, "' do not hold rows [0, ", vocab_, ") once each"));
  }
  return parts;
}

absl::Status EmbeddingRows::CanUseBos(const elf::Program& program, const std::string& tensor) const {
  return Parts(program, nullptr, tensor).status();
}

absl::Status EmbeddingRows::UseBos(const elf::Program& program, const std::vector<BufferObject*>& bos,
                                   const std::string& tensor) {
  DK_ASSIGN_OR_RETURN(parts_, Parts(program, &bos, tensor));
  return absl::OkStatus();
}

absl::Status EmbeddingRows::Read(uint32_t id, bf16* out) const {
  if (row_fn_ && parts_.empty()) {
    if (id >= vocab_) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is out of range for a vocabulary of ", vocab_));
    }
    row_fn_(id, out);
    return absl::OkStatus();
  }
  if (parts_.empty()) return kernels::EmbeddingLookup(table_, vocab_, hidden_, id, out);
  if (id >= vocab_) {
    return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is out of range for a vocabulary of ", vocab_));
  }
  // The last part that begins at or before id.
  const auto it = std::upper_bound(parts_.begin(), parts_.end(), static_cast<int64_t>(id),
                                   [](int64_t v, const Part& p) { return v < p.begin; }) - 1;
  const size_t row = id - it->begin, rows = it->end - it->begin, hidden = hidden_;
  if (it->x12) {
    kernels::UnpackX12GemvRow(it->data, rows, hidden, row, out);
  } else if (it->packed) {
    kernels::UnpackGemvRow(reinterpret_cast<const bf16*>(it->data), rows, hidden, row, out);
  } else {
    std::memcpy(out, it->data + row * hidden * sizeof(bf16), hidden * sizeof(bf16));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HostOps>> MakeCpuHostOps(const elf::ModelShape& model,
                                                        const EmbeddingRows* embedding,
                                                        const CpuHostOptions& options) {
  if (options.pool == nullptr) {
    return absl::InvalidArgumentError("MakeCpuHostOps: no pool (CpuHostOptions::pool; a session gives its own)");
  }
  kernels::RopeConfig rope;
  rope.head_dim = model.head_dim();
  rope.theta = model.rope_theta();
  if (model.rope_scaling().type() == "llama3") {
    rope.llama3_scaling = true;
    rope.llama3.factor = model.rope_scaling().factor();
    rope.llama3.low_freq_factor = model.rope_scaling().low_freq_factor();
    rope.llama3.high_freq_factor = model.rope_scaling().high_freq_factor();
    rope.llama3.original_max_position = static_cast<float>(model.rope_scaling().original_max_position());
  }
  const int max_context = options.max_context > 0 ? options.max_context : model.max_context();
  auto table = kernels::RopeTable::Create(rope, max_context);
  if (!table.ok()) return table.status();
  std::optional<kernels::RopeTable> local;
  if (model.rope_local_theta() > 0) {
    kernels::RopeConfig local_rope;  // unscaled, as HF's sliding layers
    local_rope.head_dim = model.head_dim();
    local_rope.theta = model.rope_local_theta();
    auto lt = kernels::RopeTable::Create(local_rope, max_context);
    if (!lt.ok()) return lt.status();
    local = *std::move(lt);
  }
  auto ops = std::make_unique<CpuHostOps>(model, embedding, max_context, options.pool,
                                          *std::move(table), std::move(local), std::max(options.sequences, 1));
  if (!ops->ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate the KV cache for ", max_context,
                                                     " positions", options.sequences > 1 ? absl::StrCat(" x ", options.sequences, " sequences") : ""));
  }
  return std::unique_ptr<HostOps>(std::move(ops));
}

}  // namespace dk::runtime
