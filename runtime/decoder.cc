#include "runtime/decoder.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "registry/registry.h"
#include "util/status.h"

namespace dk::runtime {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t Numel(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

struct Decoder::Copy {
  BufferObject* bo = nullptr;
  uint8_t* host = nullptr;  // host value (its row 0) or weight source
  size_t bytes = 0;         // per token row
  bool static_once = false;  // a STATIC BO mirroring a host value: written on first use
  const std::string* value_name = nullptr;
  size_t host_row_bytes = 0, bo_row_bytes = 0;  // token row strides; 0: one row
  int host_rows = 1, bo_rows = 1;                // rows held (row r in slot r mod rows)
  uint8_t* host_at(size_t r) const { return host + RowSlot(r, host_rows) * host_row_bytes; }
  size_t bo_at(size_t r) const { return RowSlot(r, bo_rows) * bo_row_bytes; }
  // Row copies a run of `rows` token rows makes: one where neither side holds rows
  // (a weight BO rewritten from its tensor, a value all rows share): the same bytes to
  // the same place.
  int Copies(int rows) const { return host_row_bytes == 0 && bo_row_bytes == 0 ? std::min(rows, 1) : rows; }
};

struct Decoder::StepPlan {
  int group = -1;  // device group number, or -1 for a host step
  std::vector<Copy> writes, reads;
  const elf::HostStep* host = nullptr;
  int host_handle = -1;  // HostOps::BindHostStep's
};

Decoder::~Decoder() = default;

absl::StatusOr<std::unique_ptr<Decoder>> Decoder::Create(const elf::Program& program,
                                                         const std::string& elf_name,
                                                         const weights::Weights& weights,
                                                         Device* device, HostOps* host,
                                                         const Options& options) {
  if (auto s = elf::ValidateProgram(program); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(elf_name, ": ", s.message()));
  }
  if (auto s = weights::CheckWeights(weights, program.model()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("weights ", weights.source(), " do not fit ",
                                                   elf_name, " (model ", program.model().name(),
                                                   "): ", s.message()));
  }
  std::unique_ptr<Decoder> d(new Decoder());
  d->program_ = program;
  d->elf_name_ = elf_name;
  d->device_ = device;
  d->host_ = host;
  d->options_ = options;
  DK_RETURN_IF_ERROR(d->Plan(weights));
  return d;
}

absl::Status Decoder::Plan(const weights::Weights& weights) {
  context_ = options_.max_context > 0 ? options_.max_context : program_.model().max_context();
  if (options_.prefill_rows < 0 || options_.prefill_rows > context_) {
    return absl::InvalidArgumentError(absl::StrCat("prefill rows (the prompt chunk) must be in [1, ", context_,
                                                   "] (the context), not ", options_.prefill_rows));
  }
  prefill_rows_ = options_.prefill_rows;  // 0: PlanRows picks
  DK_RETURN_IF_ERROR(PlanRows());
  DK_RETURN_IF_ERROR(PlanValues());
  std::vector<uint8_t*> weight_src;
  DK_RETURN_IF_ERROR(AllocateBos(weights, &weight_src));
  std::vector<BufferObject*> raw;
  for (const auto& bo : bos_) raw.push_back(bo.get());
  DK_ASSIGN_OR_RETURN(loaded_, device_->Load(program_, elf_name_, raw));
  int group = 0;
  for (const elf::Step& step : program_.steps()) {
    StepPlan plan;
    if (step.has_host()) {
      DK_RETURN_IF_ERROR(PlanHostStep(step.host(), static_cast<int>(plan_.size()), &plan));
    } else {
      plan.group = group++;
      DK_RETURN_IF_ERROR(PlanGroup(step.group(), weight_src, &plan));
    }
    plan_.push_back(std::move(plan));
  }
  timings_.assign(plan_.size(), StepTiming{});
  if (logits_value_ < 0) return absl::InvalidArgumentError("the program has no f32 host value 'logits'");
  if (topk_ids_value_ < 0 || topk_values_value_ < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        elf_name_, ": the program has no 'topk' host step binding 'ids' and 'values' (an ELF from before top-k "
        "became a program value: rebuild it)"));
  }
  return absl::OkStatus();
}

absl::Status Decoder::PlanRows() {
  // The tail: the steps after the last layer that only turn the last hidden state
  // into the token (final norm, LM head, top-k). They write no KV cache, so a chunk
  // needs them for its last token alone.
  size_t tail = program_.steps_size();
  for (; tail > 0; --tail) {
    const elf::Step& st = program_.steps(static_cast<int>(tail) - 1);
    if (st.has_group() ? st.group().layer() >= 0 : st.host().kind() != elf::HostStep::TOPK) break;
  }
  tail_begin_ = tail;
  // A draft check runs max_draft + 1 rows through every step, the tail included; so
  // does a batched run, batch_rows of them.
  check_rows_ = program_.has_speculative() ? program_.speculative().max_draft() + 1 : 1;
  check_rows_ = std::max(check_rows_, options_.score_rows);
  if (options_.sequences < 1 || options_.batch_rows < 1 || options_.batch_rows > context_) {
    return absl::InvalidArgumentError(absl::StrCat("batched decode: sequences (", options_.sequences,
                                                   ") must be >= 1 and batch rows (", options_.batch_rows,
                                                   ") in [1, ", context_, "]"));
  }
  batch_rows_ = options_.batch_rows;
  tail_rows_ = std::max(check_rows_, batch_rows_);
  // Which activations each part uses: 1 before the tail, 2 in the tail (weights: none).
  std::vector<int> bo_part(program_.bos_size(), 0), value_part(program_.values_size(), 0);
  std::map<std::string, int> bo_index, value_index;
  for (int i = 0; i < program_.bos_size(); ++i) bo_index[program_.bos(i).name()] = i;
  for (int i = 0; i < program_.values_size(); ++i) value_index[program_.values(i).name()] = i;
  for (size_t s = 0; s < program_.steps_size(); ++s) {
    const int part = s < tail_begin_ ? 1 : 2;
    const elf::Step& st = program_.steps(static_cast<int>(s));
    if (st.has_host()) {
      for (const auto& b : st.host().bindings()) value_part[value_index.at(b.value())] |= part;
      continue;
    }
    for (const elf::Launch& l : st.group().launches()) {
      for (const auto& bind : l.bindings()) {
        const int i = bo_index.at(bind.bo());
        const elf::BufferObject& b = program_.bos(i);
        if (!b.weight_tensor().empty() || b.category() == elf::STATIC) continue;  // weights: one copy
        bo_part[i] |= part;
        if (!b.host_value().empty()) value_part[value_index.at(b.host_value())] |= part;
      }
    }
  }
  if (prefill_rows_ == 0) {
    // The default chunk: elf::kDefaultPrefillRows, fewer where one token row of the
    // activations before the tail (device and host sides, host values) is so large
    // that the chunk would pass kPrefillActivationBudget.
    int64_t row_bytes = 0;
    for (int i = 0; i < program_.bos_size(); ++i) {
      if (bo_part[i] & 1) row_bytes += program_.bos(i).size_bytes() * (program_.bos(i).category() == elf::INTERMEDIATE ? 1 : 2);
    }
    for (int i = 0; i < program_.values_size(); ++i) {
      const auto& v = program_.values(i);
      if (value_part[i] & 1) row_bytes += Numel(v.shape()) * elf::DTypeBytes(v.dtype());
    }
    const int64_t fit = row_bytes > 0 ? std::max<int64_t>(1, kPrefillActivationBudget / row_bytes) : elf::kDefaultPrefillRows;
    prefill_rows_ = static_cast<int>(std::min<int64_t>({elf::kDefaultPrefillRows, fit, context_}));
  }
  // The program's target may run chunks of whole row tiles only (npu2's GEMMs).
  DK_ASSIGN_OR_RETURN(const int64_t rows, elf::PrefillRowsFor(program_, options_.prefill_rows, prefill_rows_));
  prefill_rows_ = static_cast<int>(rows);
  const int prefix_rows = std::max(prefill_rows_, tail_rows_);
  auto rows_of = [&](int part) { return (part & 1) ? prefix_rows : (part & 2) ? tail_rows_ : 1; };
  bo_rows_.resize(program_.bos_size());
  value_rows_.resize(program_.values_size());
  for (int i = 0; i < program_.bos_size(); ++i) bo_rows_[i] = rows_of(bo_part[i]);
  for (int i = 0; i < program_.values_size(); ++i) value_rows_[i] = rows_of(value_part[i]);
  return absl::OkStatus();
}

absl::Status Decoder::PlanValues() {
  for (int i = 0; i < program_.values_size(); ++i) {
    const auto& v = program_.values(i);
    value_index_[v.name()] = i;
    // Sizes are ValidateProgram's (positive, at most elf::kMaxBytes), but even
    // those may not fit in memory: an error, not a null buffer written later.
    const int64_t row = Numel(v.shape()) * elf::DTypeBytes(v.dtype());
    value_bytes_.push_back(static_cast<size_t>(row));
    const int64_t bytes = row * value_rows_[i];
    values_.emplace_back(static_cast<size_t>(bytes));
    if (values_.back().size() != static_cast<size_t>(bytes)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(elf_name_, ": cannot allocate ", bytes, " bytes for host value '", v.name(), "'"));
    }
    values_.back().Zero();
    if (v.name() == "logits" && v.dtype() == elf::F32) logits_value_ = i;
  }
  return absl::OkStatus();
}

absl::Status Decoder::AllocateBos(const weights::Weights& weights, std::vector<uint8_t*>* weight_src) {
  weight_src->assign(program_.bos_size(), nullptr);
  // Per tensor: the last BO that reads it, or -1 when a WRITE BO rereads it every run.
  std::map<std::string, int> last_reader;
  for (int i = 0; i < program_.bos_size(); ++i) {
    const elf::BufferObject& b = program_.bos(i);
    if (b.weight_tensor().empty()) continue;
    auto [it, fresh] = last_reader.emplace(b.weight_tensor(), i);
    if (b.category() != elf::STATIC) {
      it->second = -1;
    } else if (!fresh && it->second >= 0) {
      it->second = i;
    }
  }
  for (int i = 0; i < program_.bos_size(); ++i) {
    const elf::BufferObject& b = program_.bos(i);
    bo_index_[b.name()] = i;
    DK_ASSIGN_OR_RETURN(std::unique_ptr<BufferObject> bo,
                        device_->Allocate(b.name(), b.size_bytes(), b.category(), bo_rows_[i]));
    bos_.push_back(std::move(bo));
    if (b.weight_tensor().empty()) continue;
    DK_ASSIGN_OR_RETURN((*weight_src)[i], PlaceWeight(i, weights));
    if (options_.weight_placed && b.category() == elf::STATIC) {
      const int64_t end = b.weight_row_end() ? b.weight_row_end() : b.weight_row_begin() + b.shape(0);
      options_.weight_placed(b.weight_tensor(), b.weight_row_begin(), end, last_reader.at(b.weight_tensor()) == i);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint8_t*> Decoder::PlaceWeight(int i, const weights::Weights& weights) {
  const elf::BufferObject& b = program_.bos(i);
  if (b.shape_size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat("weight BO '", b.name(), "' has rank ", b.shape_size()));
  }
  const weights::Tensor* t = weights.Find(b.weight_tensor());
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("BO '", b.name(), "' needs tensor '", b.weight_tensor(),
                                            "', which ", weights.source(), " does not have"));
  }
  // Freed whole (ReleaseData); a tensor whose placed rows' pages went (ReleaseRows)
  // still has its other rows, which is why this is not !has_data().
  // A BO of the file's own blocks reads `stored` alone (a tensor loaded as blocks
  // only has no data).
  if (!b.blocks_as_stored() && static_cast<int64_t>(t->data.size()) != t->numel()) {
    return absl::FailedPreconditionError(absl::StrCat("BO '", b.name(), "' needs tensor '", b.weight_tensor(),
                                                      "', whose data ", weights.source(), " has released"));
  }
  const int64_t cols = t->shape.size() == 2 ? t->shape[1] : 1;
  const int64_t all_rows = t->shape.empty() ? 0 : t->shape[0];
  const int64_t begin = b.weight_row_begin(), end = b.weight_row_end() ? b.weight_row_end() : all_rows;
  const int64_t rows = end - begin;
  const int64_t bo_rows = b.shape(0), bo_cols = b.shape_size() == 2 ? b.shape(1) : 1;
  if (end > all_rows || rows != bo_rows || cols != bo_cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BO '", b.name(), "' [", bo_rows, ", ", bo_cols, "] does not match rows [", begin, ", ", end,
        ") of tensor '", b.weight_tensor(), "' [", all_rows, ", ", cols, "]"));
  }
  const bf16* src = t->data.size() == 0 ? nullptr : t->data.data() + begin * cols;
  const std::string layout = b.layout().empty() ? std::string(registry::kRowMajor) : b.layout();
  DK_ASSIGN_OR_RETURN(const size_t need, device_->LayoutBytes(layout, b.block_format(), rows, cols));
  if (static_cast<int64_t>(need) != b.size_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("BO '", b.name(), "' is ", b.size_bytes(),
                                                   " bytes but layout ", layout, " ",
                                                   elf::BlockFormatName(b.block_format()), " needs ", need));
  }
  if (b.blocks_as_stored() && t->stored.format != b.block_format()) {
    // The ELF reads this file's own blocks: quantizing other values instead would
    // run a different model than the one the stage was built and gated for.
    const std::string stored = elf::BlockFormatName(t->stored.format);
    return absl::FailedPreconditionError(absl::StrCat(
        "BO '", b.name(), "' reads tensor '", b.weight_tensor(), "' as the GGUF it was built for stores it (",
        elf::BlockFormatName(b.block_format()), " blocks), but ", weights.source(), " holds it ",
        stored.empty() ? "as plain values" : absl::StrCat("in ", stored, " blocks"),
        ": run this ELF on that GGUF, or use a stage without quantize_weights(scheme = \"gguf\")"));
  }
  if (b.blocks_as_stored() && need != static_cast<size_t>(rows) * t->stored.row_bytes) {
    return absl::InternalError(absl::StrCat("BO '", b.name(), "': ", need, " bytes of blocks, the file has ",
                                            rows * t->stored.row_bytes));
  }
  // The BO's bytes: packed (or quantized into blocks, or the file's blocks copied)
  // once, here, into what the kernel reads; row-major rows as they are.
  auto place = [&](uint8_t* out, bool zeroed) -> absl::Status {
    if (b.blocks_as_stored()) return weights::CopyStoredRows(*t, begin, end, out);
    return device_->PackWeight(layout, b.block_format(), src, rows, cols, out, zeroed);
  };
  if (b.category() == elf::STATIC) {
    // Made straight in the BO (where the device allows it): no packed copy to
    // allocate, copy and free per weight.
    DK_RETURN_IF_ERROR(bos_[i]->Fill([&](uint8_t* dst) { return place(dst, /*zeroed=*/true); }));
    return nullptr;  // written for good
  }
  if (layout == registry::kRowMajor && b.block_format() == elf::BLOCK_FORMAT_NONE) {
    return reinterpret_cast<uint8_t*>(const_cast<bf16*>(src));
  }
  // A WRITE weight is rewritten every run: keep its packed host copy.
  AlignedBuffer<uint8_t> packed(need, PageMode::kHugePages);
  if (packed.size() != need) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", need, " bytes to pack ", b.name()));
  }
  DK_RETURN_IF_ERROR(place(packed.data(), /*zeroed=*/false));
  packed_weights_.push_back(std::move(packed));
  return packed_weights_.back().data();
}

absl::StatusOr<uint8_t*> Decoder::HostBytes(const elf::BufferObject& b) {
  const int vi = value_index_.at(b.host_value());
  const auto& v = program_.values(vi);
  const int64_t offset = b.host_offset() * elf::DTypeBytes(v.dtype());
  if (v.dtype() != b.dtype() || offset + b.size_bytes() > static_cast<int64_t>(value_bytes_[vi])) {
    return absl::InvalidArgumentError(absl::StrCat("BO '", b.name(), "' does not fit host value '", v.name(),
                                                   "' at offset ", b.host_offset()));
  }
  return values_[vi].data() + offset;
}

absl::Status Decoder::PlanHostStep(const elf::HostStep& step, int index, StepPlan* plan) {
  plan->host = &step;
  std::vector<std::pair<std::string, HostOps::Value>> values;
  for (const auto& b : step.bindings()) {
    const int vi = value_index_.at(b.value());
    const size_t row_bytes = value_rows_[vi] > 1 ? value_bytes_[vi] : 0;
    values.push_back(
        {b.param(), HostOps::Value{values_[vi].data(), &program_.values(vi), row_bytes, value_rows_[vi]}});
    // The token leaves through the top-k step's values (the host checks their types
    // and sizes when it binds the step).
    if (step.kind() == elf::HostStep::TOPK && b.param() == "ids") topk_ids_value_ = vi;
    if (step.kind() == elf::HostStep::TOPK && b.param() == "values") topk_values_value_ = vi;
  }
  absl::StatusOr<int> handle = host_->BindHostStep(step, values);
  if (!handle.ok()) {
    return absl::Status(handle.status().code(), absl::StrCat("ELF '", elf_name_, "', step ", index, " (host step '",
                                                             elf::HostStepName(step.kind()), "'): ", handle.status().message()));
  }
  plan->host_handle = *handle;
  return absl::OkStatus();
}

absl::Status Decoder::PlanGroup(const elf::LaunchGroup& group, const std::vector<uint8_t*>& weight_src,
                                StepPlan* plan) {
  std::set<int> seen_in, seen_out;
  for (const elf::Launch& l : group.launches()) {
    const registry::Kernel* kernel = nullptr;
    DK_RETURN_IF_ERROR(registry::FindSymbol(l.kernel_symbol(), &kernel).status());
    const std::set<std::string> outputs(kernel->outputs().begin(), kernel->outputs().end());
    for (const auto& bind : l.bindings()) {
      const int i = bo_index_.at(bind.bo());
      const elf::BufferObject& b = program_.bos(i);
      if (outputs.count(bind.param()) > 0) {
        // An OUTPUT BO is read back once per group, after the run.
        if (b.category() != elf::OUTPUT || !seen_out.insert(i).second) continue;
        if (b.host_value().empty()) {
          return absl::InvalidArgumentError(absl::StrCat("OUTPUT BO '", b.name(), "' mirrors no host value"));
        }
        DK_ASSIGN_OR_RETURN(uint8_t* dst, HostBytes(b));
        plan->reads.push_back(RowStrides(Copy{bos_[i].get(), dst, static_cast<size_t>(b.size_bytes())}, i));
        continue;
      }
      if (seen_out.count(i)) continue;  // produced earlier in this group: already on the device
      const bool writes = b.category() == elf::WRITE || (b.category() == elf::STATIC && !b.host_value().empty());
      if (!writes || !seen_in.insert(i).second) continue;
      Copy c{bos_[i].get(), weight_src[i], static_cast<size_t>(b.size_bytes())};
      if (!b.host_value().empty()) {
        DK_ASSIGN_OR_RETURN(c.host, HostBytes(b));
        c.value_name = &b.host_value();
      } else if (c.host == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("WRITE BO '", b.name(),
                                                       "' mirrors neither a host value nor a weight"));
      }
      c.static_once = b.category() == elf::STATIC;
      plan->writes.push_back(RowStrides(c, i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Decoder::Step(uint32_t token) {
  DK_RETURN_IF_ERROR(Advance(token));
  return last_;
}

absl::Status Decoder::Advance(uint32_t token) { return RunChunk(absl::Span<const uint32_t>(&token, 1)); }

absl::Status Decoder::Feed(absl::Span<const uint32_t> tokens) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to feed");
  if (position_ + static_cast<int64_t>(tokens.size()) > context_) {
    return absl::OutOfRangeError(absl::StrCat(
        "a prompt of ", tokens.size(), " tokens", position_ > 0 ? absl::StrCat(" after ", position_, " others") : "",
        " does not fit the context of ", context_, " positions (raise max_context or shorten the prompt)"));
  }
  const size_t chunk = static_cast<size_t>(prefill_rows_);
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    DK_RETURN_IF_ERROR(RunChunk(tokens.subspan(i, std::min(chunk, tokens.size() - i))));
  }
  return absl::OkStatus();
}

absl::Status Decoder::RunChunk(absl::Span<const uint32_t> tokens, bool tail_all_rows) {
  const int m = static_cast<int>(tokens.size());
  const int most = tail_all_rows ? check_rows_ : std::max(prefill_rows_, tail_rows_);
  if (m > most) return absl::InvalidArgumentError(absl::StrCat(m, " tokens in one run, the decoder holds ", most));
  last_row_ = m - 1;
  last_score_ = logit_rows_ = 0;
  for (size_t s = 0; s < plan_.size(); ++s) {
    // Steps before the tail run for every token of the chunk, the tail for its last
    // (a draft check: for every token too).
    const RowRange rows = s < tail_begin_ || tail_all_rows ? RowRange{0, m} : RowRange{m - 1, 1};
    const StepPlan& plan = plan_[s];
    StepTiming& t = timings_[s];
    t = StepTiming{};
    if (plan.host == nullptr) {
      DK_RETURN_IF_ERROR(RunGroup(s, rows));
      continue;
    }
    const int64_t t0 = NowNs();
    absl::Status st = host_->RunHostStep(plan.host_handle, tokens.subspan(rows.first, rows.count),
                                         position_ + rows.first, rows.first);
    t.run_ns = NowNs() - t0;
    if (!st.ok()) {
      // Where it happened: a host step's own message (top-k over NaN logits, say)
      // cannot know the ELF, the step or the position.
      const std::string where =
          rows.count == 1 ? absl::StrCat("position ", position_ + rows.first, ", input token ", tokens[rows.first])
                          : absl::StrCat("positions ", position_, "..", position_ + m - 1);
      return absl::Status(st.code(), absl::StrCat("ELF '", elf_name_, "', step ", s, " (host step '",
                                                  elf::HostStepName(plan.host->kind()), "'), ", where, ": ", st.message()));
    }
  }
  static_mirrors_written_ = true;
  position_ += m;
  return ReadTopK();
}

absl::Status Decoder::StepBatch(absl::Span<const BatchRow> rows) {
  const int m = static_cast<int>(rows.size());
  if (m == 0 || m > batch_rows_) {
    return absl::InvalidArgumentError(absl::StrCat(m, " rows in one batched run: the decoder takes 1 to ", batch_rows_,
                                                   " (Options::batch_rows)"));
  }
  for (const BatchRow& r : rows) {
    if (r.sequence < 0 || r.sequence >= options_.sequences) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", r.sequence, ": the decoder holds ",
                                                     options_.sequences, " (Options::sequences)"));
    }
    if (r.position < 0 || r.position >= context_) {
      return absl::OutOfRangeError(absl::StrCat("position ", r.position, " of sequence ", r.sequence,
                                                " does not fit the context of ", context_, " positions"));
    }
  }
  last_score_ = logit_rows_ = 0;
  const RowRange all{0, m};
  for (size_t s = 0; s < plan_.size(); ++s) {
    const StepPlan& plan = plan_[s];
    StepTiming& t = timings_[s];
    t = StepTiming{};
    if (plan.host == nullptr) {
      DK_RETURN_IF_ERROR(RunGroup(s, all));
      continue;
    }
    const int64_t t0 = NowNs();
    absl::Status st = host_->RunHostStepBatch(plan.host_handle, rows);
    t.run_ns = NowNs() - t0;
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("ELF '", elf_name_, "', step ", s, " (host step '",
                                                  elf::HostStepName(plan.host->kind()), "'), a batched run of ", m,
                                                  " rows: ", st.message()));
    }
  }
  static_mirrors_written_ = true;
  last_row_ = m - 1;
  logit_rows_ = m;
  return ReadTopK();
}

absl::Status Decoder::WriteInputs(size_t s, RowRange rows, StepTiming* t) {
  for (const Copy& c : plan_[s].writes) {
    if (c.static_once && static_mirrors_written_) {
      if (options_.validate) {
        // The BO still holds the bytes of the first token; the value moved on.
        scratch_.resize(c.bytes);
        DK_RETURN_IF_ERROR(c.bo->Read(scratch_.data(), c.bytes));
        if (std::memcmp(scratch_.data(), c.host_at(rows.first), c.bytes) != 0) {
          return absl::FailedPreconditionError(absl::StrCat(
              "BO protocol violation: ELF '", elf_name_, "', group '",
              program_.steps(static_cast<int>(s)).group().name(), "': STATIC BO '", c.bo->name(),
              "' mirrors host value '", *c.value_name, "', which changed after the BO was "
              "written once (position ", position_ + rows.first, "); an activation must not be STATIC"));
        }
      }
      continue;
    }
    for (int r = rows.first; r < rows.first + c.Copies(rows.count); ++r) {
      DK_RETURN_IF_ERROR(c.bo->Write(c.host_at(r), c.bytes, c.bo_at(r)));
    }
    DK_RETURN_IF_ERROR(c.bo_row_bytes == 0
                           ? c.bo->SyncToDevice()
                           : c.bo->SyncRangeToDevice(rows.count * c.bytes, c.bo_at(rows.first)));
    t->bytes_written += c.Copies(rows.count) * c.bytes;
  }
  return absl::OkStatus();
}

absl::Status Decoder::RunGroup(size_t s, RowRange rows) {
  const StepPlan& plan = plan_[s];
  StepTiming& t = timings_[s];
  const int64_t t0 = NowNs();
  DK_RETURN_IF_ERROR(WriteInputs(s, rows, &t));
  const int64_t t1 = NowNs();
  DK_ASSIGN_OR_RETURN(std::unique_ptr<Run> run, device_->Start(*loaded_, plan.group, rows));
  DK_RETURN_IF_ERROR(run->Wait());
  const int64_t t2 = NowNs();
  for (const Copy& c : plan.reads) {
    DK_RETURN_IF_ERROR(c.bo_row_bytes == 0
                           ? c.bo->SyncFromDevice()
                           : c.bo->SyncRangeFromDevice(rows.count * c.bytes, c.bo_at(rows.first)));
    for (int r = rows.first; r < rows.first + c.Copies(rows.count); ++r) {
      DK_RETURN_IF_ERROR(c.bo->Read(c.host_at(r), c.bytes, c.bo_at(r)));
    }
    t.bytes_read += c.Copies(rows.count) * c.bytes;
  }
  t.write_ns = t1 - t0;
  t.run_ns = t2 - t1;
  t.read_ns = NowNs() - t2;
  return absl::OkStatus();
}

absl::Status Decoder::Score(absl::Span<const uint32_t> tokens, std::vector<uint32_t>* top1) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to score");
  if (position_ + static_cast<int64_t>(tokens.size()) > context_) {
    return absl::OutOfRangeError(absl::StrCat(tokens.size(), " tokens to check at position ", position_,
                                              " do not fit the context of ", context_, " positions"));
  }
  DK_RETURN_IF_ERROR(RunChunk(tokens, /*tail_all_rows=*/true));
  top1->clear();
  for (int r = 0; r < static_cast<int>(tokens.size()); ++r) {
    const int32_t id = Top1(r);
    if (id < 0) return absl::InternalError(absl::StrCat("row ", r, " of the check produced no top-k"));
    top1->push_back(static_cast<uint32_t>(id));
  }
  last_score_ = logit_rows_ = static_cast<int>(tokens.size());
  return absl::OkStatus();
}

absl::Status Decoder::Rewind(int keep) {
  if (keep < 1 || keep > last_score_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Rewind(", keep, "): the last Score fed ", last_score_, " tokens (keep 1..", last_score_, ")"));
  }
  position_ -= last_score_ - keep;
  last_row_ = keep - 1;
  last_score_ = logit_rows_ = keep;
  return ReadTopK();
}

int32_t Decoder::Top1(int row) const {
  const int vi = topk_ids_value_;
  return reinterpret_cast<const int32_t*>(values_[vi].data() + RowSlot(row, value_rows_[vi]) * value_bytes_[vi])[0];
}

absl::Status Decoder::ReadRow(int row, StepResult* out) const {
  // The top-k step's values, best first, up to the first id -1 (no finite logit
  // left); clear() + push_back reuse the vectors' capacity: no allocation after the
  // first token.
  auto at = [&](int vi) { return values_[vi].data() + RowSlot(row, value_rows_[vi]) * value_bytes_[vi]; };
  const auto* ids = reinterpret_cast<const int32_t*>(at(topk_ids_value_));
  const auto* vals = reinterpret_cast<const float*>(at(topk_values_value_));
  const size_t k = value_bytes_[topk_ids_value_] / sizeof(int32_t);
  out->top_ids.clear();
  out->top_logits.clear();
  for (size_t i = 0; i < k && ids[i] >= 0; ++i) {
    out->top_ids.push_back(static_cast<uint32_t>(ids[i]));
    out->top_logits.push_back(vals[i]);
  }
  if (out->top_ids.empty()) return absl::InternalError("the program produced no top-k");
  out->token = out->top_ids[0];
  return absl::OkStatus();
}

Decoder::Copy Decoder::RowStrides(Copy c, int bo) const {
  const elf::BufferObject& b = program_.bos(bo);
  c.bo_row_bytes = bo_rows_[bo] > 1 ? c.bytes : 0;
  c.bo_rows = bo_rows_[bo];
  if (!b.host_value().empty()) {
    const int vi = value_index_.at(b.host_value());
    c.host_row_bytes = value_rows_[vi] > 1 ? value_bytes_[vi] : 0;
    c.host_rows = value_rows_[vi];
  }
  return c;
}

void Decoder::Reset() {
  position_ = 0;
  host_->Reset();
}

absl::Status Decoder::Truncate(int positions) {
  if (positions < 0 || positions > position_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Truncate(", positions, "): the sequence has ", position_, " positions (keep 0..", position_, ")"));
  }
  if (positions == 0) {
    Reset();
    return absl::OkStatus();
  }
  position_ = positions;
  last_score_ = logit_rows_ = 0;
  return absl::OkStatus();
}

const float* Decoder::logits() const {
  const int vi = logits_value_;
  return reinterpret_cast<const float*>(values_[vi].data() + RowSlot(last_row_, value_rows_[vi]) * value_bytes_[vi]);
}

const float* Decoder::row_logits(int row) const {
  if (row < 0 || row >= logit_rows_) return nullptr;
  const int vi = logits_value_;
  return reinterpret_cast<const float*>(values_[vi].data() + RowSlot(row, value_rows_[vi]) * value_bytes_[vi]);
}

const void* Decoder::value(const std::string& name, size_t* bytes) const {
  for (int i = 0; i < program_.values_size(); ++i) {
    if (program_.values(i).name() != name) continue;
    if (bytes != nullptr) *bytes = value_bytes_[i];
    return values_[i].data() + RowSlot(last_row_, value_rows_[i]) * value_bytes_[i];
  }
  return nullptr;
}

}  // namespace dk::runtime
