// The phase-4 record: prompt processing (the batched prefill, Decoder::Feed) of every
// stage of a chain, measured by the profile after its phase-5 decode timing and gate,
// written as models/<m>/docs/development_progress/phase4_prefill.md beside phase5_decode.md with
// the same gate columns. Each point: a new sequence fed N prompt tokens in chunks of
// the runtime's --prefill_chunk, up to the first new token's top-k (time to first
// token); tokens/s = N / that time, the median of `reps` runs after an untimed one.
// Thread-safety: plain data and free functions.
#ifndef DK_TOOLS_PROFILE_PREFILL_H_
#define DK_TOOLS_PROFILE_PREFILL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/decoder.h"
#include "tools/profile/record.h"

namespace dk::profile {

struct PrefillPoint {
  int prompt_tokens = 0;
  double ttft_ms = 0;  // median
  double tokens_per_s = 0;
};

struct StagePrefill {
  std::vector<PrefillPoint> points;  // one per size
  std::string error;                 // could not be measured
};

struct PrefillRecord {
  std::vector<int> sizes;            // prompt tokens per point, ascending
  int reps = 0;
  int chunk = 0;                     // --prefill_chunk
  std::vector<StagePrefill> stages;  // parallel to ProfileRecord::stages
};

// The prompt of `n` ids both decode_bench --prompt_tokens and tools/peer's pp use:
// (1 + 7919 i) mod vocab.
std::vector<uint32_t> PrefillPrompt(int n, int vocab);

// Times `decoder` (a fresh session's) on each size: Reset + Feed, one untimed run
// then `reps` timed ones per size. `tick(done, total)` reports progress.
absl::StatusOr<std::vector<PrefillPoint>> MeasurePrefill(runtime::Decoder& decoder, const std::vector<int>& sizes,
                                                         int reps, const std::function<void(int, int)>& tick);

// phase4_prefill.md: per stage, its rule and gate (from the finalized phase-5
// record), tokens/s at each size, the time to first token, and the speedup over
// feeding the prompt token by token at the stage's decode rate.
std::string PrefillMarkdown(const ProfileRecord& record, const PrefillRecord& prefill, const std::string& command);

}  // namespace dk::profile

#endif  // DK_TOOLS_PROFILE_PREFILL_H_
