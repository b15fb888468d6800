// The decode loop over a decode ELF: loads a program on a device, binds its BOs,
// writes the weights, and runs one token at a time through the program's steps
// (launch groups on the device, host steps on the host), timing every step.
//
//   DK_ASSIGN_OR_RETURN(auto decoder, Decoder::Create(program, "decode.elf", weights,
//                                                     device.get(), host.get()));
//   for (uint32_t token : prompt) DK_RETURN_IF_ERROR(decoder->Step(token).status());
//
// Nothing is allocated or built per token: every copy a step makes was planned
// at Create. Thread-safety: one thread drives a Decoder.
#ifndef DK_RUNTIME_DECODER_H_
#define DK_RUNTIME_DECODER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "elf/prefill_plan.h"
#include "elf/program.pb.h"
#include "runtime/runtime.h"
#include "util/aligned_buffer.h"
#include "weights/weights.h"

namespace dk::runtime {

// Time and traffic of one program step during the last token.
struct StepTiming {
  int64_t write_ns = 0;       // host -> BO writes and syncs before the run
  int64_t run_ns = 0;         // device run (start to wait), or the host step
  int64_t read_ns = 0;        // syncs and reads back after the run
  int64_t bytes_written = 0;  // bytes written to BOs before the run
  int64_t bytes_read = 0;
};

struct StepResult {
  uint32_t token = 0;             // greedy choice (top-1; ties to the smaller id)
  std::vector<uint32_t> top_ids;  // best first
  std::vector<float> top_logits;
};

// The prompt chunk when none is given is elf::kDefaultPrefillRows (elf/prefill_plan.h),
// or fewer, so that the default chunk's activation buffers stay within this.
inline constexpr int64_t kPrefillActivationBudget = int64_t{256} << 20;

class Decoder {
 public:
  // Checks the weights against the program's model, allocates and fills every BO
  // (STATIC weights written once here), and loads the program on `device`.
  // `device` and `host` must outlive the decoder; `weights` too (WRITE weight BOs
  // are rewritten from it on every run).
  struct Options {
    // Also check what only the host can see: a STATIC BO that mirrors a host value
    // (an activation wrongly marked STATIC) whose value changed after the BO was
    // written once.
    bool validate = false;
    // Called during Create after each STATIC weight BO has been written for good,
    // with the rows [begin, end) of `tensor` it holds; `last` once every BO that
    // reads the tensor has been (all STATIC): from then on the decoder never reads
    // the tensor again, so an owner of the weights may free it (Weights::ReleaseData),
    // and rows already placed before that. A tensor some WRITE BO is rewritten from
    // never gets `last`.
    std::function<void(const std::string& tensor, int64_t begin, int64_t end, bool last)> weight_placed;
    // The most tokens one run of the program processes (Feed's chunk): every BO
    // and host value the steps before the LM head use holds this many token rows.
    // 1: tokens go through one at a time. Each row's result is the one feeding the
    // tokens one by one gives (the kernels' multi-row forms are bit-identical per
    // row), so this changes speed and memory, never the output. 0: elf::kDefaultPrefillRows,
    // or fewer when the context is shorter or a chunk's activation buffers (device and
    // host sides, host values) would pass kPrefillActivationBudget; else at most the context.
    int prefill_rows = 0;
    // The positions the host's KV cache holds (0: the model's max_context), for
    // Feed's up-front check of a prompt's length.
    int max_context = 0;
    // Batched decode (StepBatch): the sequences (KV caches) the host holds, and the
    // most token rows one StepBatch takes; the tail's buffers (LM head, top-k) hold
    // that many rows. 1 and 1: no batched runs, no extra memory.
    int sequences = 1;
    int batch_rows = 1;
    // The most tokens one Score takes (rows the LM head and top-k hold), beyond the
    // program's own draft check (Program.speculative: max_draft + 1). 0: the
    // program's. A perplexity run (tools/perplexity) scores every position of a
    // window this way: logits at each row, the LM head run as one multi-row GEMM.
    int score_rows = 0;
  };
  static absl::StatusOr<std::unique_ptr<Decoder>> Create(const elf::Program& program,
                                                         const std::string& elf_name,
                                                         const weights::Weights& weights,
                                                         Device* device, HostOps* host,
                                                         const Options& options);

  // Feeds `token` at position(), runs every step; the top-k of the logits is then
  // last(). Allocates nothing once the first token has run (the hot path).
  absl::Status Advance(uint32_t token);
  // Feeds `tokens` at positions position() on, options.prefill_rows at a time (one
  // run per step for all of a chunk's rows); the LM head and top-k run for each
  // chunk's last token only, whose top-k is then last(). Greedy decode after Feed
  // chooses what it would after Advance-ing the tokens one by one.
  absl::Status Feed(absl::Span<const uint32_t> tokens);

  // The draft check of speculative decoding (Program.speculative): feeds `tokens`
  // (at most check_rows()) in one run with the LM head and top-k on every row;
  // (*top1)[i] is the greedy choice after tokens[0..i], what Advance-ing them one by
  // one would have chosen. last() is then the last row's.
  absl::Status Score(absl::Span<const uint32_t> tokens, std::vector<uint32_t>* top1);
  // Batched decode (docs/architecture.md s.4, "Sequences batched"): one run of every
  // step over rows.size() (at most batch_rows()) token rows, row i being token
  // rows[i].token of sequence rows[i].sequence (< Options::sequences) at position
  // rows[i].position, with that sequence's own KV cache; the tail runs on every row.
  // Each row's top-k (ReadRow) and logits (row_logits) are then what Advance-ing that
  // token on that sequence alone gives, bit for bit. Rows of one sequence at
  // consecutive positions may share a run (a piece of its prompt). Sequence 0's KV
  // cache is the one Advance / Feed use; position() is not moved. last() becomes the
  // last row's.
  absl::Status StepBatch(absl::Span<const BatchRow> rows);
  int batch_rows() const { return batch_rows_; }
  int sequences() const { return options_.sequences; }
  // Keeps only the first `keep` (>= 1) tokens of the last Score: position() moves
  // back past the rest (their KV entries are overwritten before anything reads
  // them) and last() / logits() become row keep - 1's.
  absl::Status Rewind(int keep);
  // The most tokens one Score takes: the program's max_draft + 1 (1 without
  // Program.speculative), or Options::score_rows where that is more.
  int check_rows() const { return check_rows_; }
  // The prompt chunk in force (Options::prefill_rows resolved).
  int prefill_rows() const { return prefill_rows_; }
  // The top-k of row `row` (< the tokens kept) of the last Score, into *out.
  absl::Status ReadRow(int row, StepResult* out) const;
  const StepResult& last() const { return last_; }
  // Advance, returning a copy of last().
  absl::StatusOr<StepResult> Step(uint32_t token);

  // Starts a new sequence (position 0, empty KV cache).
  void Reset();
  // Keeps the first `positions` (0 <= positions <= position()) tokens of the sequence:
  // position() moves back to it, and the KV entries past it are overwritten before
  // anything reads them. last() and logits() are stale until the next Advance / Feed
  // (feed the last kept token again for its choice).
  absl::Status Truncate(int positions);
  int position() const { return position_; }
  const elf::Program& program() const { return program_; }
  // The BO of program().bos(i), i in [0, program().bos_size()).
  BufferObject* bo(int i) const { return bos_[i].get(); }
  // Timings of the last Advance (or Feed's last chunk), one entry per program step.
  const std::vector<StepTiming>& timings() const { return timings_; }
  // The f32 logits of the last Step (program value "logits").
  const float* logits() const;
  // The f32 logits of row `row` of the last StepBatch, or (< the tokens kept) of the
  // last Score; nullptr for another row.
  const float* row_logits(int row) const;
  // The bytes of host value `name` (program value, as of the last token fed: its
  // row) and their size in *bytes; nullptr for a name that is not a host value of the program
  // (e.g. an activation an optimized ELF keeps in an INTERMEDIATE BO).
  const void* value(const std::string& name, size_t* bytes) const;

  ~Decoder();

 private:
  Decoder() = default;
  struct Copy;       // one BO write or read-back planned at Create
  struct StepPlan;   // what one program step does
  // Create's plan, in steps: host values; BOs, with the weights placed in them;
  // the program loaded on the device; then each step's copies.
  absl::Status Plan(const weights::Weights& weights);
  absl::Status PlanValues();
  // Allocates every BO; (*weight_src)[i]: the host bytes WRITE weight BO i is
  // rewritten from on every run (nullptr for the others).
  absl::Status AllocateBos(const weights::Weights& weights, std::vector<uint8_t*>* weight_src);
  // Fills weight BO i from its tensor rows (packed into its layout when it has one):
  // STATIC ones are written once here (nullptr returned); WRITE ones return the host
  // bytes to rewrite them from.
  absl::StatusOr<uint8_t*> PlaceWeight(int i, const weights::Weights& weights);
  // Where BO `b` mirrors its host value.
  absl::StatusOr<uint8_t*> HostBytes(const elf::BufferObject& b);
  // Binds host step `index` of the program (HostOps::BindHostStep).
  absl::Status PlanHostStep(const elf::HostStep& step, int index, StepPlan* plan);
  absl::Status PlanGroup(const elf::LaunchGroup& group, const std::vector<uint8_t*>& weight_src,
                         StepPlan* plan);
  // Which steps form the tail (LM head, top-k) and which BOs / values hold token rows.
  absl::Status PlanRows();
  // One run of every step for tokens (at most prefill_rows of them).
  // Tail on every row (Score) or on the chunk's last only.
  absl::Status RunChunk(absl::Span<const uint32_t> tokens, bool tail_all_rows = false);
  absl::Status RunGroup(size_t s, RowRange rows);
  absl::Status WriteInputs(size_t s, RowRange rows, StepTiming* t);
  absl::Status ReadTopK() { return ReadRow(last_row_, &last_); }
  int32_t Top1(int row) const;
  // `c` with the token row strides of program BO `bo` and the value it mirrors.
  Copy RowStrides(Copy c, int bo) const;

  elf::Program program_;
  std::string elf_name_;
  Device* device_ = nullptr;
  HostOps* host_ = nullptr;
  std::unique_ptr<LoadedElf> loaded_;
  std::vector<std::unique_ptr<BufferObject>> bos_;
  std::vector<AlignedBuffer<uint8_t>> values_;           // host values, by index (value_rows_ rows)
  std::vector<size_t> value_bytes_;                      // bytes of one row of each
  std::vector<AlignedBuffer<uint8_t>> packed_weights_;   // host copies in device layouts
  std::vector<StepPlan> plan_;
  std::map<std::string, int> value_index_, bo_index_;  // by name (planning)
  std::vector<StepTiming> timings_;
  Options options_;
  StepResult last_;
  std::vector<uint8_t> scratch_;  // validation: a STATIC mirror's bytes
  size_t tail_begin_ = 0;          // steps [tail_begin_, end) run for a chunk's last token only
  std::vector<int> bo_rows_, value_rows_;  // token rows each BO / host value holds
  int last_row_ = 0;                       // the last token's row in the last run
  int check_rows_ = 1;                     // rows a Score takes
  int batch_rows_ = 1;                     // rows a StepBatch takes
  int tail_rows_ = 1;                      // rows the tail holds: the larger of the two
  int prefill_rows_ = 1;                   // Options::prefill_rows resolved
  int64_t context_ = 0;                    // positions the KV cache holds
  int last_score_ = 0;                     // tokens of the last Score (0: none since)
  int logit_rows_ = 0;                     // rows row_logits reads: the last Score's or StepBatch's
  int logits_value_ = -1;
  int topk_ids_value_ = -1;     // the top-k step's i32 ids and f32 values
  int topk_values_value_ = -1;
  int position_ = 0;
  bool static_mirrors_written_ = false;
};

}  // namespace dk::runtime

#endif  // DK_RUNTIME_DECODER_H_
