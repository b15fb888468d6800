#include "runtime/cpu/cpu_device.h"

#include <dirent.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"
#include "runtime/cpu/gemv_tuner.h"
#include "util/bf16.h"
#include "util/thread_pool.h"

namespace dk::runtime {
namespace {

// Two groups: y = a + b (group "first"), z = y + b (group "second").
// The categories of y are chosen per test.
elf::Program TwoAdds(const char* y_category) {
  elf::Program p;
  const std::string text = std::string(R"pb(
    schema_version: 2
    model { name: "toy" rms_eps: 1e-5 }
    bos { name: "a" shape: 8 dtype: BF16 category: WRITE size_bytes: 16 }
    bos { name: "b" shape: 8 dtype: BF16 category: STATIC size_bytes: 16 }
    bos { name: "y" shape: 8 dtype: BF16 category: )pb") + y_category + R"pb( size_bytes: 16 }
    bos { name: "z" shape: 8 dtype: BF16 category: OUTPUT size_bytes: 16 }
    steps { group { name: "first" entry_symbol: "first" launches {
      kernel_symbol: "dk_add_bf16" params { key: "n" value: 8 }
      bindings { param: "a" bo: "a" } bindings { param: "b" bo: "b" } bindings { param: "y" bo: "y" } } } }
    steps { group { name: "second" entry_symbol: "second" launches {
      kernel_symbol: "dk_add_bf16" params { key: "n" value: 8 }
      bindings { param: "a" bo: "y" } bindings { param: "b" bo: "b" } bindings { param: "y" bo: "z" } } } }
  )pb";
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  return p;
}

// One group "g": y = w x (a rows x cols bf16 weight, row-major), then with `then_add`
// y = y + y.
elf::Program Gemv(int rows, int cols, bool then_add) {
  const std::string add = absl::Substitute(R"pb(
      launches { kernel_symbol: "dk_add_bf16" params { key: "n" value: $0 }
        bindings { param: "a" bo: "y" } bindings { param: "b" bo: "y" } bindings { param: "y" bo: "y" } })pb",
                                           rows);
  const std::string text = absl::Substitute(R"pb(
    schema_version: 2
    model { name: "toy" rms_eps: 1e-5 }
    bos { name: "w" shape: [$0, $1] dtype: BF16 category: STATIC size_bytes: $2 weight_tensor: "w" }
    bos { name: "x" shape: $1 dtype: BF16 category: WRITE size_bytes: $3 }
    bos { name: "y" shape: $0 dtype: BF16 category: OUTPUT size_bytes: $4 }
    steps { group { name: "g" entry_symbol: "g"
      launches { kernel_symbol: "dk_gemv_bf16_rowmajor" params { key: "rows" value: $0 } params { key: "cols" value: $1 }
        bindings { param: "w" bo: "w" } bindings { param: "x" bo: "x" } bindings { param: "y" bo: "y" } }$5 } }
  )pb", rows, cols, rows * cols * 2, cols * 2, rows * 2, then_add ? add : "");
  elf::Program p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

struct Fixture {
  std::unique_ptr<Device> device;
  std::vector<std::unique_ptr<BufferObject>> bos;
  std::unique_ptr<LoadedElf> elf;
};

Fixture Load(const elf::Program& p, bool validate, const CpuDeviceOptions& cpu = {}, ThreadPool* pool = nullptr) {
  Fixture f;
  f.device = MakeCpuDevice(DeviceOptions{validate}, pool, cpu);
  std::vector<BufferObject*> raw;
  for (const auto& b : p.bos()) {
    f.bos.push_back(*f.device->Allocate(b.name(), b.size_bytes(), b.category(), 1));
    raw.push_back(f.bos.back().get());
  }
  auto elf = f.device->Load(p, "toy.elf", raw);
  EXPECT_TRUE(elf.ok()) << elf.status();
  if (elf.ok()) f.elf = *std::move(elf);
  return f;
}

// Threads of this process (/proc/self/task entries).
int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

std::vector<bf16> Fill(float v) { return std::vector<bf16>(8, F32ToBf16(v)); }

absl::Status RunGroup(Fixture& f, int g) {
  auto run = f.device->Start(*f.elf, g, {});
  if (!run.ok()) return run.status();
  return (*run)->Wait();
}

// Writes and syncs activation a = `a` (BO 0), runs both groups, and reads z
// (= a + 2 b) back. (All six calls run, in order; the first error is returned.)
absl::StatusOr<std::vector<bf16>> TokenZ(Fixture& f, float a) {
  const std::vector<bf16> x = Fill(a);
  std::vector<bf16> z(8);
  for (absl::Status s : {f.bos[0]->Write(x.data(), 16), f.bos[0]->SyncToDevice(), RunGroup(f, 0), RunGroup(f, 1),
                         f.bos[3]->SyncFromDevice(), f.bos[3]->Read(z.data(), 16)}) {
    if (!s.ok()) return s;
  }
  return z;
}

TEST(CpuDevice, RunsGroupsAndMovesBytesOnlyOnSync) {
  Fixture f = Load(TwoAdds("INTERMEDIATE"), /*validate=*/true);
  auto b = Fill(2);
  ASSERT_TRUE(f.bos[1]->Write(b.data(), 16).ok());
  ASSERT_TRUE(f.bos[1]->SyncToDevice().ok());
  auto z = TokenZ(f, 1);
  ASSERT_TRUE(z.ok()) << z.status();
  for (const bf16& v : *z) EXPECT_EQ(Bf16ToF32(v), 5.0f);
  // A second token: new activation, same static BO.
  z = TokenZ(f, 10);
  ASSERT_TRUE(z.ok()) << z.status();
  for (const bf16& v : *z) EXPECT_EQ(Bf16ToF32(v), 14.0f);
}

// STATIC BOs under 4 MiB (a small model's weights) are carved from huge-page slabs,
// each right after the one allocated before it; other BOs are not; a slab outlives
// the device while a BO in it lives; BOs in a slab do not overlap.
TEST(CpuDevice, SmallStaticBosFollowEachOtherInHugePageSlabs) {
  auto device = MakeCpuDevice(DeviceOptions{});
  auto alloc = [&](const std::string& name, size_t bytes, elf::BoCategory c) {
    auto bo = device->Allocate(name, bytes, c, 1);
    EXPECT_TRUE(bo.ok()) << bo.status();
    return *std::move(bo);
  };
  auto addr = [](const std::unique_ptr<BufferObject>& bo) { return reinterpret_cast<uintptr_t>(CpuBoDeviceBytes(*bo)); };
  std::vector<std::unique_ptr<BufferObject>> bos;
  bos.push_back(alloc("w0", 1000, elf::STATIC));
  bos.push_back(alloc("act", 1000, elf::INTERMEDIATE));
  bos.push_back(alloc("w1", 5000, elf::STATIC));
  bos.push_back(alloc("w2", 3 << 20, elf::STATIC));
  bos.push_back(alloc("big", 5 << 20, elf::STATIC));
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  EXPECT_EQ(addr(bos[0]) % kHuge, 0u) << "the slab is not on a huge-page boundary";
  EXPECT_EQ(addr(bos[2]), addr(bos[0]) + 1024) << "w1 does not follow w0";
  EXPECT_EQ(addr(bos[3]), addr(bos[2]) + 5056) << "w2 does not follow w1";
  EXPECT_TRUE(addr(bos[1]) < addr(bos[0]) || addr(bos[1]) >= addr(bos[3]) + (3 << 20)) << "an INTERMEDIATE BO in the slab";
  EXPECT_EQ(addr(bos[4]) % kHuge, 0u) << "a BO of 4 MiB or more is on its own huge pages";
  // More than one slab (64 MiB): 24 BOs of 3.5 MiB, each filled with its index.
  const size_t n = 7 << 19;
  for (int i = 0; i < 24; ++i) {
    bos.push_back(alloc("s" + std::to_string(i), n, elf::STATIC));
    std::vector<uint8_t> fill(n, static_cast<uint8_t>(i + 1));
    ASSERT_TRUE(bos.back()->Write(fill.data(), n).ok());
    ASSERT_TRUE(bos.back()->SyncToDevice().ok());
  }
  device.reset();  // the BOs keep their slabs
  for (int i = 0; i < 24; ++i) {
    const uint8_t* d = CpuBoDeviceBytes(*bos[5 + i]);
    ASSERT_NE(d, nullptr);
    size_t wrong = 0;
    for (size_t k = 0; k < n; ++k) wrong += d[k] != i + 1;
    EXPECT_EQ(wrong, 0u) << "BO s" << i;
  }
}

TEST(CpuDevice, WriteWithoutSyncIsNamed) {
  Fixture f = Load(TwoAdds("INTERMEDIATE"), true);
  auto a = Fill(1), b = Fill(2);
  ASSERT_TRUE(f.bos[1]->Write(b.data(), 16).ok());
  ASSERT_TRUE(f.bos[1]->SyncToDevice().ok());
  ASSERT_TRUE(f.bos[0]->Write(a.data(), 16).ok());  // no SyncToDevice
  const absl::Status s = RunGroup(f, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("ELF 'toy.elf', group 'first', launch 0 (dk_add_bf16): reads WRITE BO 'a' "
                             "that the host wrote but never synced"),
            std::string::npos)
      << s;
}

TEST(CpuDevice, IntermediateReadBeforeWrittenIsNamed) {
  Fixture f = Load(TwoAdds("INTERMEDIATE"), true);
  auto b = Fill(2);
  ASSERT_TRUE(f.bos[1]->Write(b.data(), 16).ok());
  ASSERT_TRUE(f.bos[1]->SyncToDevice().ok());
  const absl::Status s = RunGroup(f, 1);  // "second" before "first"
  EXPECT_NE(s.message().find("group 'second'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("INTERMEDIATE BO 'y' before any launch wrote it"), std::string::npos) << s;
}

// Runs go inline in Start by default, on a device thread with
// CpuDeviceOptions::device_thread: both give the same results and report a violation
// through Wait, and the device thread mode makes a second thread.
TEST(CpuDevice, InlineAndDeviceThreadRunsAgree) {
  for (bool threaded : {false, true}) {
    SCOPED_TRACE(threaded ? "device_thread" : "inline");
    CpuDeviceOptions cpu;
    cpu.device_thread = threaded;
    ThreadPool pool(2);  // its worker exists before the count
    const int threads_before = ThreadCount();
    Fixture f = Load(TwoAdds("INTERMEDIATE"), true, cpu, &pool);
    EXPECT_EQ(ThreadCount() - threads_before, threaded ? 1 : 0);
    auto b = Fill(2);
    ASSERT_TRUE(f.bos[1]->Write(b.data(), 16).ok());
    ASSERT_TRUE(f.bos[1]->SyncToDevice().ok());
    const absl::Status early = RunGroup(f, 1);  // "second" before "first"
    EXPECT_NE(early.message().find("INTERMEDIATE BO 'y' before any launch wrote it"), std::string::npos) << early;
    auto z = TokenZ(f, 1);
    ASSERT_TRUE(z.ok()) << z.status();
    for (const bf16& v : *z) EXPECT_EQ(Bf16ToF32(v), 5.0f);
  }
}

// A device given no pool makes its own (ThreadPoolOptions' defaults) and runs its
// kernels there, never on the process's SharedThreadPool(): devices made on
// different threads must share no threads and no pool state. The shared pool is set
// to a thread count no default pool has and to stay parallel, so that a device that
// took it would both describe its thread count and add to the pool's parallel runs.
TEST(CpuDevice, WithoutAPoolRunsOnAPoolOfItsOwn) {
  const int own_threads = ThreadPoolOptions{}.ResolvedThreads();
  ThreadPoolOptions shared_options;
  shared_options.num_threads = own_threads + 1;
  shared_options.contention.enabled = false;
  ASSERT_TRUE(ConfigureSharedThreadPool(shared_options)) << "the shared pool existed before this test";
  ThreadPool& shared = SharedThreadPool();
  const int64_t shared_runs = shared.stats().parallel_runs;

  const elf::Program gemv = Gemv(1024, 64, /*then_add=*/false);
  Fixture f = Load(gemv, /*validate=*/false);
  ASSERT_TRUE(f.elf);
  EXPECT_NE(f.device->description().find(absl::StrCat(", ", own_threads, " threads")), std::string::npos)
      << f.device->description();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(RunGroup(f, 0).ok());
  EXPECT_EQ(shared.stats().parallel_runs, shared_runs) << "the device ran its kernels on SharedThreadPool()";

  // The control: the same device given the shared pool runs there.
  Fixture g = Load(gemv, /*validate=*/false, {}, &shared);
  ASSERT_TRUE(g.elf);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(RunGroup(g, 0).ok());
  EXPECT_GT(shared.stats().parallel_runs, shared_runs);
}

// CpuDeviceOptions::kernel_times: time and weight bytes per kernel symbol, summed over its
// launches until reset; unset: nothing is kept.
TEST(CpuDevice, KernelTimesPerSymbolWhenAsked) {
  const elf::Program gemv = Gemv(8, 32, /*then_add=*/true);
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "kernel_times" : "off");
    CpuDeviceOptions cpu;
    cpu.kernel_times = on;
    Fixture f = Load(gemv, /*validate=*/false, cpu);
    ASSERT_TRUE(f.elf);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(RunGroup(f, 0).ok());
    std::vector<KernelTime> times = CpuKernelTimes(*f.device);
    if (!on) {
      EXPECT_TRUE(times.empty());
      continue;
    }
    ASSERT_EQ(times.size(), 2u);
    EXPECT_EQ(times[0].symbol, "dk_gemv_bf16_rowmajor");
    EXPECT_EQ(times[0].calls, 3);
    EXPECT_EQ(times[0].weight_bytes, 3 * 512);
    EXPECT_GT(times[0].ns, 0);
    EXPECT_EQ(times[1].symbol, "dk_add_bf16");
    EXPECT_EQ(times[1].calls, 3);
    EXPECT_EQ(times[1].weight_bytes, 0);
    ResetCpuKernelTimes(*f.device);
    times = CpuKernelTimes(*f.device);
    ASSERT_EQ(times.size(), 2u);
    EXPECT_EQ(times[0].calls + times[0].ns + times[0].weight_bytes, 0);
    ASSERT_TRUE(RunGroup(f, 0).ok());
    EXPECT_EQ(CpuKernelTimes(*f.device)[0].calls, 1);
  }
}

TEST(CpuDevice, StaticRewrittenAfterUseIsNamed) {
  Fixture f = Load(TwoAdds("INTERMEDIATE"), true);
  auto a = Fill(1), b = Fill(2);
  for (int i : {0, 1}) {
    ASSERT_TRUE(f.bos[i]->Write(i ? b.data() : a.data(), 16).ok());
    ASSERT_TRUE(f.bos[i]->SyncToDevice().ok());
  }
  ASSERT_TRUE(RunGroup(f, 0).ok());
  const absl::Status s = f.bos[1]->Write(b.data(), 16);
  EXPECT_NE(s.message().find("host rewrote STATIC BO 'b' after a launch used it"), std::string::npos) << s;
}

// Fill: a STATIC BO's bytes made straight on its device side, from zeros (a fresh BO's,
// one in a slab or on its own pages, and one written before); the launch reads them as
// synced; after a launch used the BO, a Fill is a violation as a Write is.
TEST(CpuDevice, FillWritesAStaticBoOnTheDeviceFromZeros) {
  Fixture f = Load(TwoAdds("INTERMEDIATE"), true);
  auto fill_with = [](float v, bool* zeros) {
    return [v, zeros](uint8_t* dst) {
      *zeros = true;
      for (int k = 0; k < 16; ++k) *zeros &= dst[k] == 0;
      const std::vector<bf16> b = Fill(v);
      std::memcpy(dst, b.data(), 16);
      return absl::OkStatus();
    };
  };
  bool zeros = false;
  ASSERT_TRUE(f.bos[1]->Fill(fill_with(7, &zeros)).ok());
  EXPECT_TRUE(zeros) << "a fresh BO";
  ASSERT_TRUE(f.bos[1]->Fill(fill_with(2, &zeros)).ok());
  EXPECT_TRUE(zeros) << "a BO filled before";
  auto z = TokenZ(f, 1);
  ASSERT_TRUE(z.ok()) << z.status();
  for (const bf16& v : *z) EXPECT_EQ(Bf16ToF32(v), 5.0f);
  const absl::Status s = f.bos[1]->Fill(fill_with(2, &zeros));
  EXPECT_NE(s.message().find("host rewrote STATIC BO 'b' after a launch used it"), std::string::npos) << s;
  auto big = f.device->Allocate("big", 5 << 20, elf::STATIC, 1);
  ASSERT_TRUE(big.ok()) << big.status();
  ASSERT_TRUE((*big)->Fill([&](uint8_t* dst) {
                      size_t nonzero = 0;
                      for (size_t k = 0; k < (5u << 20); ++k) nonzero += dst[k] != 0;
                      EXPECT_EQ(nonzero, 0u) << "a BO on its own pages";
                      return absl::OkStatus();
                    }).ok());
}

TEST(CpuDevice, HostTouchingIntermediatesAndStaleReadsAreNamed) {
  Fixture f = Load(TwoAdds("INTERMEDIATE"), true);
  auto a = Fill(1);
  std::vector<bf16> out(8);
  EXPECT_NE(f.bos[2]->Write(a.data(), 16).message().find("host wrote INTERMEDIATE BO 'y'"), std::string::npos);
  EXPECT_NE(f.bos[2]->Read(out.data(), 16).message().find("host read INTERMEDIATE BO 'y'"), std::string::npos);
  EXPECT_FALSE(f.bos[2]->SyncFromDevice().ok());

  Fixture g = Load(TwoAdds("OUTPUT"), true);
  auto b = Fill(2);
  for (int i : {0, 1}) {
    ASSERT_TRUE(g.bos[i]->Write(i ? b.data() : a.data(), 16).ok());
    ASSERT_TRUE(g.bos[i]->SyncToDevice().ok());
  }
  ASSERT_TRUE(RunGroup(g, 0).ok());
  const absl::Status s = g.bos[2]->Read(out.data(), 16);  // no SyncFromDevice
  EXPECT_NE(s.message().find("read BO 'y' back without syncing it from the device"), std::string::npos) << s;
}

TEST(CpuDevice, WithoutValidationViolationsGoUnreported) {
  Fixture f = Load(TwoAdds("INTERMEDIATE"), /*validate=*/false);
  auto a = Fill(1);
  EXPECT_TRUE(f.bos[0]->Write(a.data(), 16).ok());
  EXPECT_TRUE(RunGroup(f, 0).ok());
}

TEST(CpuDevice, LoadRejectsBadLaunches) {
  auto device = MakeCpuDevice(DeviceOptions{true});
  elf::Program p = TwoAdds("INTERMEDIATE");
  std::vector<std::unique_ptr<BufferObject>> bos;
  std::vector<BufferObject*> raw;
  for (const auto& b : p.bos()) {
    bos.push_back(*device->Allocate(b.name(), b.size_bytes(), b.category(), 1));
    raw.push_back(bos.back().get());
  }
  elf::Program missing = p;
  missing.mutable_steps(0)->mutable_group()->mutable_launches(0)->mutable_bindings()->RemoveLast();
  auto s = device->Load(missing, "toy.elf", raw).status();
  EXPECT_NE(s.message().find("parameter 'y' is not bound"), std::string::npos) << s;

  elf::Program too_big = p;
  (*too_big.mutable_steps(0)->mutable_group()->mutable_launches(0)->mutable_params())["n"] = 9;
  s = device->Load(too_big, "toy.elf", raw).status();
  EXPECT_NE(s.message().find("holds 16 bytes, the launch needs 18"), std::string::npos) << s;

  elf::Program host_kernel = p;
  host_kernel.mutable_steps(0)->mutable_group()->mutable_launches(0)->set_kernel_symbol("dk_attention_decode_bf16");
  s = device->Load(host_kernel, "toy.elf", raw).status();
  EXPECT_NE(s.message().find("has no kernel 'attention'"), std::string::npos) << s;
}

// Q5_0 and the K-quants are sized as GGUF stores them; the device reads them only as
// a file's own blocks and refuses to make them from bf16 weights.
TEST(CpuDevice, BlockFormatsWithoutAQuantizerAreReadOnlyAsStored) {
  auto device = MakeCpuDevice(DeviceOptions{true});
  EXPECT_EQ(*device->LayoutBytes("row_major", elf::Q4_K, 3, 512), 3u * 2 * 144);
  EXPECT_EQ(*device->LayoutBytes("", elf::Q6_K, 3, 512), 3u * 2 * 210);
  EXPECT_EQ(*device->LayoutBytes("", elf::Q5_0, 3, 64), 3u * 2 * 22);
  EXPECT_FALSE(device->LayoutBytes("", elf::Q4_K, 3, 96).ok());  // not whole super-blocks
  std::vector<bf16> w(3 * 256);
  std::vector<uint8_t> out(3 * 144);
  const absl::Status s = device->PackWeight("row_major", elf::Q4_K, w.data(), 3, 256, out.data(), false);
  EXPECT_NE(s.message().find("reads q4_k blocks only as a weights file stores them"), std::string::npos) << s;
  EXPECT_TRUE(device->PackWeight("row_major", elf::Q4_0, w.data(), 3, 256, out.data(), false).ok());
}

}  // namespace
}  // namespace dk::runtime

namespace dk::runtime {
namespace {

// The GEMV variants are the device's: making a second device with other options
// leaves the first one's alone, and Describe says which are asked for.
TEST(CpuDevice, OptionsSetTheDevicesGemvVariantsAndDescribeThemselves) {
  CpuDeviceOptions cpu;
  cpu.gemv_vnni = false;
  cpu.gemv_bf16dot = false;
  cpu.gemv_prefetch = CpuDeviceOptions::Prefetch::kOn;
  cpu.host_spin = 7;
  auto device = MakeCpuDevice(DeviceOptions{}, nullptr, cpu);
  EXPECT_FALSE(CpuGemvVariants(*device).vnni);
  EXPECT_FALSE(CpuGemvVariants(*device).bf16_dot);
  EXPECT_TRUE(CpuGemvVariants(*device).prefetch);
  EXPECT_EQ(cpu.Describe(),
            "host_spin=7 device_thread=0 team_runs=1 kernel_times=0 gemv_bf16dot=0 gemv_vnni=0 gemv_prefetch=on "
            "gemv_tune=0");
  cpu.gemv_prefetch = CpuDeviceOptions::Prefetch::kOff;
  auto other = MakeCpuDevice(DeviceOptions{}, nullptr, cpu);
  auto defaults = MakeCpuDevice(DeviceOptions{});
  EXPECT_FALSE(CpuGemvVariants(*other).prefetch);
  EXPECT_TRUE(CpuGemvVariants(*device).prefetch) << "another device changed this one's variants";
  EXPECT_FALSE(CpuGemvVariants(*device).vnni);
  EXPECT_EQ(CpuGemvVariants(*defaults), kernels::GemvVariants());
  EXPECT_EQ(CpuGemvVariants(*defaults).prefetch, kernels::GemvSoftwarePrefetchDefault());
}

}  // namespace
}  // namespace dk::runtime

namespace dk::runtime {
namespace {

// A Q8_0 GEMV and a bf16 row-major one, each on a STATIC weight (zero bytes: valid
// blocks of scale 0).
elf::Program TwoGemvs() {
  elf::Program p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    schema_version: 1
    model { name: "toy" rms_eps: 1e-5 }
    bos { name: "wq" shape: [8, 64] dtype: BF16 category: STATIC size_bytes: 544 weight_tensor: "wq"
          block_format: Q8_0 }
    bos { name: "w" shape: [8, 64] dtype: BF16 category: STATIC size_bytes: 1024 weight_tensor: "w"
          layout: "packed_panel_v1" }
    bos { name: "x" shape: 64 dtype: BF16 category: WRITE size_bytes: 128 }
    bos { name: "y" shape: 8 dtype: BF16 category: OUTPUT size_bytes: 16 }
    bos { name: "z" shape: 8 dtype: BF16 category: OUTPUT size_bytes: 16 }
    steps { group { name: "g" entry_symbol: "g"
      launches { kernel_symbol: "dk_gemv_q8_0_rowmajor" params { key: "rows" value: 8 } params { key: "cols" value: 64 }
        bindings { param: "w" bo: "wq" } bindings { param: "x" bo: "x" } bindings { param: "y" bo: "y" } }
      launches { kernel_symbol: "dk_gemv_bf16_packed" params { key: "rows" value: 8 } params { key: "cols" value: 64 }
        bindings { param: "w" bo: "w" } bindings { param: "x" bo: "x" } bindings { param: "y" bo: "z" } } } }
  )pb", &p));
  return p;
}

std::string TuneDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

// gemv_tune: every GEMV shape gets a line saying what it runs and why; a forced
// variant is the only candidate; without gemv_tune nothing is measured.
TEST(CpuDevice, GemvTuneSaysWhatEachShapeRunsAndWhy) {
  int reads = 0;
  CpuDeviceOptions cpu;
  cpu.gemv_tune = true;
  cpu.gemv_tune_clock = [&reads] { return int64_t{1000} * ++reads; };  // every pass alike: defaults kept
  Fixture f = Load(TwoGemvs(), /*validate=*/false, cpu);
  ASSERT_TRUE(f.elf);
  const std::vector<std::string> lines = CpuGemvChoices(*f.device);
  ASSERT_EQ(lines.size(), 2u);
  const size_t q8 = cpu::GemvCandidates(formats::WeightFormat::kQ8_0, {}).size();
  const size_t bf16 = cpu::GemvCandidates(formats::WeightFormat::kBf16Packed, {}).size();
  EXPECT_EQ(lines[0].rfind("packed_panel_v1 8x64: ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("q8_0 8x64: ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[0].find(" measured ") != std::string::npos, bf16 > 1) << lines[0];
  EXPECT_EQ(lines[1].find(" measured ") != std::string::npos, q8 > 1) << lines[1];
  EXPECT_EQ(reads > 0, q8 > 1 || bf16 > 1);
  EXPECT_GT(CpuGemvTuneSeconds(*f.device), 0.0);
  for (const kernels::GemvVariants& v : CpuLaunchGemvVariants(*f.elf)) EXPECT_EQ(v, kernels::GemvVariants());
  EXPECT_EQ(CpuLaunchGemvVariants(*f.elf).size(), 2u);
  const std::string d = f.device->description();
  EXPECT_NE(d.find("; GEMV variants (tuning took "), std::string::npos) << d;
  EXPECT_NE(d.find(" s): packed_panel_v1 8x64: "), std::string::npos) << d;

  cpu.gemv_vnni = false;
  Fixture forced = Load(TwoGemvs(), /*validate=*/false, cpu);
  ASSERT_TRUE(forced.elf);
  EXPECT_EQ(CpuGemvChoices(*forced.device)[1], "q8_0 8x64: no-vnni, the only candidate");
  EXPECT_FALSE(CpuLaunchGemvVariants(*forced.elf)[0].vnni);
  cpu.gemv_prefetch = CpuDeviceOptions::Prefetch::kOff;
  Fixture no_prefetch = Load(TwoGemvs(), /*validate=*/false, cpu);
  ASSERT_TRUE(no_prefetch.elf);
  EXPECT_EQ(CpuGemvChoices(*no_prefetch.device)[0].find(", the only candidate") != std::string::npos, true)
      << CpuGemvChoices(*no_prefetch.device)[0];
  EXPECT_FALSE(CpuLaunchGemvVariants(*no_prefetch.elf)[1].prefetch);

  Fixture untuned = Load(TwoGemvs(), /*validate=*/false);
  EXPECT_TRUE(CpuGemvChoices(*untuned.device).empty());
  EXPECT_EQ(CpuGemvTuneSeconds(*untuned.device), 0.0);
  EXPECT_EQ(untuned.device->description().find("GEMV variants"), std::string::npos);
}

// The launch runs what was measured fastest: a fake clock that makes the default
// (this CPU's prefetch setting) passes three times slower than the other's makes the
// device run the other.
TEST(CpuDevice, GemvTuneRunsTheMeasuredFastestVariant) {
  if (cpu::GemvCandidates(formats::WeightFormat::kBf16Packed, {}).size() < 2) GTEST_SKIP() << "no vdpbf16ps here";
  elf::Program p = TwoGemvs();
  p.mutable_steps(0)->mutable_group()->mutable_launches()->DeleteSubrange(0, 1);  // the packed GEMV alone
  const bool slow = kernels::GemvVariants().prefetch;  // the default's
  int64_t now = 0;
  CpuDeviceOptions cpu;
  cpu.gemv_tune = true;
  cpu.gemv_tune_clock = [&now] { return now; };
  cpu.gemv_tune_pass_done = [&now, slow](int64_t, int64_t, const kernels::GemvVariants& v) {
    now += v.prefetch == slow ? 3000 : 1000;
  };
  Fixture f = Load(p, /*validate=*/false, cpu);
  ASSERT_TRUE(f.elf);
  ASSERT_EQ(CpuLaunchGemvVariants(*f.elf).size(), 1u);
  EXPECT_EQ(CpuLaunchGemvVariants(*f.elf)[0].prefetch, !slow);
  const std::string fast_name = slow ? "dot" : "dot+prefetch", slow_name = slow ? "dot+prefetch" : "dot";
  EXPECT_EQ(CpuGemvChoices(*f.device)[0], "packed_panel_v1 8x64: " + fast_name + ", measured 0.001 ms vs " + slow_name +
                                              " 0.003 ms (default " + slow_name + ")");
}

// A launch with several weights (rms_gemv3: q 16x64, k and v 8x64) runs the candidate
// its weights take least time with together, which need not be its largest shape's:
// 16x64 alone is faster without prefetch (1.0 against 1.2), but k and v, 2 of the 3
// weights, are twice as fast with it (per weight 0.5 against 1.0): 2.2 against 3.0.
TEST(CpuDevice, GemvTuneGivesASeveralWeightLaunchItsLeastTotalTime) {
  if (cpu::GemvCandidates(formats::WeightFormat::kBf16Packed, {}).size() < 2) GTEST_SKIP() << "no vdpbf16ps here";
  elf::Program p;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    schema_version: 1
    model { name: "toy" rms_eps: 1e-5 }
    bos { name: "w0" shape: [16, 64] dtype: BF16 category: STATIC size_bytes: 2048 weight_tensor: "q" layout: "packed_panel_v1" }
    bos { name: "w1" shape: [8, 64] dtype: BF16 category: STATIC size_bytes: 1024 weight_tensor: "k" layout: "packed_panel_v1" }
    bos { name: "w2" shape: [8, 64] dtype: BF16 category: STATIC size_bytes: 1024 weight_tensor: "v" layout: "packed_panel_v1" }
    bos { name: "x" shape: 64 dtype: BF16 category: WRITE size_bytes: 128 }
    bos { name: "norm" shape: 64 dtype: BF16 category: STATIC size_bytes: 128 }
    bos { name: "y0" shape: 16 dtype: BF16 category: OUTPUT size_bytes: 32 }
    bos { name: "y1" shape: 8 dtype: BF16 category: OUTPUT size_bytes: 16 }
    bos { name: "y2" shape: 8 dtype: BF16 category: OUTPUT size_bytes: 16 }
    steps { group { name: "g" entry_symbol: "g"
      launches { kernel_symbol: "dk_rms_gemv3_bf16_packed"
        params { key: "rows0" value: 16 } params { key: "rows1" value: 8 } params { key: "rows2" value: 8 }
        params { key: "cols" value: 64 }
        bindings { param: "x" bo: "x" } bindings { param: "norm" bo: "norm" }
        bindings { param: "w0" bo: "w0" } bindings { param: "w1" bo: "w1" } bindings { param: "w2" bo: "w2" }
        bindings { param: "y0" bo: "y0" } bindings { param: "y1" bo: "y1" } bindings { param: "y2" bo: "y2" } } } }
  )pb", &p));
  int64_t now = 0;
  CpuDeviceOptions cpu;
  cpu.gemv_tune = true;
  cpu.gemv_tune_clock = [&now] { return now; };
  cpu.gemv_tune_pass_done = [&now](int64_t rows, int64_t, const kernels::GemvVariants& v) {
    if (rows == 16) now += v.prefetch ? 1'200'000'000 : 1'000'000'000;  // one weight of this shape
    if (rows == 8) now += v.prefetch ? 1'000'000'000 : 2'000'000'000;   // a pass over two
  };
  Fixture f = Load(p, /*validate=*/false, cpu);
  ASSERT_TRUE(f.elf);
  const std::vector<std::string> lines = CpuGemvChoices(*f.device);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("packed_panel_v1 8x64: dot+prefetch, measured", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("packed_panel_v1 16x64: dot, measured", 0), 0u) << lines[1];
  ASSERT_EQ(CpuLaunchGemvVariants(*f.elf).size(), 1u);
  EXPECT_TRUE(CpuLaunchGemvVariants(*f.elf)[0].prefetch);
}

// A second device with the same cache reads the choices without timing anything.
TEST(CpuDevice, GemvTuneCacheHitTimesNothing) {
  CpuDeviceOptions cpu;
  cpu.gemv_tune = true;
  cpu.gemv_tune_cache = TuneDir("gemv_tune_cache");
  int reads = 0;
  cpu.gemv_tune_clock = [&reads] { return int64_t{1000} * ++reads; };
  Fixture first = Load(TwoGemvs(), /*validate=*/false, cpu);
  ASSERT_TRUE(first.elf);
  if (reads == 0) GTEST_SKIP() << "one candidate per shape here: nothing to cache";
  reads = 0;
  Fixture second = Load(TwoGemvs(), /*validate=*/false, cpu);
  ASSERT_TRUE(second.elf);
  EXPECT_EQ(reads, 0);
  for (const std::string& line : CpuGemvChoices(*second.device)) {
    if (line.find(" measured ") != std::string::npos) {
      EXPECT_NE(line.find(", cached"), std::string::npos) << line;
    }
  }
}

}  // namespace
}  // namespace dk::runtime
