// The profile record: what `bazel run //models/<m>:profile` measured for every stage
// of a decode chain (docs/architecture.md s.7), the pure functions that derive its figures
// (medians, drift, the per-step breakdown, deltas, statuses), its JSON form, and the
// BUILD edit that removes a reverted stage from the chain.
//
// Measuring (tools/profile/profile.cc) fills the raw fields; Finalize() derives
// everything else, so the markdown, HTML, JSON and table all show the same numbers.
// Thread-safety: plain data and free functions.
#ifndef DK_TOOLS_PROFILE_RECORD_H_
#define DK_TOOLS_PROFILE_RECORD_H_

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "elf/stats.h"
#include "runtime/decoder.h"

namespace dk::profile {

// Median (mean of the two middle values for an even count); 0 for an empty input.
double Median(std::vector<double> v);
// (median of the last quarter - median of the first quarter) / median of all, in %.
// The quarters have at least one token each; 0 for fewer than 2 tokens.
double DriftPercent(const std::vector<double>& ms);

// One kind of program step, summed over every layer it occurs in (per token).
struct Component {
  std::string key;         // group name without "L<n>." ("rms_gemv_rope") or host kind
  bool host = false;       // a host step (attention, kv_write, embedding, topk, ...)
  bool per_layer = false;  // occurs in layers (layer >= 0); else model-wide (LM head)
  int count = 0;           // steps of this kind per token
  double write_ms = 0;     // BO writes + syncs before the runs
  double run_ms = 0;       // device runs (or the host step itself)
  double read_ms = 0;      // syncs + reads after the runs
  double total_ms() const { return write_ms + run_ms + read_ms; }
};

// How a program's steps map to components, in program order of first occurrence.
struct StepMap {
  std::vector<Component> components;  // timings zero
  std::vector<int> component_of_step;  // per program step
  int device_runs = 0;                 // launch groups per token
  int64_t weight_bytes = 0;            // weight BO bytes the groups read per token
};
StepMap MapSteps(const elf::Program& program);

// Accumulates the timings of steady-state tokens into per-token averages.
class BreakdownAccumulator {
 public:
  explicit BreakdownAccumulator(const StepMap& map) : map_(map), sum_(map.components) {}
  void Add(const std::vector<runtime::StepTiming>& timings);
  // Per-token averages over the tokens added.
  std::vector<Component> Components() const;
  double BytesWrittenPerToken() const { return tokens_ ? bytes_written_ / tokens_ : 0; }
  double BytesReadPerToken() const { return tokens_ ? bytes_read_ / tokens_ : 0; }

 private:
  const StepMap& map_;
  std::vector<Component> sum_;
  double bytes_written_ = 0, bytes_read_ = 0;
  int tokens_ = 0;
};

// The host's read bandwidth jumps between modes from minute to minute (the modes seen
// on this project's machines: docs/measurements.md, "The machines"). The
// record labels each round "fast" or "slow" against a split taken from the run
// itself: the geometric mean of the 10th and 90th percentiles of the bandwidth paired
// with the tokens, when those differ by kTwoModesRatio or more (else one mode). Only
// labels: the verdicts use the bandwidth itself.
inline constexpr double kTwoModesRatio = 1.3;
double ModeSplit(std::vector<double> gbps);  // 0: one mode

// One timing round of one stage.
struct RoundStat {
  int round = 0;
  int tokens = 0;
  double median_ms = 0;       // raw
  double norm_median_ms = 0;  // at the run's reference bandwidth
  double gbps = 0;            // median bandwidth paired with its tokens (0: not paired)
  std::string mode;           // "fast", "slow" or "-" (ModeSplit)
};

// A stage against its parent at equal bandwidth: per round, the ratio of the two
// stages' normalized medians (both measured within the same round, so in the same
// stretch of the host's behaviour); the verdict is on the median ratio, the noise
// band from the spread of the per-round ratios.
struct ParentComparison {
  std::vector<double> round_ratios;  // stage / parent, per round both measured
  double ratio = 1;                  // their median (one round: of the token medians)
  double noise = 0;                  // band around 1: max(kMinNoise, the ratios' half range / tokens' spread)
  bool slower = false;               // ratio - 1 > noise
  bool faster = false;               // 1 - ratio > noise
};
// The narrowest band: the same pair of stages, profiled again on the same machine,
// gives ratios up to about 5% apart (docs/measurements.md), so a smaller difference
// would flip the verdict from run to run.
inline constexpr double kMinNoise = 0.05;
// `stage_norm` and `parent_norm`: the two stages' steady tokens at equal bandwidth.
// With fewer than two rounds to compare, the ratio is that of their medians and the
// tokens' own spread (interquartile range / median, either stage) widens the band, as
// a swing would.
ParentComparison CompareWithParent(const std::vector<RoundStat>& stage, const std::vector<RoundStat>& parent,
                                   const std::vector<double>& stage_norm, const std::vector<double>& parent_norm);

struct StageRecord {
  // From the BUILD (the decode_profile rule).
  std::string name;    // "decode_opt"
  std::string label;   // "//models/llama32_1b:decode_opt"
  std::string kind;    // the rule: "merge_multi_launch", "decode_elf"
  std::string src;     // the parent stage as the BUILD names it (":decode_bo"); "" for the baseline
  std::vector<std::string> lineage;  // passes, baseline first
  // The stage changes the arithmetic (quantize_weights): its tokens may differ from
  // the parent's; the gate against the goldens alone decides, as in verify_chain.
  bool changes_numerics = false;
  // From the ELF's last lineage record.
  std::string pass;
  std::string target;
  bool pass_applied = true;
  std::string pass_reason;
  // Measured (timing run, validation off).
  // The first round's warm-up tokens, then every round's measured tokens in round
  // order (the later rounds' warm-ups are not kept).
  std::vector<double> token_ms;
  int warmup = 0;                // how many of token_ms are warm-up
  // Parallel to token_ms (empty when not measured): the read bandwidth around each
  // measured token (GB/s; a streaming pass just before and just after it; 0 for the
  // warm-up tokens) and the round it was measured in (-1 for the warm-up).
  std::vector<double> token_gbps;
  std::vector<int> token_round;
  std::vector<Component> components;
  double bytes_written_per_token = 0;
  double bytes_read_per_token = 0;
  int device_runs_per_token = 0;
  int64_t weight_bytes_per_token = 0;
  // Read bandwidth sampled right before each of this stage's timing rounds, the
  // median (GB/s); the stage's floor uses it, since the host's bandwidth swings.
  double bandwidth_gbps = 0;
  // The gate (validation on).
  bool gate_ran = false;
  bool gate_passed = false;
  bool gate_skipped = false;  // no goldens (--gate_prompts=0): timed, not gated
  bool same_as_parent = true;  // generated exactly the parent's tokens (when compared;
                               // reported only when changes_numerics)
  std::string gate_report;     // FormatGateReport (+ FormatNumericReport, FormatExactReport) lines
  // The numeric check (verify/numeric.h), shown beside the gate; the revert decision
  // (passed()) stays on the gate and, unless changes_numerics, the parent's tokens.
  bool numeric_ran = false;
  bool numeric_passed = false;
  double numeric_max_abs_diff = 0;  // largest |candidate - HF| logit at HF's top-5 ids
  double numeric_pct_of_tol = 0;    // largest |diff| / tolerance, in percent
  // Against the bf16 baseline over real text (ProfileRecord::kld_text, tools/perplexity):
  // mean and 99th-percentile KL divergence, top-1 agreement (0..1), this stage's
  // perplexity and its ratio to the baseline's. Reported, not part of the revert decision
  // (verify's KLD bound gates the stages that change numerics).
  bool kld_ran = false;
  double kld_mean = 0, kld_p99 = 0, kld_top1 = 0, kld_ppl = 0, kld_ppl_ratio = 0;
  std::string kld_error;  // the comparison could not run
  std::string error;           // the stage could not be measured (counts as a gate failure)
  // Speculative stages (Program.speculative), over the timing rounds: draft checks,
  // tokens drafted, drafts the model chose.
  int spec_checks = 0, spec_drafted = 0, spec_accepted = 0;

  // Derived by Finalize.
  // "baseline", "applied", "skipped", "reverted", or kSlowerThanParent: applied
  // (it passed the gate) but slower than its parent at equal bandwidth beyond the
  // noise (CompareWithParent).
  std::string status;
  bool slower_than_parent = false;
  ParentComparison vs_parent;  // stages with a parent
  std::vector<RoundStat> rounds;  // per round, in order
  double median_ms = 0, min_ms = 0, max_ms = 0, drift_pct = 0;
  // The median of the measured tokens' times scaled to the run's reference bandwidth
  // (ProfileRecord::ref_gbps): ms x token GB/s / reference GB/s. Equal to median_ms
  // when no bandwidth was paired with the tokens.
  double norm_median_ms = 0;
  double floor_ms = 0, x_floor = 0;
  double write_ms = 0, run_ms = 0, read_ms = 0, host_ms = 0, lm_head_ms = 0;
  int parent = -1;  // index of the parent stage in the record
  double delta_parent_ms = 0, delta_parent_pct = 0;
  double delta_baseline_ms = 0, delta_baseline_pct = 0;
  std::string reason;      // one line: the pass's reason + what the measurement showed
  std::string build_edit;  // reverted stages: the BUILD edit that removes the stage

  size_t first_steady() const;  // index of the first measured (non-warm-up) token
  std::vector<double> steady_ms() const;
  bool passed() const {
    return (gate_ran ? gate_passed : gate_skipped) && (same_as_parent || changes_numerics) && error.empty();
  }
};

inline constexpr char kSlowerThanParent[] = "applied, slower than its parent";


// Decode at a longer context (--context): the final stage, tokens measured at
// positions [context - tokens, context).
struct ContextPoint {
  int context = 0;
  int tokens = 0;
  double median_ms = 0;
  double attention_ms = 0;  // host-side decode attention per token (all layers)
  double bandwidth_gbps = 0;
  double x_floor = 0;
  double attention_share() const { return median_ms > 0 ? attention_ms / median_ms : 0; }
};

// A device plan of the model (decode_profile's `plans`): an ELF the profile reads,
// not times: its device runs and the merge's reason, e.g. the chain planned for npu2.
struct PlanRecord {
  std::string name;    // "npu2_opt"
  std::string label;   // "//models/llama32_1b:npu2_opt"
  std::string target;  // of its merge_multi_launch ("npu2"; "" if it has none)
  std::map<int, int> runs;  // elf::RunsPerLayer (elf::DescribeRuns says it in words)
  std::string merge_reason;  // the merge_multi_launch lineage reason
};

struct ProfileRecord {
  std::string model;
  std::string package;  // "models/llama32_1b"
  std::string profile_label;
  std::string prompt;
  int prompt_tokens = 0;
  int warmup = 0;
  int new_tokens = 0;
  // The measured tokens of each stage were taken in this many rounds, stage after
  // stage (1, 2, ..., N, then 1, 2, ... again), each round reopening the stage and
  // feeding the prompt and the warm-up again: a swing of the host's bandwidth during
  // the run then reaches every stage alike, instead of the stages timed during it.
  int rounds = 1;
  int gate_prompts = 0;
  int gate_tokens = 0;
  std::string goldens;
  std::string goldens_reference;  // which reference made them (verify::Goldens::Reference())
  std::string weights_source;
  std::string weights_digest;
  std::string device;
  int threads = 0;
  std::string runtime_options;  // the runtime flags in force (RuntimeOptions::Describe)
  double bandwidth_gbps = 0;  // read bandwidth measured at the start of the run
  // The median bandwidth paired with every measured token of every stage: the common
  // bandwidth the stages' normalized times are scaled to (0: none was paired, the
  // normalized times are the raw ones).
  double ref_gbps = 0;
  double mode_split_gbps = 0;  // ModeSplit of those bandwidths
  std::string date;           // UTC, ISO 8601
  std::vector<StageRecord> stages;  // chain order, baseline first
  std::vector<ContextPoint> contexts;  // --context, on the final stage
  std::vector<PlanRecord> plans;       // decode_profile's `plans`, in its order
  // The KLD run (--kld_text; "" when none ran): the text, its tokens, the windows
  // (tools/perplexity/run.h), the positions scored per stage and the reference stage.
  std::string kld_text, kld_reference;
  int kld_text_tokens = 0, kld_window = 0, kld_windows = 0, kld_score_from = 0;
  int64_t kld_positions = 0;
  double kld_reference_ppl = 0;

  // Derived by Finalize.
  int final_stage = -1;  // the chain's end: the last stage that passed the gate
  // The headline: the stage that passed the gate with the lowest normalized median
  // (the baseline included); the chain's end is shown beside it when it differs.
  int best_stage = -1;
  double speedup = 0;        // baseline / best stage, normalized medians
  double final_speedup = 0;  // baseline / chain end, normalized medians
  bool final_faster = false; // the chain's end is faster than the baseline beyond the noise
  std::vector<int> reverted;
};

// Derives statuses, statistics, deltas, reasons and (given the BUILD file's text,
// possibly empty) the BUILD edits of reverted stages.
void Finalize(ProfileRecord& record, const std::string& build_text);

// The edit that removes `stage` from its chain: as a unified-diff-like listing of the
// exact lines when `build_text` (the package's BUILD) is known, else in words.
std::string BuildEdit(const ProfileRecord& record, int stage, const std::string& build_text);

std::string ToJson(const ProfileRecord& record);

// elf::HumanBytes ("2.30 GiB", "76.0 KiB", "512 B") of a figure kept as a double.
inline std::string HumanBytes(double bytes) { return elf::HumanBytes(std::llround(bytes)); }
// Signed: "-12.3 ms (-4.5%)".
std::string SignedDelta(double ms, double pct);

}  // namespace dk::profile

#endif  // DK_TOOLS_PROFILE_RECORD_H_
