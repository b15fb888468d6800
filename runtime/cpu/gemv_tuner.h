// Chooses each GEMV weight shape's kernel variants (kernels/gemv/gemv_variants.h) by
// timing them on this machine. The CPUID flags do not say which inner loop is faster:
// on a Zen 4 the VNNI Q8_0 loop ran 1.7x slower than the Highway int8 one, on a Zen 5
// the other way round, with the same flags. A timing differs from run to run, so only
// loops that compute the default's bits are candidates (today: software prefetch on or
// off; GemvCandidates, tested bit for bit in gemv_tuner_test): the choice changes speed
// only, never a token. vdpbf16ps / widening and VNNI / Highway int8 round differently,
// so they are forced by flag, never chosen by time.
//
// For each shape the candidates are the distinct loops this CPU can take for its
// format (GemvCandidates); each is timed as whole passes over every weight of that
// shape in the program (what a decode step streams), interleaved over a few rounds
// after one warm-up pass (more rounds for short passes), best pass per candidate, a
// clear loser dropped from the second round on (kPruneRatio); the default candidate is
// kept unless another is measurably faster (kKeepDefaultWithin). Results are cached in a file per
// CPU (family, model, stepping, brand string, CPUID feature words) and variant-set
// version, one entry per shape and thread count: a cached entry costs no timing; an
// entry that does not parse, whose checksum or candidate set does not match, or whose
// choice is not its own fastest is measured again, never trusted.
// Thread-safety: TuneGemvs is reentrant; the cache file is replaced whole (rename),
// so concurrent writers lose entries at worst, never corrupt them.
#ifndef DK_RUNTIME_CPU_GEMV_TUNER_H_
#define DK_RUNTIME_CPU_GEMV_TUNER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "formats/weight_format.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_variants.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::runtime::cpu {

// Bump when the candidates or their loops change: older cache entries then no longer match.
inline constexpr int kGemvVariantSetVersion = 3;
// Another candidate replaces the default only when at least this much faster (timing noise).
inline constexpr double kKeepDefaultWithin = 0.02;
// After the second round and later ones, a candidate this many times slower than the
// best is timed no more.
inline constexpr double kPruneRatio = 1.3;
// Passes shorter than this get more rounds (up to kMaxRounds): one preemption on a busy
// host is many such passes long.
inline constexpr int64_t kShortPassNs = 2'000'000;
inline constexpr int kMaxRounds = 8;

struct GemvShape {
  formats::WeightFormat format = formats::WeightFormat::kBf16RowMajor;
  int64_t rows = 0, cols = 0;
  bool operator<(const GemvShape& o) const {
    return std::tie(format, rows, cols) < std::tie(o.format, o.rows, o.cols);
  }
  bool operator==(const GemvShape& o) const { return !(*this < o) && !(o < *this); }
  std::string Name() const;  // "q8_0 2048x8192" (rows x cols)
};

// Variants the device options force (a value) or leave to measurement (nullopt).
struct GemvVariantPolicy {
  std::optional<bool> bf16_dot, vnni, prefetch;
};

// The distinct inner loops a `format` GEMV can take on this CPU under `policy`, the
// default one (GemvVariants() with the forced fields set) first: block formats VNNI or
// Highway int8; bf16 formats vdpbf16ps (with and without software prefetch for the
// packed and x12 layouts, whose loops prefetch) or widening to f32. A variant this CPU
// cannot run (VNNI without the instructions) takes another's loop and is left out.
std::vector<kernels::GemvVariants> GemvCandidates(formats::WeightFormat format, const GemvVariantPolicy& policy);

// What `v` means for `format`: "vnni" / "no-vnni", "dot+prefetch" / "dot" / "widen".
std::string GemvVariantName(formats::WeightFormat format, const kernels::GemvVariants& v);

// This CPU: "family F model M stepping S 'brand' cpuid 1:ECX.EDX 7:EBX.ECX.EDX 7.1:EAX".
std::string CpuIdentity();
// CpuIdentity without the feature words: "family F model M stepping S 'brand'", what a
// record names the machine by (flags alone do not tell Zen 4 from Zen 5).
std::string CpuName();

struct GemvTuneOptions {
  std::string cache_dir;  // "": no cache file
  int threads = 1;        // the pool's threads: part of each entry's key
  int rounds = 3;         // timed rounds after the warm-up pass (at least 2; short passes: up to kMaxRounds)
  std::function<int64_t()> clock_ns;  // null: steady_clock; tests inject a fake
  std::string cpu_id;     // "": CpuIdentity()
};

struct GemvChoice {
  GemvShape shape;
  std::vector<kernels::GemvVariants> candidates;
  std::vector<int64_t> ns;  // per candidate, the best pass; empty when not timed (one candidate)
  int chosen = 0;
  bool cached = false;
  const kernels::GemvVariants& variants() const { return candidates[chosen]; }
  // "q8_0 8192x2048: no-vnni, measured 1.21 ms vs vnni 2.05 ms" (", cached" when read
  // from the cache; "...: vnni, the only candidate" when nothing was timed).
  std::string Line() const;
};

// One GEMV y = W x of `shape` on the weight bytes `w` (its format's layout) with
// `variants`: what the tuner times, pass by pass. `scratch`: the kernels' (null: the
// call's own, kernels/common/scratch.h).
void RunGemv(const GemvShape& shape, const uint8_t* w, const kernels::GemvVariants& variants, const bf16* x,
             float* y, ThreadPool* pool, kernels::KernelScratch* scratch = nullptr);

// One pass of `variants` over every weight of `shape` (what is timed).
using GemvPassFn = std::function<void(const GemvShape&, const kernels::GemvVariants&)>;

// A choice per shape (in the order given), each among its candidates (at least one).
// Problems with the cache file (unreadable, unwritable) go to *warning and cost only
// the caching.
struct GemvTuneRequest {
  GemvShape shape;
  std::vector<kernels::GemvVariants> candidates;
};
std::vector<GemvChoice> TuneGemvs(const std::vector<GemvTuneRequest>& requests, const GemvPassFn& pass,
                                  const GemvTuneOptions& options, std::string* warning);

// The cache file TuneGemvs reads and writes for `cpu_id` under `cache_dir`.
std::string GemvTuneCachePath(const std::string& cache_dir, const std::string& cpu_id);

}  // namespace dk::runtime::cpu

#endif  // DK_RUNTIME_CPU_GEMV_TUNER_H_
