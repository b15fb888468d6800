#include "tools/flags/runtime_flags.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"
#include "util/thread_pool.h"

ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int, pool_spin);
ABSL_DECLARE_FLAG(int, host_spin);
ABSL_DECLARE_FLAG(bool, team_runs);
ABSL_DECLARE_FLAG(bool, gemv_vnni);
ABSL_DECLARE_FLAG(bool, gemv_bf16dot);
ABSL_DECLARE_FLAG(std::string, gemv_prefetch);
ABSL_DECLARE_FLAG(bool, gemv_tune);
ABSL_DECLARE_FLAG(std::string, gemv_tune_cache);
ABSL_DECLARE_FLAG(std::string, prefill_chunk);

namespace dk::tools {
namespace {

TEST(RuntimeFlags, DefaultsDescribeEveryOption) {
  auto o = RuntimeOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  const std::string d = o->Describe();
  for (const char* key : {"threads=", "worker_spin=16384", "join_spin=1024", "adaptive=1", "host_spin=auto",
                          "device_thread=0", "team_runs=1", "kernel_times=0", "gemv_bf16dot=1", "gemv_vnni=1",
                          "gemv_prefetch=auto(", "prefill_chunk=auto"}) {
    EXPECT_NE(d.find(key), std::string::npos) << key << " missing from: " << d;
  }
}

TEST(RuntimeFlags, BadValuesNameTheFlag) {
  absl::SetFlag(&FLAGS_pool_spin, -3);
  auto o = RuntimeOptionsFromFlags();
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--pool_spin -3 is outside [0, "), std::string::npos) << o.status();
  absl::SetFlag(&FLAGS_pool_spin, 1 << 14);
  for (const char* bad : {"0", "-1", "many", "100000"}) {
    absl::SetFlag(&FLAGS_prefill_chunk, std::string(bad));
    o = RuntimeOptionsFromFlags();
    EXPECT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find(absl::StrCat("--prefill_chunk=", bad, ": expected auto or a number")),
              std::string::npos)
        << o.status();
  }
  absl::SetFlag(&FLAGS_prefill_chunk, std::string("64"));
  o = RuntimeOptionsFromFlags();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->prefill_rows, 64);
  EXPECT_NE(o->Describe().find("prefill_chunk=64"), std::string::npos);
  absl::SetFlag(&FLAGS_prefill_chunk, std::string("auto"));
  absl::SetFlag(&FLAGS_gemv_prefetch, std::string("sometimes"));
  o = RuntimeOptionsFromFlags();
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--gemv_prefetch=sometimes"), std::string::npos) << o.status();
  absl::SetFlag(&FLAGS_gemv_prefetch, std::string("auto"));
}

// Tools tune the GEMV variants by default, cached under the user's cache directory;
// --gemv_tune=false turns it off, --gemv_tune_cache names or drops the cache.
TEST(RuntimeFlags, GemvTuningIsOnWithACacheUnlessTurnedOff) {
  auto o = RuntimeOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->cpu.gemv_tune);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if ((xdg != nullptr && xdg[0] == '/') || (home != nullptr && home[0] != '\0')) {
    EXPECT_NE(o->cpu.gemv_tune_cache.find("decodekit/gemv_tune"), std::string::npos) << o->cpu.gemv_tune_cache;
  }
  EXPECT_NE(o->Describe().find("gemv_tune=1"), std::string::npos) << o->Describe();
  absl::SetFlag(&FLAGS_gemv_tune, false);
  absl::SetFlag(&FLAGS_gemv_tune_cache, std::string("none"));
  o = RuntimeOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->cpu.gemv_tune);
  EXPECT_EQ(o->cpu.gemv_tune_cache, "");
  absl::SetFlag(&FLAGS_gemv_tune_cache, std::string("/some/dir"));
  EXPECT_EQ(RuntimeOptionsFromFlags()->cpu.gemv_tune_cache, "/some/dir");
  absl::SetFlag(&FLAGS_gemv_tune, true);
  absl::SetFlag(&FLAGS_gemv_tune_cache, std::string(""));
}

// Applying sets the shared pool, the flags reach the device options, and a second,
// different pool configuration after the pool exists is refused instead of
// silently ignored.
TEST(RuntimeFlags, ApplySetsThePoolAndTheKernelVariants) {
  absl::SetFlag(&FLAGS_threads, 1);
  absl::SetFlag(&FLAGS_pool_spin, 7);
  absl::SetFlag(&FLAGS_host_spin, 5);
  absl::SetFlag(&FLAGS_team_runs, false);
  absl::SetFlag(&FLAGS_gemv_vnni, false);
  absl::SetFlag(&FLAGS_gemv_bf16dot, false);
  absl::SetFlag(&FLAGS_gemv_prefetch, std::string("on"));
  auto o = ApplyRuntimeFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->cpu.host_spin, 5);
  EXPECT_FALSE(o->cpu.team_runs);
  EXPECT_EQ(SharedThreadPool().num_threads(), 1);
  EXPECT_EQ(SharedThreadPool().options().worker_spin, 7);
  EXPECT_FALSE(o->cpu.gemv_vnni);
  EXPECT_FALSE(o->cpu.gemv_bf16dot);
  EXPECT_EQ(o->cpu.gemv_prefetch, runtime::CpuDeviceOptions::Prefetch::kOn);
  EXPECT_NE(o->Describe().find("gemv_prefetch=on"), std::string::npos) << o->Describe();
  // A tool's sessions run on the pool just configured, with the device options.
  const runtime::SessionOptions session = o->Session();
  EXPECT_EQ(session.pool, &SharedThreadPool());
  EXPECT_EQ(session.cpu.host_spin, 5);
  EXPECT_FALSE(session.cpu.gemv_vnni);
  EXPECT_EQ(session.prefill_rows, o->prefill_rows);

  absl::SetFlag(&FLAGS_threads, 2);
  const auto again = ApplyRuntimeFlags();
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  EXPECT_EQ(SharedThreadPool().num_threads(), 1);
}

}  // namespace
}  // namespace dk::tools
