#include "runtime/cpu/cpu_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <iterator>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fused.h"
#include "kernels/gemv/gemv_ksplit.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/gemv/quantize.h"
#include "kernels/norm/rmsnorm.h"
#include "registry/registry.h"
#include "kernels/rope/rope.h"
#include "util/aligned_buffer.h"
#include "util/bf16.h"
#include "util/status.h"

namespace dk::runtime {
namespace {

using elf::BoCategory;

const char* CategoryName(BoCategory c) {
  switch (c) {
    case elf::WRITE: return "WRITE";
    case elf::STATIC: return "STATIC";
    case elf::INTERMEDIATE: return "INTERMEDIATE";
    case elf::OUTPUT: return "OUTPUT";
    default: return "UNSPECIFIED";
  }
}

// Shared between a device and its BOs: the first protocol violation.
struct Validator {
  bool enabled = false;
  std::mutex mu;
  absl::Status first = absl::OkStatus();
  absl::Status Violation(std::string message) {
    std::lock_guard<std::mutex> lock(mu);
    absl::Status s = absl::FailedPreconditionError(
        absl::StrCat("BO protocol violation: ", message));
    if (first.ok()) first = s;
    return s;
  }
};

// Large BOs (weights) go on huge pages; small ones on ordinary pages.
// How long the waiting host (for a run to finish) and the idle device thread (for
// the next run) spin before they block. Spinning hands over in well under a
// microsecond, blocking costs a futex wake-up (~10 us here) per run, but a
// spinning thread must not take a core the kernels need: they spin only when the
// device's pool leaves a hardware thread free (measured on 2 cores: with a
// 2-thread pool a spinning host made smollm2_135m 14.2 vs 8.6 ms/token; with a
// 1-thread pool spinning was 9.6 vs 11.1). DK_HOST_SPIN overrides the count.
int SpinIterations(const ThreadPool& pool) {
  if (const char* e = std::getenv("DK_HOST_SPIN")) return std::atoi(e);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 && static_cast<unsigned>(pool.num_threads()) < hw ? 20000 : 0;
}

// Whether launch groups run on a device-side thread that the host hands each run
// to and waits for (DK_CPU_DEVICE_THREAD=1, XRT's shape), or inline on the host
// thread inside Start (the default): the decoder waits for every run right after
// starting it, so the thread only adds two hand-offs (a futex wake each) per run.
bool DeviceThread() {
  const char* e = std::getenv("DK_CPU_DEVICE_THREAD");
  return e != nullptr && std::atoi(e) != 0;
}

constexpr size_t kHugePageMin = size_t{4} << 20;

PageMode ModeFor(size_t bytes) { return bytes >= kHugePageMin ? PageMode::kHugePages : PageMode::kDefault; }

// Where the device sides of STATIC BOs under kHugePageMin go: huge-page slabs, each BO
// right after the one allocated before it. On their own such BOs would sit on 4 KiB
// pages (a huge page each would waste most of it): a small model's weights (SmolLM2's
// are 0.1-1.4 MB a matrix) would then cost a TLB miss every 4 KiB of the stream. On
// them SmolLM2's decode_x12 took 1.16-1.17x its paired floor, here 1.09-1.12x
// (decode_bench --paired_floor, 2 threads, slow bandwidth mode; tools/peer/README.md).
// Slabs are reserved, not touched: only what BOs use becomes resident. Space is not reused
// (STATIC BOs are allocated once per load). Shared by the device and its BOs, so a BO
// may outlive the device. Thread-safety: Allocate from the device's host thread only.
class StaticArena {
 public:
  // `bytes` bytes, 64-byte aligned; nullptr when out of memory.
  uint8_t* Allocate(size_t bytes) {
    bytes = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    if (slabs_.empty() || slabs_.back().size() - used_ < bytes) {
      AlignedBuffer<uint8_t> slab(std::max(kSlabBytes, bytes), PageMode::kHugePages);
      if (slab.empty()) return nullptr;
      slabs_.push_back(std::move(slab));
      used_ = 0;
    }
    uint8_t* p = slabs_.back().data() + used_;
    used_ += bytes;
    return p;
  }

 private:
  static constexpr size_t kSlabBytes = size_t{64} << 20;
  std::vector<AlignedBuffer<uint8_t>> slabs_;
  size_t used_ = 0;  // bytes of the last slab handed out
};

class CpuBo final : public BufferObject {
 public:
  // The device side comes from `arena` for a STATIC BO under kHugePageMin.
  CpuBo(std::string name, size_t bytes, BoCategory category, std::shared_ptr<Validator> v,
        const std::shared_ptr<StaticArena>& arena)
      : name_(std::move(name)), size_(bytes), category_(category), v_(std::move(v)) {
    if (category == elf::STATIC && bytes < kHugePageMin) {
      arena_ = arena;
      device_ = arena_->Allocate(bytes);
    } else {
      own_device_ = AlignedBuffer<uint8_t>(bytes, ModeFor(bytes));
      device_ = own_device_.size() == bytes ? own_device_.data() : nullptr;
    }
  }

  bool ok() const { return device_ != nullptr; }
  const std::string& name() const override { return name_; }
  size_t size() const override { return size_; }
  BoCategory category() const { return category_; }
  uint8_t* device() { return device_; }
  const uint8_t* device() const { return device_; }

  absl::Status Write(const void* src, size_t bytes, size_t offset) override {
    if (offset > size_ || bytes > size_ - offset) return Range("Write", bytes, offset);
    if (v_->enabled) {
      if (category_ == elf::INTERMEDIATE) {
        return v_->Violation(absl::StrCat("host wrote INTERMEDIATE BO '", name_,
                                          "' (it must stay on the device)"));
      }
      if (category_ == elf::STATIC && used_) {
        return v_->Violation(absl::StrCat("host rewrote STATIC BO '", name_,
                                          "' after a launch used it"));
      }
    }
    if (!EnsureHost()) return NoMemory();
    std::memcpy(host_.data() + offset, src, bytes);
    ++host_version_;
    return absl::OkStatus();
  }

  absl::Status Read(void* dst, size_t bytes, size_t offset) override {
    if (offset > size_ || bytes > size_ - offset) return Range("Read", bytes, offset);
    if (v_->enabled) {
      if (category_ == elf::INTERMEDIATE) {
        return v_->Violation(absl::StrCat("host read INTERMEDIATE BO '", name_, "'"));
      }
      if (device_version_ != fetched_version_) {
        return v_->Violation(absl::StrCat("host read BO '", name_,
                                          "' back without syncing it from the device after "
                                          "a launch wrote it"));
      }
    }
    if (!EnsureHost()) return NoMemory();
    std::memcpy(dst, host_.data() + offset, bytes);
    return absl::OkStatus();
  }

  absl::Status SyncToDevice() override {
    if (v_->enabled && category_ == elf::INTERMEDIATE) {
      return v_->Violation(absl::StrCat("host synced INTERMEDIATE BO '", name_, "' to the device"));
    }
    if (!EnsureHost()) return NoMemory();
    std::memcpy(device_, host_.data(), size_);
    synced_version_ = host_version_;
    device_valid_ = true;
    // A STATIC BO is written once: drop its host side (weights would otherwise
    // sit in memory twice); it comes back zeroed if the host touches it again.
    if (category_ == elf::STATIC) host_ = AlignedBuffer<uint8_t>();
    return absl::OkStatus();
  }

  absl::Status SyncFromDevice() override {
    if (v_->enabled && category_ == elf::INTERMEDIATE) {
      return v_->Violation(absl::StrCat("host synced INTERMEDIATE BO '", name_, "' from the device"));
    }
    if (!EnsureHost()) return NoMemory();
    std::memcpy(host_.data(), device_, size_);
    fetched_version_ = device_version_;
    return absl::OkStatus();
  }

  // Called on the device thread before / after a launch.
  absl::Status CheckReadByLaunch(const std::string& where) {
    used_ = true;
    if (!v_->enabled) return absl::OkStatus();
    if (host_version_ != synced_version_) {
      return v_->Violation(absl::StrCat(where, ": reads ", CategoryName(category_), " BO '", name_,
                                        "' that the host wrote but never synced to the device"));
    }
    if (!device_valid_) {
      return v_->Violation(absl::StrCat(
          where, ": reads ", CategoryName(category_), " BO '", name_,
          category_ == elf::INTERMEDIATE ? "' before any launch wrote it"
                                         : "' that was never written or synced"));
    }
    return absl::OkStatus();
  }
  void MarkWrittenByLaunch() {
    ++device_version_;
    device_valid_ = true;
  }

 private:
  // The host side is allocated on first use.
  bool EnsureHost() {
    if (host_.size() != size_) {
      host_ = AlignedBuffer<uint8_t>(size_, ModeFor(size_));
      host_.Zero();
    }
    return host_.size() == size_;
  }
  absl::Status NoMemory() const {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate the host side of BO '", name_, "'"));
  }
  absl::Status Range(const char* op, size_t bytes, size_t offset) const {
    return absl::OutOfRangeError(absl::StrCat(op, " of ", bytes, " bytes at offset ", offset,
                                              " is outside BO '", name_, "' (", size_, " bytes)"));
  }

  const std::string name_;
  const size_t size_;
  const BoCategory category_;
  AlignedBuffer<uint8_t> host_;
  uint8_t* device_ = nullptr;           // in own_device_ or in arena_
  AlignedBuffer<uint8_t> own_device_;
  std::shared_ptr<StaticArena> arena_;  // keeps device_ valid
  std::shared_ptr<Validator> v_;
  uint64_t host_version_ = 0, synced_version_ = 0;
  uint64_t device_version_ = 0, fetched_version_ = 0;
  bool device_valid_ = false;
  bool used_ = false;
};

// ---------------------------------------------------------------- kernels

// One resolved launch: kernel function, BOs by role, integer parameters.
struct LaunchOp {
  void (*fn)(const LaunchOp&, ThreadPool*) = nullptr;
  CpuBo* bo[8] = {};  // inputs, then outputs, in the registry's order
  int64_t p[4] = {};  // the registry's int_params, in order
  float eps = 0;
  bool packed = false, x12 = false, x_f32 = false, y_f32 = false;
  bool quantized = false;  // GEMV weight in GGUF blocks of `quant_format`
  kernels::QuantFormat quant_format = kernels::QuantFormat::kQ8_0;
  kernels::WeightFormat weight_format = kernels::WeightFormat::kBf16RowMajor;  // the fused kernels
  std::string where;  // "ELF 'x', group 'g', launch i (symbol)"
  int time_slot = -1;        // DK_CPU_KERNEL_TIMES: its symbol's entry
  int64_t weight_bytes = 0;  // DK_CPU_KERNEL_TIMES: the weight bytes it streams
  std::vector<CpuBo*> inputs, outputs;
  // How it runs inside a team run (ThreadPool::RunTeam, a group's launches as one
  // pool job): its kernel's ParallelRanges shared by the members, or on one member
  // (a kernel without the pool); kNone: the group runs launch by launch.
  enum class Team { kNone, kRanges, kSingle } team = Team::kNone;
};

template <typename T>
T* As(CpuBo* bo) {
  return reinterpret_cast<T*>(bo->device());
}

// Calls call(x, y) with the GEMV's x and y BOs as the types they hold (f32 or bf16).
template <typename Fn>
void WithXY(const LaunchOp& op, const Fn& call) {
  if (op.x_f32) {
    op.y_f32 ? call(As<float>(op.bo[1]), As<float>(op.bo[2])) : call(As<float>(op.bo[1]), As<bf16>(op.bo[2]));
  } else {
    op.y_f32 ? call(As<bf16>(op.bo[1]), As<float>(op.bo[2])) : call(As<bf16>(op.bo[1]), As<bf16>(op.bo[2]));
  }
}

void RunGemv(const LaunchOp& op, ThreadPool* pool) {
  const bf16* w = As<bf16>(op.bo[0]);
  const size_t rows = op.p[0], cols = op.p[1];
  WithXY(op, [&](const auto* x, auto* y) {
    if (op.quantized) {
      // int8 activations (vpdpbusd where present): the faster strategy measured
      // for every format (kernels/gemv/gemv_quant.h).
      kernels::QuantGemv(op.quant_format, kernels::QuantActivations::kInt8, As<uint8_t>(op.bo[0]), rows,
                         cols, x, y, pool);
    } else if (op.x12) {
      if constexpr (std::is_same_v<std::decay_t<decltype(*x)>, bf16>) {
        kernels::X12Gemv(As<uint8_t>(op.bo[0]), rows, cols, x, y, pool);
      }  // f32 x is refused at load (CheckSizes)
    } else if (op.packed) {
      kernels::PackedGemv(w, rows, cols, x, y, pool);
    } else {
      kernels::Gemv(w, rows, cols, x, y, pool);
    }
  });
}
// npu2's K-split GEMV: K in chunks of p[2] columns, the partials added in order.
void RunGemvKSplit(const LaunchOp& op, ThreadPool* pool) {
  WithXY(op, [&](const auto* x, auto* y) {
    kernels::KSplitGemv(As<bf16>(op.bo[0]), op.packed, op.p[0], op.p[1], op.p[2], x, y, pool);
  });
}
void RunRmsNorm(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNorm(As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], op.eps, As<bf16>(op.bo[2]));
}
void RunRope(const LaunchOp& op, ThreadPool*) {
  bf16* y = As<bf16>(op.bo[3]);
  const size_t n = op.p[0] * op.p[1];
  if (op.bo[3] != op.bo[0]) std::memcpy(y, As<bf16>(op.bo[0]), n * sizeof(bf16));
  kernels::RopeHalfSplit(y, op.p[0], op.p[1], As<bf16>(op.bo[1]), As<bf16>(op.bo[2]));
}
void RunSiluMul(const LaunchOp& op, ThreadPool*) {
  kernels::SiluMul(As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], As<bf16>(op.bo[2]));
}
void RunAdd(const LaunchOp& op, ThreadPool*) {
  kernels::Add(As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], As<bf16>(op.bo[2]));
}
void RunRmsNormPlusOne(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNormPlusOne(As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], op.eps, As<bf16>(op.bo[2]));
}
void RunHeadRmsNormPlusOne(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNormHeads(As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], op.p[1], op.eps, As<bf16>(op.bo[2]),
                        /*plus_one=*/true);
}
void RunGeluTanhMul(const LaunchOp& op, ThreadPool*) {
  kernels::GeluTanhMul(As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], As<bf16>(op.bo[2]));
}
void RunHeadRmsNorm(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNormHeads(As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], op.p[1], op.eps, As<bf16>(op.bo[2]));
}
void RunBiasAdd(const LaunchOp& op, ThreadPool*) {
  kernels::AddBias(As<float>(op.bo[0]), As<bf16>(op.bo[1]), op.p[0], As<bf16>(op.bo[2]));
}

// The fused kernels (kernels/gemv/gemv_fused.h); bo[] in the registry's order.
void RunRmsGemv(const LaunchOp& op, ThreadPool* pool) {
  const kernels::FusedWeight w{op.bo[2]->device(), static_cast<size_t>(op.p[0])};
  void* y = op.bo[3]->device();
  kernels::RmsNormGemv(op.weight_format, As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.eps, op.p[1], &w, 1, &y,
                       op.y_f32, pool);
}
void RunRmsGemv3(const LaunchOp& op, ThreadPool* pool) {
  kernels::FusedWeight w[3];
  void* y[3];
  for (int i = 0; i < 3; ++i) {
    w[i] = {op.bo[2 + i]->device(), static_cast<size_t>(op.p[i])};
    y[i] = op.bo[5 + i]->device();
  }
  kernels::RmsNormGemv(op.weight_format, As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.eps, op.p[3], w, 3, y,
                       op.y_f32, pool);
}
void RunRmsGemvSiluMul(const LaunchOp& op, ThreadPool* pool) {
  const size_t rows = op.p[0];
  kernels::RmsNormGemvSiluMul(op.weight_format, As<bf16>(op.bo[0]), As<bf16>(op.bo[1]), op.eps, op.p[1],
                              {op.bo[2]->device(), rows}, {op.bo[3]->device(), rows}, As<bf16>(op.bo[4]), pool);
}
void RunGemvAdd(const LaunchOp& op, ThreadPool* pool) {
  kernels::GemvAdd(op.weight_format, As<bf16>(op.bo[0]), op.p[1], {op.bo[1]->device(), static_cast<size_t>(op.p[0])},
                   As<bf16>(op.bo[2]), As<bf16>(op.bo[3]), pool);
}

// The CPU implementation of each device kernel id. Which parameters a kernel
// binds (inputs first, in the order of LaunchOp::bo) comes from the registry.
using KernelFn = void (*)(const LaunchOp&, ThreadPool*);
const std::map<std::string, KernelFn>& Kernels() {
  static const auto* kernels = new std::map<std::string, KernelFn>{
      {"gemv", &RunGemv},     {"gemv_ksplit", &RunGemvKSplit}, {"rmsnorm", &RunRmsNorm}, {"rope", &RunRope},
      {"silu_mul", &RunSiluMul}, {"add", &RunAdd}, {"bias_add", &RunBiasAdd},
      {"head_rmsnorm", &RunHeadRmsNorm}, {"rmsnorm_plus1", &RunRmsNormPlusOne},
      {"head_rmsnorm_plus1", &RunHeadRmsNormPlusOne}, {"gelu_tanh_mul", &RunGeluTanhMul},
      {"rms_gemv", &RunRmsGemv}, {"rms_gemv3", &RunRmsGemv3}, {"rms_gemv_silu_mul", &RunRmsGemvSiluMul},
      {"gemv_add", &RunGemvAdd},
  };
  return *kernels;
}

// ---------------------------------------------------------------- device

class CpuElf final : public LoadedElf {
 public:
  std::string name_;
  std::vector<std::vector<LaunchOp>> groups_;  // launches per group
  std::vector<bool> team_ok_;                   // per group: runs as one team run
  std::unique_ptr<internal::Team> team_;        // the team runs' state (the groups' most launches)
};

// How `op` (its weight format set) takes part in a team run. The fused and plain
// GEMVs on bf16 weights make one ParallelRanges call and write only their rows'
// outputs and the calling thread's scratch outside it; the kernels that ignore the
// pool run whole on one member. Quantized and K-split GEMVs keep their own jobs.
LaunchOp::Team TeamKind(const std::string& id, const LaunchOp& op) {
  static const auto* single = new std::set<std::string>{
      "rmsnorm", "rope", "silu_mul", "add", "bias_add", "head_rmsnorm", "rmsnorm_plus1", "head_rmsnorm_plus1",
      "gelu_tanh_mul"};
  if (single->count(id)) return LaunchOp::Team::kSingle;
  if (id == "gemv") return op.quantized ? LaunchOp::Team::kNone : LaunchOp::Team::kRanges;
  if (id == "rms_gemv" || id == "rms_gemv3" || id == "rms_gemv_silu_mul" || id == "gemv_add") {
    const auto f = op.weight_format;
    return f == kernels::WeightFormat::kBf16RowMajor || f == kernels::WeightFormat::kBf16Packed ||
                   f == kernels::WeightFormat::kBf16X12
               ? LaunchOp::Team::kRanges
               : LaunchOp::Team::kNone;
  }
  return LaunchOp::Team::kNone;
}

// Whether a group runs as one team run: every launch can, at least one shares its
// ranges, and none of those writes a BO it reads (a member that comes late reads
// its inputs while the others already write its outputs).
bool TeamOk(const std::vector<LaunchOp>& ops) {
  bool ranges = false;
  for (const LaunchOp& op : ops) {
    if (op.team == LaunchOp::Team::kNone) return false;
    if (op.team != LaunchOp::Team::kRanges) continue;
    ranges = true;
    for (const CpuBo* out : op.outputs) {
      if (std::find(op.inputs.begin(), op.inputs.end(), out) != op.inputs.end()) return false;
    }
  }
  return ranges;
}

class CpuDevice;

class CpuRun final : public Run {
 public:
  CpuRun(CpuDevice* device) : device_(device) {}
  absl::Status Wait() override;

 private:
  CpuDevice* device_;
};

class CpuDevice final : public Device {
 public:
  CpuDevice(const DeviceOptions& options, ThreadPool* pool)
      : validator_(std::make_shared<Validator>()), pool_(pool ? pool : &SharedThreadPool()) {
    validator_->enabled = options.validate;
    spin_ = SpinIterations(*pool_);
    threaded_ = DeviceThread();
    const char* team = std::getenv("DK_CPU_TEAM");
    team_runs_ = team == nullptr || std::string(team) != "0";
    const char* times = std::getenv("DK_CPU_KERNEL_TIMES");
    time_kernels_ = times != nullptr && std::string(times) == "1";
    if (threaded_) thread_ = std::thread([this] { DeviceLoop(); });
  }
  ~CpuDevice() override {
    if (!threaded_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::string description() const override {
    return absl::StrCat("cpu (", kernels::GemvTargetName(), ", ", pool_->num_threads(),
                        " threads", validator_->enabled ? ", validating" : "", ")");
  }

  absl::StatusOr<std::unique_ptr<BufferObject>> Allocate(const std::string& name, size_t bytes,
                                                         BoCategory category) override {
    auto bo = std::make_unique<CpuBo>(name, bytes, category, validator_, arena_);
    if (!bo->ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes for BO '", name, "'"));
    }
    return bo;
  }

  absl::StatusOr<std::unique_ptr<LoadedElf>> Load(const elf::Program& program,
                                                  const std::string& elf_name,
                                                  std::vector<BufferObject*> bos) override {
    if (static_cast<int>(bos.size()) != program.bos_size()) {
      return absl::InvalidArgumentError(absl::StrCat("Load: ", bos.size(), " BOs bound, program has ",
                                                     program.bos_size()));
    }
    auto elf = std::make_unique<CpuElf>();
    elf->name_ = elf_name;
    std::map<std::string, int> bo_index;
    for (int i = 0; i < program.bos_size(); ++i) bo_index[program.bos(i).name()] = i;
    for (int s = 0; s < program.steps_size(); ++s) {
      if (!program.steps(s).has_group()) continue;
      const elf::LaunchGroup& g = program.steps(s).group();
      std::vector<LaunchOp> ops;
      for (int j = 0; j < g.launches_size(); ++j) {
        const elf::Launch& l = g.launches(j);
        LaunchOp op;
        op.where = absl::StrCat("ELF '", elf_name, "', group '", g.name(), "', launch ", j, " (",
                                l.kernel_symbol(), ")");
        const registry::Kernel* kernel = nullptr;
        auto variant = registry::FindSymbol(l.kernel_symbol(), &kernel);
        if (!variant.ok()) return absl::NotFoundError(absl::StrCat(op.where, ": ", variant.status().message()));
        auto fn_it = Kernels().find(kernel->id());
        if (fn_it == Kernels().end() || kernel->host_only()) {
          return absl::UnimplementedError(
              absl::StrCat(op.where, ": the cpu device has no kernel '", kernel->id(), "'"));
        }
        op.fn = fn_it->second;
        std::map<std::string, std::string> bound;
        for (const auto& b : l.bindings()) bound[b.param()] = b.bo();
        int role = 0;
        auto bind = [&](const std::string& param, std::vector<CpuBo*>* list) -> absl::Status {
          auto it = bound.find(param);
          if (it == bound.end()) {
            return absl::InvalidArgumentError(absl::StrCat(op.where, ": parameter '", param, "' is not bound"));
          }
          if (role == static_cast<int>(std::size(op.bo))) {
            return absl::UnimplementedError(absl::StrCat(op.where, ": the cpu device binds at most ",
                                                         std::size(op.bo), " BOs per launch"));
          }
          const int idx = bo_index.at(it->second);
          op.bo[role++] = static_cast<CpuBo*>(bos[idx]);
          list->push_back(op.bo[role - 1]);
          return absl::OkStatus();
        };
        for (const auto& p : kernel->inputs()) {
          if (auto st = bind(p, &op.inputs); !st.ok()) return st;
        }
        for (const auto& p : kernel->outputs()) {
          if (auto st = bind(p, &op.outputs); !st.ok()) return st;
        }
        for (int k = 0; k < kernel->int_params_size() && k < static_cast<int>(std::size(op.p)); ++k) {
          auto it = l.params().find(kernel->int_params(k));
          if (it == l.params().end() || it->second <= 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                op.where, ": integer parameter '", kernel->int_params(k), "' is missing or not positive"));
          }
          op.p[k] = it->second;
        }
        op.eps = program.model().rms_eps();
        if (time_kernels_) {
          for (const auto& [param, name] : bound) {
            if (registry::IsWeightParam(*kernel, param)) op.weight_bytes += elf::X12StreamedBytes(program.bos(bo_index.at(name)));
          }
          auto [slot, added] = time_slots_.emplace(l.kernel_symbol(), static_cast<int>(times_.size()));
          if (added) times_.push_back({l.kernel_symbol()});
          op.time_slot = slot->second;
        }
        if (auto st = CheckSizes(kernel->id(), **variant, program, bound, bo_index, &op); !st.ok()) {
          return st;
        }
        op.team = TeamKind(kernel->id(), op);
        ops.push_back(std::move(op));
      }
      elf->team_ok_.push_back(team_runs_ && TeamOk(ops));
      elf->groups_.push_back(std::move(ops));
    }
    size_t most = 1;
    for (const auto& g : elf->groups_) most = std::max(most, g.size());
    elf->team_ = std::make_unique<internal::Team>(most);
    return elf;
  }

  const std::vector<KernelTime>& kernel_times() const { return times_; }
  void ResetKernelTimes() {
    for (KernelTime& t : times_) t = {t.symbol};
  }

  absl::StatusOr<std::unique_ptr<Run>> Start(LoadedElf& elf, int group) override {
    auto& cpu = static_cast<CpuElf&>(elf);
    if (group < 0 || group >= static_cast<int>(cpu.groups_.size())) {
      return absl::OutOfRangeError(absl::StrCat("no launch group ", group, " in ELF '", cpu.name_, "'"));
    }
    if (!threaded_) {
      // The host waits for every run right after starting it: running the group
      // here, on the host thread, saves two thread hand-offs per run.
      run_status_ = Execute(cpu.groups_[group], cpu.team_ok_[group] ? cpu.team_.get() : nullptr);
      return std::unique_ptr<Run>(new CpuRun(this));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &cpu.groups_[group];
      job_team_ = cpu.team_ok_[group] ? cpu.team_.get() : nullptr;
      done_ = false;
      ++posted_;
      posted_flag_.store(posted_, std::memory_order_release);
    }
    cv_.notify_all();
    return std::unique_ptr<Run>(new CpuRun(this));
  }

  absl::Status WaitForRun() {
    if (!threaded_) return run_status_;
    // Brief spin (runs are often microseconds), then block.
    for (int i = 0; i < spin_ && !done_flag_.load(std::memory_order_acquire); ++i) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    done_flag_.store(false, std::memory_order_relaxed);
    return run_status_;
  }

  absl::StatusOr<size_t> LayoutBytes(const std::string& layout, elf::BlockFormat format, size_t rows,
                                     size_t cols) const override {
    if (format != elf::BLOCK_FORMAT_NONE) {
      DK_ASSIGN_OR_RETURN(const kernels::QuantFormat q, QuantFormatOf(layout, format, cols));
      return rows * kernels::QuantRowBytes(q, cols);
    }
    if (layout.empty() || layout == registry::kRowMajor) return rows * cols * sizeof(bf16);
    if (layout == registry::kPackedPanelV1) return kernels::PackedGemvElements(rows, cols) * sizeof(bf16);
    if (layout == registry::kPackedPanelX12V1) return kernels::X12GemvBytes(rows, cols);
    return absl::InvalidArgumentError(absl::StrCat("the cpu device has no weight layout '", layout, "'"));
  }
  absl::Status PackWeight(const std::string& layout, elf::BlockFormat format, const void* src, size_t rows,
                          size_t cols, void* out) const override {
    if (format != elf::BLOCK_FORMAT_NONE) {
      DK_ASSIGN_OR_RETURN(const kernels::QuantFormat q, QuantFormatOf(layout, format, cols));
      kernels::QuantizeWeights(q, static_cast<const bf16*>(src), rows, cols, static_cast<uint8_t*>(out));
      return absl::OkStatus();
    }
    if (layout.empty() || layout == registry::kRowMajor) {
      std::memcpy(out, src, rows * cols * sizeof(bf16));
      return absl::OkStatus();
    }
    if (layout == registry::kPackedPanelV1) {
      kernels::PackGemvWeights(static_cast<const bf16*>(src), rows, cols, static_cast<bf16*>(out));
      return absl::OkStatus();
    }
    if (layout == registry::kPackedPanelX12V1) {
      kernels::PackX12GemvWeights(static_cast<const bf16*>(src), rows, cols, static_cast<uint8_t*>(out), pool_);
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat("the cpu device has no weight layout '", layout, "'"));
  }

 private:
  // The kernels' format for a weight in block format `format` (row-major blocks only).
  static absl::StatusOr<kernels::QuantFormat> QuantFormatOf(const std::string& layout, elf::BlockFormat format,
                                                            size_t cols) {
    if (!(layout.empty() || layout == registry::kRowMajor) || cols % 32 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("the cpu device reads ", elf::BlockFormatName(format),
                                                     " blocks only row_major with cols % 32 == 0 (layout ",
                                                     layout, ", cols ", cols, ")"));
    }
    switch (format) {
      case elf::Q8_0: return kernels::QuantFormat::kQ8_0;
      case elf::Q4_0: return kernels::QuantFormat::kQ4_0;
      case elf::Q4_1: return kernels::QuantFormat::kQ4_1;
      default: break;
    }
    return absl::InvalidArgumentError(absl::StrCat("the cpu device has no block format ", static_cast<int>(format)));
  }

  // Sizes of the bound BOs against the launch's parameters.
  absl::Status CheckSizes(const std::string& kernel_id, const registry::KernelVariant& variant,
                          const elf::Program& program, const std::map<std::string, std::string>& bound,
                          const std::map<std::string, int>& bo_index, LaunchOp* op) {
    // Gemma's norms bind the sizes Llama's do.
    const std::string id = kernel_id == "rmsnorm_plus1"        ? "rmsnorm"
                           : kernel_id == "head_rmsnorm_plus1" ? "head_rmsnorm"
                                                               : kernel_id;
    auto bo = [&](const char* param) -> const elf::BufferObject& {
      return program.bos(bo_index.at(bound.at(param)));
    };
    auto expect = [&](const char* param, int64_t elements, bool allow_f32) -> absl::Status {
      const elf::BufferObject& b = bo(param);
      const bool f32 = b.dtype() == elf::F32;
      if (b.dtype() != elf::BF16 && !(allow_f32 && f32)) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": BO '", b.name(), "' has dtype ",
                                                       elf::DType_Name(b.dtype()), ", expected BF16",
                                                       allow_f32 ? " or F32" : ""));
      }
      const int64_t want = elements * (f32 ? 4 : 2);
      if (b.size_bytes() < want) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": BO '", b.name(), "' holds ",
                                                       b.size_bytes(), " bytes, the launch needs ", want));
      }
      return absl::OkStatus();
    };
    // A GEMV weight [rows, cols] in the variant's layout and block format.
    auto weight = [&](const char* param, int64_t rows, int64_t cols) -> absl::Status {
      if (variant.k() != 0 && variant.k() != cols) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": symbol is specialized for K=",
                                                       variant.k(), " but cols=", cols));
      }
      const elf::BufferObject& w = bo(param);
      op->packed = variant.layout() == registry::kPackedPanelV1;
      op->x12 = variant.layout() == registry::kPackedPanelX12V1;
      const std::string w_layout = w.layout().empty() ? std::string(registry::kRowMajor) : w.layout();
      if (w_layout != variant.layout()) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": weight BO '", w.name(), "' has layout ",
                                                       w_layout, " but the kernel reads ", variant.layout()));
      }
      if (elf::BlockFormatName(w.block_format()) != variant.block_format()) {
        return absl::InvalidArgumentError(absl::StrCat(
            op->where, ": weight BO '", w.name(), "' has block format '", elf::BlockFormatName(w.block_format()),
            "' but the kernel reads '", variant.block_format(), "'"));
      }
      op->weight_format = op->packed ? kernels::WeightFormat::kBf16Packed
                          : op->x12  ? kernels::WeightFormat::kBf16X12
                                     : kernels::WeightFormat::kBf16RowMajor;
      if (w.block_format() != elf::BLOCK_FORMAT_NONE) {
        auto q = QuantFormatOf(w_layout, w.block_format(), cols);
        if (!q.ok()) return absl::InvalidArgumentError(absl::StrCat(op->where, ": ", q.status().message()));
        op->quantized = true;
        op->quant_format = *q;
        op->weight_format = *q == kernels::QuantFormat::kQ8_0   ? kernels::WeightFormat::kQ8_0
                            : *q == kernels::QuantFormat::kQ4_0 ? kernels::WeightFormat::kQ4_0
                                                                : kernels::WeightFormat::kQ4_1;
      }
      auto need = LayoutBytes(w_layout, w.block_format(), rows, cols);
      if (!need.ok()) return need.status();
      if (w.dtype() != elf::BF16 || w.size_bytes() < static_cast<int64_t>(*need)) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": weight BO '", w.name(),
                                                       "' must be BF16 of at least ", *need, " bytes"));
      }
      return absl::OkStatus();
    };
    absl::Status s;
    if (id == "gemv" || id == "gemv_ksplit") {
      const int64_t rows = op->p[0], cols = op->p[1];
      if (id == "gemv_ksplit" && (op->p[2] <= 0 || !kernels::KSplitGemvShapeOk(cols, op->p[2]))) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": K-split GEMV needs cols (", cols,
                                                       ") a multiple of k_chunk (", op->p[2],
                                                       "), itself a multiple of 32"));
      }
      if (!(s = weight("w", rows, cols)).ok()) return s;
      if (!(s = expect("x", cols, true)).ok() || !(s = expect("y", rows, true)).ok()) return s;
      op->x_f32 = bo("x").dtype() == elf::F32;
      op->y_f32 = bo("y").dtype() == elf::F32;
      if (op->x12 && op->x_f32) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": the ", registry::kPackedPanelX12V1,
                                                       " GEMV reads bf16 x, BO '", bo("x").name(), "' is F32"));
      }
      return absl::OkStatus();
    }
    // The fused kernels: bf16 x (and norm, residual) of cols (rows) elements.
    if (id == "rms_gemv" || id == "gemv_add" || id == "rms_gemv_silu_mul") {
      const int64_t rows = op->p[0], cols = op->p[1];
      const bool silu = id == "rms_gemv_silu_mul";
      if (!(s = weight(silu ? "w_gate" : "w", rows, cols)).ok()) return s;
      if (silu && !(s = weight("w_up", rows, cols)).ok()) return s;
      if (!(s = expect("x", cols, false)).ok()) return s;
      if (id == "gemv_add") {
        if (!(s = expect("residual", rows, false)).ok()) return s;
      } else if (!(s = expect("norm", cols, false)).ok()) {
        return s;
      }
      if (!(s = expect("y", rows, id == "rms_gemv")).ok()) return s;
      op->y_f32 = bo("y").dtype() == elf::F32;
      return absl::OkStatus();
    }
    if (id == "rms_gemv3") {
      const int64_t cols = op->p[3];
      if (!(s = expect("x", cols, false)).ok() || !(s = expect("norm", cols, false)).ok()) return s;
      for (int i = 0; i < 3; ++i) {
        const std::string w = absl::StrCat("w", i), y = absl::StrCat("y", i);
        if (!(s = weight(w.c_str(), op->p[i], cols)).ok() || !(s = expect(y.c_str(), op->p[i], true)).ok()) {
          return s;
        }
      }
      op->y_f32 = bo("y0").dtype() == elf::F32;
      if (bo("y1").dtype() != bo("y0").dtype() || bo("y2").dtype() != bo("y0").dtype()) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": outputs y0, y1, y2 differ in dtype"));
      }
      return absl::OkStatus();
    }
    if (id == "rmsnorm") {
      if (!(s = expect("x", op->p[0], false)).ok() || !(s = expect("w", op->p[0], false)).ok()) return s;
      return expect("y", op->p[0], false);
    }
    if (id == "rope") {
      if (op->p[1] % 2) return absl::InvalidArgumentError(absl::StrCat(op->where, ": head_dim must be even"));
      const int64_t n = op->p[0] * op->p[1];
      if (!(s = expect("x", n, false)).ok() || !(s = expect("y", n, false)).ok()) return s;
      if (!(s = expect("cos", op->p[1] / 2, false)).ok()) return s;
      return expect("sin", op->p[1] / 2, false);
    }
    if (id == "head_rmsnorm") {
      const int64_t n = op->p[0] * op->p[1];
      if (!(s = expect("x", n, false)).ok() || !(s = expect("w", op->p[1], false)).ok()) return s;
      return expect("y", n, false);
    }
    if (id == "bias_add") {
      if (bo("x").dtype() != elf::F32) {
        return absl::InvalidArgumentError(absl::StrCat(op->where, ": BO '", bo("x").name(), "' has dtype ",
                                                       elf::DType_Name(bo("x").dtype()), ", expected F32"));
      }
      if (!(s = expect("x", op->p[0], true)).ok() || !(s = expect("bias", op->p[0], false)).ok()) return s;
      return expect("y", op->p[0], false);
    }
    // silu_mul, add: every BO holds n bf16.
    for (const auto& [param, name] : bound) {
      if (!(s = expect(param.c_str(), op->p[0], false)).ok()) return s;
    }
    return absl::OkStatus();
  }

  void DeviceLoop() {
    uint64_t seen = 0;
    for (;;) {
      const std::vector<LaunchOp>* job;
      internal::Team* team;
      for (int i = 0; i < spin_ && posted_flag_.load(std::memory_order_acquire) == seen; ++i) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || posted_ != seen; });
        if (stop_) return;
        seen = posted_;
        job = job_;
        team = job_team_;
      }
      absl::Status status = Execute(*job, team);
      {
        std::lock_guard<std::mutex> lock(mu_);
        run_status_ = status;
        done_ = true;
      }
      done_flag_.store(true, std::memory_order_release);
      cv_.notify_all();
    }
  }

  // run(), timed as `op`'s call under DK_CPU_KERNEL_TIMES when `timed`.
  template <typename F>
  void Timed(const LaunchOp& op, bool timed, const F& run) {
    if (!timed || op.time_slot < 0) {
      run();
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    run();
    KernelTime& t = times_[op.time_slot];
    t.ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    ++t.calls;
    t.weight_bytes += op.weight_bytes;
  }

  // A group's launches, in order; with `team`, as one team run of the pool (see
  // ThreadPool::RunTeam): one job and one barrier per launch instead of a job per
  // launch. The validator's checks then come first, for the whole group.
  absl::Status Execute(const std::vector<LaunchOp>& ops, internal::Team* team) {
    if (team != nullptr && pool_->num_threads() > 1) {
      for (const LaunchOp& op : ops) {
        for (CpuBo* in : op.inputs) {
          if (auto s = in->CheckReadByLaunch(op.where); !s.ok()) return s;
        }
        for (CpuBo* out : op.outputs) out->MarkWrittenByLaunch();
      }
      pool_->RunTeam(*team, [&] {
        const bool timed = internal::t_team_member->slot == 0;  // one member's view of each launch
        for (const LaunchOp& op : ops) {
          Timed(op, timed, [&] {
            if (op.team == LaunchOp::Team::kSingle) {
              TeamSingle(pool_, [&] { op.fn(op, pool_); });
            } else {
              op.fn(op, pool_);
            }
          });
        }
      });
      return absl::OkStatus();
    }
    for (const LaunchOp& op : ops) {
      for (CpuBo* in : op.inputs) {
        if (auto s = in->CheckReadByLaunch(op.where); !s.ok()) return s;
      }
      Timed(op, true, [&] { op.fn(op, pool_); });
      for (CpuBo* out : op.outputs) out->MarkWrittenByLaunch();
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Validator> validator_;
  std::shared_ptr<StaticArena> arena_ = std::make_shared<StaticArena>();
  ThreadPool* pool_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool done_ = false;
  uint64_t posted_ = 0;
  const std::vector<LaunchOp>* job_ = nullptr;
  internal::Team* job_team_ = nullptr;
  absl::Status run_status_;
  std::atomic<bool> done_flag_{false};
  std::atomic<uint64_t> posted_flag_{0};  // posted_, readable without the lock
  int spin_ = 0;
  bool threaded_ = false;  // runs on thread_ (DK_CPU_DEVICE_THREAD=1), else inline in Start
  bool team_runs_ = true;  // groups as team runs where they can (DK_CPU_TEAM=0: never)
  bool time_kernels_ = false;              // DK_CPU_KERNEL_TIMES=1
  std::map<std::string, int> time_slots_;  // symbol -> times_ index
  std::vector<KernelTime> times_;
};

absl::Status CpuRun::Wait() { return device_->WaitForRun(); }

}  // namespace

const uint8_t* CpuBoDeviceBytes(const BufferObject& bo) {
  const auto* cpu = dynamic_cast<const CpuBo*>(&bo);
  return cpu != nullptr ? cpu->device() : nullptr;
}

std::vector<KernelTime> CpuKernelTimes(const Device& device) {
  const auto* cpu = dynamic_cast<const CpuDevice*>(&device);
  return cpu != nullptr ? cpu->kernel_times() : std::vector<KernelTime>{};
}

void ResetCpuKernelTimes(Device& device) {
  if (auto* cpu = dynamic_cast<CpuDevice*>(&device)) cpu->ResetKernelTimes();
}

std::unique_ptr<Device> MakeCpuDevice(const DeviceOptions& options, ThreadPool* pool) {
  return std::make_unique<CpuDevice>(options, pool);
}

}  // namespace dk::runtime
