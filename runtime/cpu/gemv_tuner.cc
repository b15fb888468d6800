#include "runtime/cpu/gemv_tuner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_x12.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace dk::runtime::cpu {
namespace {

using kernels::GemvVariants;

// The loop `v` takes for `format` on this CPU: candidates with the same one are one.
int LoopOf(formats::WeightFormat format, const GemvVariants& v) {
  if (formats::IsBlockFormat(format)) return kernels::QuantGemvUsesVnni(v) ? 1 : 0;
  const bool dot = kernels::GemvUsesBf16Dot(v);
  const bool prefetches = format == formats::WeightFormat::kBf16Packed || format == formats::WeightFormat::kBf16X12;
  return (dot ? 2 : 0) | (dot && prefetches && v.prefetch ? 1 : 0);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Hex(uint64_t v) { return absl::StrFormat("%016x", v); }

// A variant as the cache writes it: "d1v0p1".
std::string Code(const GemvVariants& v) {
  return absl::StrCat("d", v.bf16_dot ? 1 : 0, "v", v.vnni ? 1 : 0, "p", v.prefetch ? 1 : 0);
}

// An entry's key: shape, threads and candidate set.
std::string EntryKey(const GemvShape& shape, int threads, const std::vector<GemvVariants>& candidates) {
  std::vector<std::string> codes;
  for (const GemvVariants& v : candidates) codes.push_back(Code(v));
  return absl::StrCat(formats::Name(shape.format), " ", shape.rows, " ", shape.cols, " ", threads, " ",
                      absl::StrJoin(codes, ","));
}

// The chosen candidate: the fastest, unless the default (0) is within kKeepDefaultWithin of it.
int Choose(const std::vector<int64_t>& ns) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(ns.size()); ++i) {
    if (ns[i] < ns[best]) best = i;
  }
  return ns[best] < ns[0] * (1.0 - kKeepDefaultWithin) ? best : 0;
}

// Entries of the cache file (key -> the rest of the line) that parse and check out.
struct CachedEntry {
  std::vector<int64_t> ns;
  int chosen = 0;
};

// "KEY | ns0 ns1 ... | chosen | checksum": valid only when the checksum (of everything
// before it) matches, there is one positive time per candidate, and the choice is what
// Choose makes of those times.
std::optional<CachedEntry> ParseEntry(const std::string& line, size_t candidates, std::string* key) {
  const size_t bar = line.rfind(" | ");
  if (bar == std::string::npos) return std::nullopt;
  const std::string body = line.substr(0, bar), sum = line.substr(bar + 3);
  if (sum != Hex(Fnv1a(body))) return std::nullopt;
  std::vector<std::string> parts = absl::StrSplit(body, " | ");
  if (parts.size() != 3) return std::nullopt;
  CachedEntry e;
  for (absl::string_view t : absl::StrSplit(parts[1], ' ', absl::SkipEmpty())) {
    int64_t ns = 0;
    if (!absl::SimpleAtoi(t, &ns) || ns <= 0) return std::nullopt;
    e.ns.push_back(ns);
  }
  if (e.ns.size() != candidates || !absl::SimpleAtoi(parts[2], &e.chosen) || e.chosen != Choose(e.ns)) {
    return std::nullopt;
  }
  *key = parts[0];
  return e;
}

std::string EntryLine(const std::string& key, const std::vector<int64_t>& ns, int chosen) {
  const std::string body = absl::StrCat(key, " | ", absl::StrJoin(ns, " "), " | ", chosen);
  return absl::StrCat(body, " | ", Hex(Fnv1a(body)));
}

std::string Header(const std::string& cpu_id) {
  return absl::StrCat("# decodekit GEMV variant timings, set version ", kGemvVariantSetVersion, ", cpu ", cpu_id);
}

// The file's lines after its header, or none when it is missing or for another CPU.
std::vector<std::string> ReadCache(const std::string& path, const std::string& cpu_id) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  if (!in || !std::getline(in, line) || line != Header(cpu_id)) return lines;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string Ms(int64_t ns) { return absl::StrFormat("%.3f ms", ns / 1e6); }

}  // namespace

void RunGemv(const GemvShape& shape, const uint8_t* w, const GemvVariants& variants, const bf16* x, float* y,
             ThreadPool* pool, kernels::KernelScratch* scratch) {
  const size_t rows = shape.rows, cols = shape.cols;
  switch (shape.format) {
    case formats::WeightFormat::kBf16RowMajor:
      return kernels::Gemv(reinterpret_cast<const bf16*>(w), rows, cols, x, y, pool, variants, scratch);
    case formats::WeightFormat::kBf16Packed:
      return kernels::PackedGemv(reinterpret_cast<const bf16*>(w), rows, cols, x, y, pool, variants, scratch);
    case formats::WeightFormat::kBf16X12:
      return kernels::X12Gemv(w, rows, cols, x, y, pool, variants, scratch);
    default:
      return kernels::QuantGemv(shape.format, kernels::QuantActivations::kInt8, w, rows, cols, x, y, pool,
                                variants, scratch);
  }
}

std::string GemvShape::Name() const { return absl::StrCat(formats::Name(format), " ", rows, "x", cols); }

std::vector<GemvVariants> GemvCandidates(formats::WeightFormat format, const GemvVariantPolicy& policy) {
  GemvVariants base;
  if (policy.bf16_dot) base.bf16_dot = *policy.bf16_dot;
  if (policy.vnni) base.vnni = *policy.vnni;
  if (policy.prefetch) base.prefetch = *policy.prefetch;
  std::vector<GemvVariants> out = {base};
  std::vector<int> loops = {LoopOf(format, base)};
  auto add = [&](GemvVariants v) {
    const int loop = LoopOf(format, v);
    if (std::find(loops.begin(), loops.end(), loop) != loops.end()) return;
    loops.push_back(loop);
    out.push_back(v);
  };
  // Only loops that compute the default's bits are candidates (a choice made by timing
  // must never change a token): software prefetch on or off. vdpbf16ps and the widening
  // loop round differently, and so do the VNNI and Highway int8 loops (their int32 lanes
  // hold different element groups before the per-lane scaling): those stay forced-only
  // (--gemv_bf16dot, --gemv_vnni; kernels/gemv/gemv_variants.h).
  for (bool prefetch : {true, false}) {
    if (policy.prefetch && *policy.prefetch != prefetch) continue;
    GemvVariants v = base;
    v.prefetch = prefetch;
    add(v);
  }
  return out;
}

std::string GemvVariantName(formats::WeightFormat format, const GemvVariants& v) {
  switch (LoopOf(format, v)) {
    case 0: return formats::IsBlockFormat(format) ? "no-vnni" : "widen";
    case 1: return "vnni";
    case 2: return "dot";
    default: return "dot+prefetch";
  }
}

// CpuIdentity's two halves: what names the CPU ("family F model M stepping S 'brand'")
// and its feature words ("cpuid 1:... 7:... 7.1:...", empty off x86).
static std::pair<std::string, std::string> ReadCpuId() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  const unsigned family = ((a >> 8) & 0xf) + ((a >> 8 & 0xf) == 0xf ? (a >> 20) & 0xff : 0);
  const unsigned model = ((a >> 4) & 0xf) | (((a >> 8 & 0xf) == 0xf || (a >> 8 & 0xf) == 6) ? ((a >> 16) & 0xf) << 4 : 0);
  const unsigned stepping = a & 0xf;
  const unsigned ecx1 = c, edx1 = d;
  unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b7, c7, d7);
    unsigned x = 0, y = 0, z = 0;
    __cpuid_count(7, 1, a71, x, y, z);
  }
  char brand[49] = {};
  if (__get_cpuid_max(0x80000000, nullptr) >= 0x80000004) {
    for (unsigned i = 0; i < 3; ++i) {
      unsigned r[4];
      __cpuid(0x80000002 + i, r[0], r[1], r[2], r[3]);
      std::memcpy(brand + 16 * i, r, 16);
    }
  }
  std::string name(brand);
  name.erase(name.find_last_not_of(' ') + 1);
  name.erase(0, name.find_first_not_of(' ') == std::string::npos ? name.size() : name.find_first_not_of(' '));
  return {absl::StrFormat("family %u model %u stepping %u '%s'", family, model, stepping, name),
          absl::StrFormat("cpuid 1:%08x.%08x 7:%08x.%08x.%08x 7.1:%08x", ecx1, edx1, b7, c7, d7, a71)};
#else
  return {"non-x86", ""};
#endif
}

std::string CpuIdentity() {
  const auto [name, words] = ReadCpuId();
  return words.empty() ? name : absl::StrCat(name, " ", words);
}

std::string CpuName() { return ReadCpuId().first; }

std::string GemvTuneCachePath(const std::string& cache_dir, const std::string& cpu_id) {
  return (std::filesystem::path(cache_dir) /
          absl::StrCat("gemv_variants_v", kGemvVariantSetVersion, "_", Hex(Fnv1a(cpu_id)), ".txt"))
      .string();
}

std::string GemvChoice::Line() const {
  const formats::WeightFormat f = shape.format;
  std::string line = absl::StrCat(shape.Name(), ": ", GemvVariantName(f, variants()));
  if (ns.empty()) return absl::StrCat(line, ", the only candidate");
  absl::StrAppend(&line, ", measured ", Ms(ns[chosen]));
  const char* sep = " vs ";
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (static_cast<int>(i) == chosen) continue;
    absl::StrAppend(&line, sep, GemvVariantName(f, candidates[i]), " ", Ms(ns[i]));
    sep = ", ";
  }
  if (chosen != 0) absl::StrAppend(&line, " (default ", GemvVariantName(f, candidates[0]), ")");
  return cached ? absl::StrCat(line, ", cached") : line;
}

std::vector<GemvChoice> TuneGemvs(const std::vector<GemvTuneRequest>& requests, const GemvPassFn& pass,
                                  const GemvTuneOptions& options, std::string* warning) {
  const std::string cpu_id = options.cpu_id.empty() ? CpuIdentity() : options.cpu_id;
  const std::string path = options.cache_dir.empty() ? "" : GemvTuneCachePath(options.cache_dir, cpu_id);
  std::vector<std::string> lines = path.empty() ? std::vector<std::string>{} : ReadCache(path, cpu_id);
  std::vector<GemvChoice> choices(requests.size());
  std::vector<size_t> todo;  // requests to time
  std::vector<std::string> keys(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    GemvChoice& c = choices[i];
    c.shape = requests[i].shape;
    c.candidates = requests[i].candidates;
    if (c.candidates.size() < 2) continue;
    keys[i] = EntryKey(c.shape, options.threads, c.candidates);
    for (const std::string& line : lines) {
      std::string key;
      const std::optional<CachedEntry> e = ParseEntry(line, c.candidates.size(), &key);
      if (!e || key != keys[i]) continue;
      c.ns = e->ns;
      c.chosen = e->chosen;
      c.cached = true;
    }
    if (!c.cached) todo.push_back(i);
  }
  if (todo.empty()) return choices;
  const auto now = [&]() -> int64_t {
    if (options.clock_ns) return options.clock_ns();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  for (size_t i : todo) choices[i].ns.assign(choices[i].candidates.size(), std::numeric_limits<int64_t>::max());
  auto timed = [&](GemvChoice& c, size_t j) {
    const int64_t t0 = now();
    pass(c.shape, c.candidates[j]);
    return std::max<int64_t>(1, now() - t0);
  };
  // One untimed pass first (pages, caches, frequency). Then rounds over the candidates
  // still in the running, in an order rotating each round, so that a swing in the
  // machine's bandwidth does not fall on one candidate alone. From the second round on,
  // a candidate kPruneRatio slower than the best so far is out (it cannot win, and the
  // slow ones cost the most time): never on one sample, which a preemption on a busy
  // host can make many times too slow. Shapes whose passes are short get more rounds
  // (up to kMaxRounds), for the same reason, at little cost.
  for (size_t i : todo) timed(choices[i], 0);
  std::vector<std::vector<size_t>> running(choices.size());
  for (size_t i : todo) {
    for (size_t j = 0; j < choices[i].candidates.size(); ++j) running[i].push_back(j);
  }
  const int rounds = std::max(2, options.rounds);
  for (int round = 0; round < kMaxRounds; ++round) {
    bool any = false;
    for (size_t i : todo) {
      GemvChoice& c = choices[i];
      const std::vector<size_t>& r = running[i];
      const int64_t best = *std::min_element(c.ns.begin(), c.ns.end());
      if (round >= rounds && (r.size() < 2 || best >= kShortPassNs)) continue;
      any = true;
      for (size_t k = 0; k < r.size(); ++k) {
        const size_t j = r[(k + round) % r.size()];
        c.ns[j] = std::min(c.ns[j], timed(c, j));
      }
    }
    if (!any) break;
    if (round == 0) continue;
    for (size_t i : todo) {
      const std::vector<int64_t>& ns = choices[i].ns;
      const int64_t best = *std::min_element(ns.begin(), ns.end());
      std::vector<size_t>& r = running[i];
      r.erase(std::remove_if(r.begin(), r.end(), [&](size_t j) { return ns[j] > kPruneRatio * best; }), r.end());
    }
  }
  for (size_t i : todo) choices[i].chosen = Choose(choices[i].ns);
  if (path.empty()) return choices;
  // Rewrite the file: its valid entries for other keys, then the new ones.
  std::map<std::string, std::string> keep;
  for (const std::string& line : lines) {
    const size_t sep = line.find(" | ");
    if (sep == std::string::npos) continue;
    keep[line.substr(0, sep)] = line;  // re-checked on every read
  }
  for (size_t i : todo) keep[keys[i]] = EntryLine(keys[i], choices[i].ns, choices[i].chosen);
  std::error_code ec;
  std::filesystem::create_directories(options.cache_dir, ec);
  const std::string tmp = absl::StrCat(path, ".tmp", Hex(reinterpret_cast<uintptr_t>(&keep)));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Header(cpu_id) << "\n";
    for (const auto& [key, line] : keep) out << line << "\n";
    out.close();
    if (!out) {
      if (warning) *warning = absl::StrCat("cannot write the GEMV tuning cache ", tmp);
      std::filesystem::remove(tmp, ec);
      return choices;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec && warning) *warning = absl::StrCat("cannot write the GEMV tuning cache ", path, ": ", ec.message());
  return choices;
}

}  // namespace dk::runtime::cpu
