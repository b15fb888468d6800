#include "runtime/cpu/session.h"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "formats/weight_format.h"
#include "runtime/cpu/cpu_device.h"
#include "util/status.h"
#include "weights/dequant.h"

namespace dk::runtime {
namespace {
// The table the host's embedding step reads on every token.
constexpr char kEmbedding[] = "model.embed_tokens.weight";
}  // namespace

absl::StatusOr<weights::Weights> ReadWeightsSpec(const std::string& spec,
                                                const elf::ModelShape& model, ThreadPool* pool) {
  if (spec == "synthetic" || absl::StartsWith(spec, "synthetic:")) {
    uint64_t seed = 1;
    if (spec != "synthetic" && (spec.size() == 10 || !absl::SimpleAtoi(spec.substr(10), &seed))) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights '", spec, "': the seed after 'synthetic:' must be a decimal number"));
    }
    return weights::MakeSyntheticWeights(model, seed, pool);
  }
  return weights::LoadWeights(spec, nullptr, pool);
}

weights::BlocksOnly GgufBlocksOnly(const elf::Program& program) {
  std::set<std::string> stored, other;
  for (const elf::BufferObject& b : program.bos()) {
    if (b.weight_tensor().empty()) continue;
    (b.blocks_as_stored() ? stored : other).insert(b.weight_tensor());
  }
  auto only = std::make_shared<std::set<std::string>>();
  for (const std::string& t : stored) {
    if (!other.count(t)) only->insert(t);
  }
  // The embedding's rows the host dequantizes from the blocks when it embeds a
  // token (where the file stores it so): in a GGUF stage, unless a BO reads its bf16.
  if (!stored.empty() && !other.count(kEmbedding)) only->insert(kEmbedding);
  if (only->empty()) return nullptr;
  return [only](absl::string_view name) { return only->count(std::string(name)) > 0; };
}

SessionMemory EstimateSessionMemory(const elf::Program& program, const weights::BlocksOnly& blocks_only,
                                    int max_context) {
  SessionMemory m;
  const elf::ModelShape& model = program.model();
  for (const auto& [name, dims] : weights::ExpectedTensors(model)) {
    if (blocks_only && blocks_only(name)) continue;
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    m.loaded_weights += 2 * n;
  }
  for (const elf::BufferObject& b : program.bos()) {
    (b.weight_tensor().empty() ? m.other_bos : m.weight_bos) += b.size_bytes();
    if (!b.weight_tensor().empty() && b.category() != elf::STATIC) m.released = false;
  }
  const int64_t positions = max_context > 0 ? max_context : model.max_context();
  m.kv_cache = 2 * int64_t{2} * model.n_layers() * model.n_kv_heads() * positions * model.head_dim();
  return m;
}

absl::Status CheckSessionMemory(const SessionMemory& need, int64_t available, const std::string& what) {
  if (available < 0 || need.total() <= available) return absl::OkStatus();
  auto gb = [](int64_t b) { return absl::StrCat(static_cast<double>(b / 10000000) / 100.0, " GB"); };
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " needs about ", gb(need.total()), " of memory (weights as loaded ", gb(need.loaded_weights),
      ", weight BOs ", gb(need.weight_bos), need.released ? ", the larger of the two" : ", both held",
      "; other BOs ", gb(need.other_bos),
      ", KV cache ", gb(need.kv_cache), "), more than MemAvailable ", gb(available),
      ": refused before allocating. Use a stage with smaller weights (decode_gguf reads the GGUF's own "
      "blocks) or a smaller max_context (elfc --max_context)"));
}

int64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}

absl::StatusOr<weights::Weights> ReadWeightsSpec(const std::string& spec, const elf::Program& program,
                                                int max_context, ThreadPool* pool) {
  const bool synthetic = spec == "synthetic" || absl::StartsWith(spec, "synthetic:");
  const weights::BlocksOnly blocks_only = synthetic ? nullptr : GgufBlocksOnly(program);
  DK_RETURN_IF_ERROR(CheckSessionMemory(EstimateSessionMemory(program, blocks_only, max_context), MemAvailableBytes(),
                                        absl::StrCat("a session of model ", program.model().name())));
  if (synthetic) return ReadWeightsSpec(spec, program.model(), pool);
  return weights::LoadWeights(spec, blocks_only, pool);
}

absl::StatusOr<std::shared_ptr<const weights::Weights>> LoadWeightsSpec(
    const std::string& spec, const elf::ModelShape& model, ThreadPool* pool) {
  DK_ASSIGN_OR_RETURN(weights::Weights w, ReadWeightsSpec(spec, model, pool));
  return std::make_shared<const weights::Weights>(std::move(w));
}

absl::StatusOr<std::unique_ptr<CpuSession>> CpuSession::Open(
    const elf::Program& program, const std::string& elf_name,
    std::shared_ptr<const weights::Weights> weights, const SessionOptions& options) {
  return OpenImpl(program, elf_name, std::move(weights), nullptr, options);
}

absl::StatusOr<std::unique_ptr<CpuSession>> CpuSession::OpenOwning(
    const elf::Program& program, const std::string& elf_name, weights::Weights weights,
    const SessionOptions& options) {
  auto owned = std::make_shared<weights::Weights>(std::move(weights));
  weights::Weights* releasable = owned.get();
  return OpenImpl(program, elf_name, std::move(owned), releasable, options);
}

absl::StatusOr<std::unique_ptr<CpuSession>> CpuSession::OpenImpl(
    const elf::Program& program, const std::string& elf_name,
    std::shared_ptr<const weights::Weights> weights, weights::Weights* releasable,
    const SessionOptions& options) {
  std::unique_ptr<CpuSession> s(new CpuSession());
  s->weights_ = std::move(weights);
  // One pool for the device and the host ops (not one each): they never run at once.
  ThreadPool* pool = options.pool;
  if (pool == nullptr) {
    s->own_pool_ = std::make_unique<ThreadPool>(ThreadPoolOptions{});
    pool = s->own_pool_.get();
  }
  s->device_ = MakeCpuDevice(DeviceOptions{options.validate}, pool, options.cpu);
  const weights::Tensor* embed = s->weights_->Find(kEmbedding);
  if (embed == nullptr) {
    return absl::NotFoundError(absl::StrCat("weights ", s->weights_->source(),
                                            " have no ", kEmbedding));
  }
  CpuHostOptions host_options;
  host_options.max_context = options.max_context;
  host_options.pool = pool;
  host_options.sequences = options.sequences;
  if (embed->data.size() == 0 && embed->stored.data != nullptr) {
    // Loaded as blocks only (GgufBlocksOnly): each row dequantized from the file's
    // blocks when the host embeds its token, as the full load would have (the same
    // dequantizer, so the same bf16).
    const std::optional<formats::WeightFormat> format = elf::WeightFormatOfBlocks(embed->stored.format);
    const std::optional<uint32_t> type = format ? formats::GgmlTypeId(*format) : std::nullopt;
    if (!type || embed->stored.qk_heads != 0) {
      return absl::InternalError(absl::StrCat("the embedding of ", s->weights_->source(),
                                              " has no bf16 rows and no blocks the host can dequantize"));
    }
    const weights::StoredBlocks blocks = embed->stored;
    const int64_t hidden = program.model().hidden();
    s->embedding_ = std::make_unique<EmbeddingRows>(
        [blocks, hidden, ggml = static_cast<weights::GgmlType>(*type)](int64_t row, bf16* out) {
          weights::DequantizeToBf16(ggml, blocks.data + row * blocks.row_bytes, hidden, out);
        },
        program.model().vocab(), hidden);
  } else {
    s->embedding_ = std::make_unique<EmbeddingRows>(embed->data.data(), program.model().vocab(),
                                                    program.model().hidden());
  }
  DK_ASSIGN_OR_RETURN(s->host_, MakeCpuHostOps(program.model(), s->embedding_.get(), host_options));
  if (options.wrap_host) s->host_ = options.wrap_host(std::move(s->host_), program.model());
  Decoder::Options decoder_options;
  decoder_options.validate = options.validate;
  decoder_options.prefill_rows = options.prefill_rows;
  decoder_options.score_rows = options.score_rows;
  decoder_options.max_context = options.max_context;
  decoder_options.sequences = options.sequences;
  decoder_options.batch_rows = options.batch_rows;
  // With tied embeddings in bf16 BOs the host reads the embedding's rows from the LM
  // head's BOs (decided before placing, so that the table's rows can go part by part).
  const bool embedding_from_bos = releasable != nullptr && program.model().tied_embeddings() &&
                                  s->embedding_->CanUseBos(program, kEmbedding).ok();
  if (releasable != nullptr) {
    CpuSession* session = s.get();
    decoder_options.weight_placed = [session, releasable, embedding_from_bos](const std::string& tensor,
                                                                              int64_t begin, int64_t end, bool last) {
      if (tensor != kEmbedding) {
        if (last) session->released_bytes_ += releasable->ReleaseData(tensor);
      } else if (embedding_from_bos) {
        releasable->ReleaseRows(tensor, begin, end);
      }
    };
  }
  DK_ASSIGN_OR_RETURN(s->decoder_, Decoder::Create(program, elf_name, *s->weights_, s->device_.get(),
                                                   s->host_.get(), decoder_options));
  if (releasable != nullptr && embed->data.size() == 0) {
    // Blocks only: the LM head's BOs (tied) have copied the file's blocks; the rows the
    // host dequantizes later are read from the file again, a few pages a token.
    releasable->ReleaseData(kEmbedding);
  }
  if (embedding_from_bos) {
    std::vector<BufferObject*> bos;
    for (int i = 0; i < program.bos_size(); ++i) bos.push_back(s->decoder_->bo(i));
    DK_RETURN_IF_ERROR(s->embedding_->UseBos(program, bos, kEmbedding));
    s->released_bytes_ += releasable->ReleaseData(kEmbedding);
  }
  return s;
}

}  // namespace dk::runtime
