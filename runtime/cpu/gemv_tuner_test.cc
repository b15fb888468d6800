#include "runtime/cpu/gemv_tuner.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_quant_ref.h"
#include "kernels/gemv/gemv_x12.h"
#include "util/thread_pool.h"

namespace dk::runtime::cpu {
namespace {

using formats::WeightFormat;
using kernels::GemvVariants;

GemvVariants Vnni(bool on) {
  GemvVariants v;
  v.vnni = on;
  return v;
}

// A fake machine: each pass advances the clock by the cost its variant is given, so
// the tuner measures exactly those costs, and counts what it ran.
struct FakeMachine {
  int64_t now = 1000;
  int64_t vnni_ns = 0, highway_ns = 0;
  int passes = 0, clock_reads = 0;
  GemvTuneOptions Options(const std::string& cache_dir = "") {
    GemvTuneOptions o;
    o.cache_dir = cache_dir;
    o.threads = 2;
    o.cpu_id = "test cpu";
    o.clock_ns = [this] {
      ++clock_reads;
      return now;
    };
    return o;
  }
  GemvPassFn Pass() {
    return [this](const GemvShape&, const GemvVariants& v) {
      ++passes;
      now += v.vnni ? vnni_ns : highway_ns;
    };
  }
};

const GemvShape kQ8{WeightFormat::kQ8_0, 8192, 2048};
std::vector<GemvTuneRequest> Q8Request() { return {{kQ8, {Vnni(true), Vnni(false)}}}; }

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(base ? base : "/tmp") / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

// The default (first) candidate made slow: the measured faster one replaces it.
TEST(GemvTuner, ASlowDefaultIsNeverKeptWhenAFasterVariantWasMeasured) {
  FakeMachine m;
  m.vnni_ns = 15'400'000;
  m.highway_ns = 10'400'000;
  std::string warning;
  const std::vector<GemvChoice> c = TuneGemvs(Q8Request(), m.Pass(), m.Options(), &warning);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].variants().vnni);
  EXPECT_EQ(c[0].chosen, 1);
  EXPECT_EQ(c[0].ns, (std::vector<int64_t>{15'400'000, 10'400'000}));
  EXPECT_FALSE(c[0].cached);
  EXPECT_EQ(c[0].Line(), "q8_0 8192x2048: no-vnni, measured 10.400 ms vs vnni 15.400 ms (default vnni)");
  // The warm-up pass, both candidates in rounds 1 and 2, then the faster alone: the
  // other, 1.48x slower (> kPruneRatio), is out.
  EXPECT_EQ(m.passes, 1 + 2 + 2 + 1);
  EXPECT_TRUE(warning.empty()) << warning;
}

TEST(GemvTuner, AFasterDefaultIsKeptAndNearTiesKeepTheDefault) {
  FakeMachine m;
  m.vnni_ns = 10'000'000;
  m.highway_ns = 30'000'000;
  EXPECT_TRUE(TuneGemvs(Q8Request(), m.Pass(), m.Options(), nullptr)[0].variants().vnni);
  m.highway_ns = 9'900'000;  // 1% faster: noise, the default stays
  EXPECT_TRUE(TuneGemvs(Q8Request(), m.Pass(), m.Options(), nullptr)[0].variants().vnni);
  m.highway_ns = 9'000'000;  // 10% faster
  EXPECT_FALSE(TuneGemvs(Q8Request(), m.Pass(), m.Options(), nullptr)[0].variants().vnni);
}

// One slow pass of the fast variant (a bandwidth dip) does not decide: best of rounds.
TEST(GemvTuner, TheBestRoundOfEachCandidateCounts) {
  FakeMachine m;
  int highway_passes = 0;
  GemvPassFn noisy = [&](const GemvShape&, const GemvVariants& v) {
    ++m.passes;
    if (!v.vnni) ++highway_passes;
    m.now += v.vnni ? 11'000'000 : (highway_passes == 3 ? 90'000'000 : 10'000'000);  // its last timed pass 9x slower
  };
  EXPECT_FALSE(TuneGemvs(Q8Request(), noisy, m.Options(), nullptr)[0].variants().vnni);
  EXPECT_EQ(m.passes, 1 + 2 * 3);  // within kPruneRatio of each other: both timed every round
}

// A busy host: the winner's first timed pass preempted, 50x its time. One sample never
// rules a candidate out, and a short pass gets more rounds.
TEST(GemvTuner, APreemptedFirstSampleDoesNotDecide) {
  FakeMachine m;
  int vnni_passes = 0;
  GemvPassFn preempted = [&](const GemvShape&, const GemvVariants& v) {
    ++m.passes;
    if (v.vnni) ++vnni_passes;
    m.now += v.vnni ? (vnni_passes == 2 ? 5'000'000 : 100'000) : 300'000;  // pass 1 is the warm-up
  };
  const std::vector<GemvChoice> c = TuneGemvs(Q8Request(), preempted, m.Options(), nullptr);
  EXPECT_TRUE(c[0].variants().vnni);
  EXPECT_EQ(c[0].ns, (std::vector<int64_t>{100'000, 300'000}));
  // Warm-up, rounds 1 and 2 with both, then Highway (3x slower) is out and VNNI runs
  // alone up to round 3; a lone candidate needs no more rounds.
  EXPECT_EQ(m.passes, 1 + 2 + 2 + 1);
}

// Short passes of two close candidates: rounds up to kMaxRounds.
TEST(GemvTuner, ShortPassesGetMoreRounds) {
  FakeMachine m;
  m.vnni_ns = 100'000;
  m.highway_ns = 105'000;
  TuneGemvs(Q8Request(), m.Pass(), m.Options(), nullptr);
  EXPECT_EQ(m.passes, 1 + 2 * kMaxRounds);
  FakeMachine long_passes;
  long_passes.vnni_ns = 10'000'000;
  long_passes.highway_ns = 10'500'000;
  TuneGemvs(Q8Request(), long_passes.Pass(), long_passes.Options(), nullptr);
  EXPECT_EQ(long_passes.passes, 1 + 2 * 3);
}

TEST(GemvTuner, OneCandidateIsNotTimed) {
  FakeMachine m;
  const std::vector<GemvChoice> c = TuneGemvs({{kQ8, {Vnni(false)}}}, m.Pass(), m.Options(), nullptr);
  EXPECT_EQ(m.passes, 0);
  EXPECT_EQ(m.clock_reads, 0);
  EXPECT_EQ(c[0].Line(), "q8_0 8192x2048: no-vnni, the only candidate");
}

TEST(GemvTuner, ACacheHitDoesNoTiming) {
  const std::string dir = TempDir("hit");
  FakeMachine first;
  first.vnni_ns = 15'400'000;
  first.highway_ns = 10'400'000;
  std::string warning;
  TuneGemvs(Q8Request(), first.Pass(), first.Options(dir), &warning);
  ASSERT_TRUE(warning.empty()) << warning;
  ASSERT_TRUE(std::filesystem::exists(GemvTuneCachePath(dir, "test cpu")));
  FakeMachine second;  // would now choose vnni if it measured
  second.vnni_ns = 1'000'000;
  second.highway_ns = 50'000'000;
  const std::vector<GemvChoice> c = TuneGemvs(Q8Request(), second.Pass(), second.Options(dir), &warning);
  EXPECT_EQ(second.passes, 0);
  EXPECT_EQ(second.clock_reads, 0);
  EXPECT_TRUE(c[0].cached);
  EXPECT_FALSE(c[0].variants().vnni);
  EXPECT_EQ(c[0].ns, (std::vector<int64_t>{15'400'000, 10'400'000}));
  EXPECT_NE(c[0].Line().find("measured 10.400 ms vs vnni 15.400 ms (default vnni), cached"), std::string::npos)
      << c[0].Line();
}

// Another thread count, CPU or candidate set is another entry: measured.
TEST(GemvTuner, AnotherKeyIsMeasured) {
  const std::string dir = TempDir("keys");
  FakeMachine m;
  m.vnni_ns = 15'400'000;
  m.highway_ns = 10'400'000;
  TuneGemvs(Q8Request(), m.Pass(), m.Options(dir), nullptr);
  for (int k = 0; k < 4; ++k) {
    FakeMachine again;
    again.vnni_ns = 1'000'000;
    again.highway_ns = 50'000'000;
    GemvTuneOptions o = again.Options(dir);
    std::vector<GemvTuneRequest> r = Q8Request();
    if (k == 0) o.threads = 1;
    if (k == 1) o.cpu_id = "another cpu";
    if (k == 2) r[0].shape.rows = 4096;
    if (k == 3) r[0].candidates[1].prefetch = !r[0].candidates[1].prefetch;
    const std::vector<GemvChoice> c = TuneGemvs(r, again.Pass(), o, nullptr);
    EXPECT_GT(again.passes, 0) << k;
    EXPECT_FALSE(c[0].cached) << k;
    EXPECT_TRUE(c[0].variants().vnni) << k;
  }
}

// Each way an entry can be wrong: re-measured (and then the right choice), never trusted.
TEST(GemvTuner, ACorruptCacheEntryIsMeasuredAgain) {
  const std::string dir = TempDir("corrupt");
  const std::string path = GemvTuneCachePath(dir, "test cpu");
  FakeMachine m;
  m.vnni_ns = 15'400'000;
  m.highway_ns = 10'400'000;
  TuneGemvs(Q8Request(), m.Pass(), m.Options(dir), nullptr);
  std::string header, entry;
  {
    std::ifstream in(path);
    ASSERT_TRUE(std::getline(in, header) && std::getline(in, entry));
  }
  ASSERT_NE(entry.find(" | 15400000 10400000 | 1 | "), std::string::npos) << entry;
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    return s.replace(s.find(from), from.size(), to);
  };
  std::string body_vnni = entry.substr(0, entry.rfind(" | "));  // "... | 15400000 10400000 | 1"
  body_vnni.back() = '0';
  const std::vector<std::string> corrupt = {
      replace(entry, " | 1 | ", " | 0 | "),                          // choice changed, checksum stale
      replace(entry, "15400000 10400000", "15400000 10400001"),     // a time changed, checksum stale
      entry.substr(0, entry.size() - 3),                           // truncated
      body_vnni + " | 0123456789abcdef",                            // a made-up checksum
      "garbage",
  };
  for (size_t k = 0; k < corrupt.size(); ++k) {
    {
      std::ofstream out(path, std::ios::trunc);
      out << header << "\n" << corrupt[k] << "\n";
    }
    FakeMachine again;  // vnni is now the faster: a trusted stale "no-vnni" would show
    again.vnni_ns = 5'000'000;
    again.highway_ns = 50'000'000;
    const std::vector<GemvChoice> c = TuneGemvs(Q8Request(), again.Pass(), again.Options(dir), nullptr);
    EXPECT_EQ(again.passes, 1 + 2 + 2 + 1) << k;
    EXPECT_FALSE(c[0].cached) << k;
    EXPECT_TRUE(c[0].variants().vnni) << k;
  }
}

// An entry whose checksum is right but whose choice is not its own fastest (written by
// other code, or edited with the checksum recomputed) is not trusted either.
TEST(GemvTuner, AnEntryWhoseChoiceIsNotItsFastestIsMeasuredAgain) {
  const std::string dir = TempDir("inconsistent");
  FakeMachine m;
  m.vnni_ns = 15'400'000;
  m.highway_ns = 10'400'000;
  TuneGemvs(Q8Request(), m.Pass(), m.Options(dir), nullptr);
  // Swapping the times keeps the "1" choice but makes candidate 0 the fastest.
  const std::string path = GemvTuneCachePath(dir, "test cpu");
  std::string header, entry;
  {
    std::ifstream in(path);
    ASSERT_TRUE(std::getline(in, header) && std::getline(in, entry));
  }
  std::string body = entry.substr(0, entry.rfind(" | "));
  body.replace(body.find("15400000 10400000"), 17, "10400000 15400000");
  // The checksum as the writer computes it (FNV-1a 64 of the body).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : body) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char sum[17];
  std::snprintf(sum, sizeof(sum), "%016llx", static_cast<unsigned long long>(h));
  {
    std::ofstream out(path, std::ios::trunc);
    out << header << "\n" << body << " | " << sum << "\n";
  }
  FakeMachine again;
  again.vnni_ns = 5'000'000;
  again.highway_ns = 50'000'000;
  const std::vector<GemvChoice> c = TuneGemvs(Q8Request(), again.Pass(), again.Options(dir), nullptr);
  EXPECT_GT(again.passes, 0);
  EXPECT_FALSE(c[0].cached);
}

TEST(GemvTuner, AnUnwritableCacheIsAWarningNotAFailure) {
  const std::string dir = TempDir("unwritable");
  { std::ofstream(dir) << "a file where the directory should be"; }
  FakeMachine m;
  m.vnni_ns = 15'400'000;
  m.highway_ns = 10'400'000;
  std::string warning;
  const std::vector<GemvChoice> c = TuneGemvs(Q8Request(), m.Pass(), m.Options(dir), &warning);
  EXPECT_FALSE(c[0].variants().vnni);
  EXPECT_NE(warning.find("cannot write the GEMV tuning cache"), std::string::npos) << warning;
}

// The candidates are this CPU's distinct loops, the default first, forced fields fixed.
TEST(GemvTuner, CandidatesAreTheDistinctLoopsWithTheDefaultFirst) {
  const std::vector<GemvVariants> q8 = GemvCandidates(WeightFormat::kQ8_0, {});
  ASSERT_EQ(q8.size(), 1u);  // VNNI / Highway int8 change the bits: forced only
  EXPECT_EQ(q8[0], GemvVariants());
  GemvVariantPolicy no_vnni;
  no_vnni.vnni = false;
  const std::vector<GemvVariants> forced = GemvCandidates(WeightFormat::kQ8_0, no_vnni);
  ASSERT_EQ(forced.size(), 1u);
  EXPECT_FALSE(forced[0].vnni);
  const bool dot = kernels::GemvUsesBf16Dot();
  EXPECT_EQ(GemvCandidates(WeightFormat::kBf16X12, {}).size(), dot ? 2u : 1u);  // prefetch on / off
  EXPECT_EQ(GemvCandidates(WeightFormat::kBf16RowMajor, {}).size(), 1u);  // its loop never prefetches
  for (WeightFormat f : formats::kAllWeightFormats) {
    for (const GemvVariants& v : GemvCandidates(f, {})) {
      EXPECT_TRUE(v.bf16_dot) << formats::Name(f);
      EXPECT_TRUE(v.vnni) << formats::Name(f);
    }
  }
  GemvVariantPolicy prefetch_on;
  prefetch_on.prefetch = true;
  for (const GemvVariants& v : GemvCandidates(WeightFormat::kBf16Packed, prefetch_on)) EXPECT_TRUE(v.prefetch);
}

// The weight bytes of a [rows, cols] matrix in `format`'s layout: random narrow bf16
// values (as trained weights are) packed, or random GGUF blocks.
std::vector<uint8_t> WeightBytes(WeightFormat format, size_t rows, size_t cols, uint32_t seed) {
  if (formats::IsBlockFormat(format)) return kernels::ref::RandomBlocks(format, rows, cols, seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.06f, 0.06f);
  std::vector<bf16> w(rows * cols);
  for (bf16& e : w) e = F32ToBf16(u(rng));
  std::vector<uint8_t> out;
  if (format == WeightFormat::kBf16RowMajor) {
    out.resize(w.size() * sizeof(bf16));
    std::memcpy(out.data(), w.data(), out.size());
  } else if (format == WeightFormat::kBf16Packed) {
    out.resize(kernels::PackedGemvElements(rows, cols) * sizeof(bf16));
    kernels::PackGemvWeights(w.data(), rows, cols, reinterpret_cast<bf16*>(out.data()));
  } else {
    out.resize(kernels::X12GemvBytes(rows, cols));
    kernels::PackX12GemvWeights(w.data(), rows, cols, out.data());
  }
  return out;
}

// The tuner picks among a shape's candidates by time, and times differ from run to
// run: a candidate that computed other bits than the default would make a stage's
// tokens depend on how busy the machine was when it tuned. Every candidate of every
// format computes the default's bits, alone and on pools (row splits at other rows).
TEST(GemvTuner, EveryCandidateComputesTheDefaultsBits) {
  ThreadPool pool2(2), pool3(3);
  const size_t shapes[][2] = {{8, 256}, {61, 512}, {576, 1536}, {1536, 768}};
  size_t compared = 0;
  for (WeightFormat format : formats::kAllWeightFormats) {
    const std::vector<GemvVariants> candidates = GemvCandidates(format, {});
    for (const auto& s : shapes) {
      const size_t rows = s[0], cols = s[1];
      const GemvShape shape{format, static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
      const std::vector<uint8_t> w = WeightBytes(format, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
      std::mt19937 rng(static_cast<uint32_t>(cols));
      std::uniform_real_distribution<float> u(-2.0f, 2.0f);
      std::vector<bf16> x(cols);
      for (bf16& e : x) e = F32ToBf16(u(rng));
      std::vector<float> want(rows);
      RunGemv(shape, w.data(), candidates[0], x.data(), want.data(), nullptr);
      for (const GemvVariants& v : candidates) {
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
          std::vector<float> got(rows, -1.0f);
          RunGemv(shape, w.data(), v, x.data(), got.data(), pool);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), rows * sizeof(float)), 0)
              << shape.Name() << ": " << GemvVariantName(format, v) << " on "
              << (pool ? pool->num_threads() : 1) << " threads differs from " << GemvVariantName(format, candidates[0]);
          ++compared;
        }
      }
    }
  }
  std::printf("%zu candidate runs compared\n", compared);
}

TEST(GemvTuner, CpuIdentityNamesTheModel) {
  const std::string id = CpuIdentity();
  EXPECT_NE(id.find("family "), std::string::npos) << id;
  EXPECT_NE(id.find(" cpuid "), std::string::npos) << id;
}

}  // namespace
}  // namespace dk::runtime::cpu
