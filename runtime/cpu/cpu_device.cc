#include "runtime/cpu/cpu_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "elf/elf.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/gemv/gemv_x12.h"
#include "registry/registry.h"
#include "runtime/cpu/cpu_bo.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/gemv_tuner.h"
#include "util/status.h"

namespace dk::runtime {
namespace {

using cpu::CpuBo;
using cpu::LaunchOp;
using cpu::TeamRole;
using elf::BoCategory;

// How long the waiting host (for a run to finish) and the idle device thread (for
// the next run) spin before they block. Spinning hands over in well under a
// microsecond, blocking costs a futex wake-up per run, but a spinning thread must
// not take a core the kernels need: by default they spin only when the device's
// pool leaves a hardware thread free (docs/cpu-backend.md has the figures).
int SpinIterations(const CpuDeviceOptions& options, const ThreadPool& pool) {
  if (options.host_spin >= 0) return options.host_spin;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 && static_cast<unsigned>(pool.num_threads()) < hw ? 20000 : 0;
}

// Whether the packed bf16 GEMVs prefetch their weights under `options`.
bool PrefetchOn(const CpuDeviceOptions& options) {
  using Prefetch = CpuDeviceOptions::Prefetch;
  return options.gemv_prefetch == Prefetch::kAuto ? kernels::GemvSoftwarePrefetchDefault()
                                                  : options.gemv_prefetch == Prefetch::kOn;
}

// The variants gemv_tune leaves to measurement (nullopt) and those the options force.
cpu::GemvVariantPolicy PolicyOf(const CpuDeviceOptions& options) {
  using Prefetch = CpuDeviceOptions::Prefetch;
  cpu::GemvVariantPolicy p;
  if (!options.gemv_bf16dot) p.bf16_dot = false;
  if (!options.gemv_vnni) p.vnni = false;
  if (options.gemv_prefetch != Prefetch::kAuto) p.prefetch = options.gemv_prefetch == Prefetch::kOn;
  return p;
}

// A GEMV weight of a launch: its shape and, for a STATIC weight (written before the
// program loads, as the decoder does), its bytes.
struct GemvWeight {
  cpu::GemvShape shape;
  const uint8_t* bytes = nullptr;
};

kernels::GemvVariants VariantsOf(const CpuDeviceOptions& options) {
  kernels::GemvVariants v;
  v.bf16_dot = options.gemv_bf16dot;
  v.vnni = options.gemv_vnni;
  v.prefetch = PrefetchOn(options);
  return v;
}

class CpuElf final : public LoadedElf {
 public:
  std::string name_;
  std::vector<const LaunchOp*> gemvs_;          // the launches with GEMV weights, in order
  std::vector<std::vector<LaunchOp>> groups_;  // launches per group
  std::vector<bool> team_ok_;                   // per group: runs as one team run
  std::unique_ptr<internal::Team> team_;        // the team runs' state (the groups' most launches)
};

// Whether a group runs as one team run: every launch can, at least one shares its
// ranges, and none of those writes a BO it reads (a member that comes late reads
// its inputs while the others already write its outputs).
bool TeamOk(const std::vector<LaunchOp>& ops) {
  bool ranges = false;
  for (const LaunchOp& op : ops) {
    if (op.team == TeamRole::kNone) return false;
    if (op.team != TeamRole::kRanges) continue;
    ranges = true;
    for (const CpuBo* out : op.outputs) {
      if (std::find(op.inputs.begin(), op.inputs.end(), out) != op.inputs.end()) return false;
    }
  }
  return ranges;
}

// Binds a launch's parameters (the registry's inputs, then outputs, in order) to its
// BOs and reads its integer parameters into `op`.
absl::Status BindLaunch(const elf::Launch& l, const registry::Kernel& kernel, const std::map<std::string, int>& bo_index,
                        const std::vector<BufferObject*>& bos, const std::map<std::string, std::string>& bound,
                        LaunchOp* op) {
  int role = 0;
  auto bind = [&](const std::string& param, std::vector<CpuBo*>* list) -> absl::Status {
    auto it = bound.find(param);
    if (it == bound.end()) {
      return absl::InvalidArgumentError(absl::StrCat(op->where, ": parameter '", param, "' is not bound"));
    }
    if (role == static_cast<int>(std::size(op->bo))) {
      return absl::UnimplementedError(
          absl::StrCat(op->where, ": the cpu device binds at most ", std::size(op->bo), " BOs per launch"));
    }
    op->bo[role] = static_cast<CpuBo*>(bos[bo_index.at(it->second)]);
    list->push_back(op->bo[role++]);
    return absl::OkStatus();
  };
  for (const auto& p : kernel.inputs()) DK_RETURN_IF_ERROR(bind(p, &op->inputs));
  for (const auto& p : kernel.outputs()) DK_RETURN_IF_ERROR(bind(p, &op->outputs));
  for (int k = 0; k < kernel.int_params_size() && k < static_cast<int>(std::size(op->p)); ++k) {
    auto it = l.params().find(kernel.int_params(k));
    if (it == l.params().end() || it->second <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(op->where, ": integer parameter '", kernel.int_params(k),
                                                     "' is missing or not positive"));
    }
    op->p[k] = it->second;
  }
  return absl::OkStatus();
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
  CpuDevice(const DeviceOptions& options, const CpuDeviceOptions& cpu, ThreadPool* pool)
      : validator_(std::make_shared<cpu::Validator>()),
        own_pool_(pool ? nullptr : std::make_unique<ThreadPool>(ThreadPoolOptions{})),
        pool_(pool ? pool : own_pool_.get()),
        scratch_(pool_->num_threads()),
        options_(cpu),
        spin_(SpinIterations(cpu, *pool_)),
        variants_(VariantsOf(cpu)) {
    validator_->enabled = options.validate;
    if (options_.device_thread) thread_ = std::thread([this] { DeviceLoop(); });
  }
  ~CpuDevice() override {
    if (!options_.device_thread) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::string description() const override {
    std::string d = absl::StrCat("cpu (", cpu::CpuName(), "; ", kernels::GemvTargetName(variants_), ", ",
                                 pool_->num_threads(), " threads", validator_->enabled ? ", validating" : "", ")");
    if (!choices_.empty()) {
      absl::StrAppend(&d, "; GEMV variants (tuning took ", absl::StrFormat("%.2f", tune_ms_ / 1e3),
                      " s): ", absl::StrJoin(ChoiceLines(), "; "));
    }
    return d;
  }

  absl::StatusOr<std::unique_ptr<BufferObject>> Allocate(const std::string& name, size_t bytes,
                                                         BoCategory category, int rows) override {
    if (rows < 1) return absl::InvalidArgumentError(absl::StrCat("BO '", name, "': ", rows, " rows"));
    auto bo = std::make_unique<CpuBo>(name, bytes, category, validator_, arena_, rows);
    if (!bo->ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", rows, " x ", bytes, " bytes for BO '", name, "'"));
    }
    return bo;
  }

  absl::StatusOr<std::unique_ptr<LoadedElf>> Load(const elf::Program& program, const std::string& elf_name,
                                                  std::vector<BufferObject*> bos) override {
    if (static_cast<int>(bos.size()) != program.bos_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Load: ", bos.size(), " BOs bound, program has ", program.bos_size()));
    }
    auto elf = std::make_unique<CpuElf>();
    elf->name_ = elf_name;
    std::vector<std::vector<std::vector<GemvWeight>>> weights;  // per group, per launch
    std::map<std::string, int> bo_index;
    for (int i = 0; i < program.bos_size(); ++i) bo_index[program.bos(i).name()] = i;
    for (int s = 0; s < program.steps_size(); ++s) {
      if (!program.steps(s).has_group()) continue;
      const elf::LaunchGroup& g = program.steps(s).group();
      std::vector<LaunchOp> ops;
      weights.emplace_back();
      for (int j = 0; j < g.launches_size(); ++j) {
        LaunchOp op;
        op.scratch = &scratch_;
        op.where = absl::StrCat("ELF '", elf_name, "', group '", g.name(), "', launch ", j, " (",
                                g.launches(j).kernel_symbol(), ")");
        weights.back().emplace_back();
        DK_RETURN_IF_ERROR(LoadLaunch(program, g.launches(j), bo_index, bos, &op, &weights.back().back()));
        ops.push_back(std::move(op));
      }
      elf->team_ok_.push_back(options_.team_runs && TeamOk(ops));
      elf->groups_.push_back(std::move(ops));
    }
    size_t most = 1;
    for (const auto& g : elf->groups_) most = std::max(most, g.size());
    elf->team_ = std::make_unique<internal::Team>(most);
    if (options_.gemv_tune) TuneLaunches(elf->groups_, weights);
    for (size_t g = 0; g < elf->groups_.size(); ++g) {
      for (size_t j = 0; j < elf->groups_[g].size(); ++j) {
        if (!weights[g][j].empty()) elf->gemvs_.push_back(&elf->groups_[g][j]);
      }
    }
    return elf;
  }

  const std::vector<KernelTime>& kernel_times() const { return times_; }
  const kernels::GemvVariants& variants() const { return variants_; }
  double tune_seconds() const { return tune_ms_ / 1e3; }
  std::vector<std::string> ChoiceLines() const {
    std::vector<std::string> lines;
    for (const auto& [shape, choice] : choices_) lines.push_back(choice.Line());
    return lines;
  }
  void ResetKernelTimes() {
    for (KernelTime& t : times_) t = {t.symbol};
  }

  absl::StatusOr<std::unique_ptr<Run>> Start(LoadedElf& elf, int group, RowRange rows) override {
    auto& cpu = static_cast<CpuElf&>(elf);
    if (group < 0 || group >= static_cast<int>(cpu.groups_.size())) {
      return absl::OutOfRangeError(absl::StrCat("no launch group ", group, " in ELF '", cpu.name_, "'"));
    }
    if (rows.first != 0 || rows.count != 1) DK_RETURN_IF_ERROR(CheckRows(cpu, group, rows));
    // Several rows: launch by launch (a kernel's rows in one call where it has one).
    internal::Team* team = cpu.team_ok_[group] && rows.count == 1 ? cpu.team_.get() : nullptr;
    if (!options_.device_thread) {
      // The host waits for every run right after starting it: running the group
      // here, on the host thread, saves two thread hand-offs per run.
      run_status_ = Execute(cpu.groups_[group], team, rows);
      return std::unique_ptr<Run>(new CpuRun(this));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &cpu.groups_[group];
      job_team_ = team;
      job_rows_ = rows;
      done_ = false;
      ++posted_;
      posted_flag_.store(posted_, std::memory_order_release);
    }
    cv_.notify_all();
    return std::unique_ptr<Run>(new CpuRun(this));
  }

  absl::Status WaitForRun() {
    if (!options_.device_thread) return run_status_;
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
    return cpu::WeightLayoutBytes(layout, format, rows, cols);
  }
  absl::Status PackWeight(const std::string& layout, elf::BlockFormat format, const void* src, size_t rows,
                          size_t cols, void* out, bool out_zeroed) const override {
    return cpu::PackWeightLayout(layout, format, src, rows, cols, out, pool_, out_zeroed);
  }

 private:
  // One launch: its kernel's row (looked up once, here), bound BOs, parameters, the
  // row's check of its operands, its team role and its timing slot.
  absl::Status LoadLaunch(const elf::Program& program, const elf::Launch& l, const std::map<std::string, int>& bo_index,
                          const std::vector<BufferObject*>& bos, LaunchOp* op, std::vector<GemvWeight>* gemv_weights) {
    const registry::Kernel* kernel = nullptr;
    auto variant = registry::FindSymbol(l.kernel_symbol(), &kernel);
    if (!variant.ok()) return absl::NotFoundError(absl::StrCat(op->where, ": ", variant.status().message()));
    op->kernel = cpu::FindKernel(kernel->id());
    if (op->kernel == nullptr || kernel->host_only()) {
      return absl::UnimplementedError(absl::StrCat(op->where, ": the cpu device has no kernel '", kernel->id(), "'"));
    }
    std::map<std::string, std::string> bound;
    for (const auto& b : l.bindings()) bound[b.param()] = b.bo();
    DK_RETURN_IF_ERROR(BindLaunch(l, *kernel, bo_index, bos, bound, op));
    op->eps = program.model().rms_eps();
    op->gemv = variants_;
    if (options_.kernel_times) {
      for (const auto& [param, name] : bound) {
        if (registry::IsWeightParam(*kernel, param)) {
          op->weight_bytes += elf::X12StreamedBytes(program.bos(bo_index.at(name)));
        }
      }
      auto [slot, added] = time_slots_.emplace(l.kernel_symbol(), static_cast<int>(times_.size()));
      if (added) times_.push_back({l.kernel_symbol()});
      op->time_slot = slot->second;
    }
    DK_RETURN_IF_ERROR(op->kernel->check(cpu::LaunchBinding(program, **variant, bound, bo_index, op)));
    op->team = op->kernel->team(*op);
    // The GEMV weights whose variants the device chooses (the K-split GEMV has none).
    if (kernel->id() != "gemv_ksplit") {
      for (const auto& [param, name] : bound) {
        if (!registry::IsWeightParam(*kernel, param)) continue;
        const int i = bo_index.at(name);
        const elf::BufferObject& b = program.bos(i);
        if (b.shape_size() != 2) continue;
        GemvWeight w{{op->format, b.shape(0), b.shape(1)}, nullptr};
        if (b.category() == elf::STATIC) w.bytes = static_cast<const CpuBo*>(bos[i])->device();
        gemv_weights->push_back(w);
      }
    }
    return absl::OkStatus();
  }

  // gemv_tune: each GEMV shape's variants measured (those of earlier programs kept) on
  // the STATIC weights of that shape, and every GEMV launch given the candidate its
  // weights take least time with together (its weights share a format, so a
  // candidate list).
  void TuneLaunches(std::vector<std::vector<LaunchOp>>& groups,
                    const std::vector<std::vector<std::vector<GemvWeight>>>& weights) {
    const cpu::GemvVariantPolicy policy = PolicyOf(options_);
    std::map<cpu::GemvShape, std::vector<const uint8_t*>> by_shape;
    for (const auto& g : weights) {
      for (const auto& launch : g) {
        for (const GemvWeight& w : launch) {
          std::vector<const uint8_t*>& list = by_shape[w.shape];
          if (w.bytes && std::find(list.begin(), list.end(), w.bytes) == list.end()) list.push_back(w.bytes);
        }
      }
    }
    std::vector<cpu::GemvTuneRequest> requests;
    size_t max_rows = 0, max_cols = 0;
    for (const auto& [shape, list] : by_shape) {
      if (choices_.count(shape)) continue;
      // A shape without a STATIC weight to time runs the default.
      std::vector<kernels::GemvVariants> candidates = cpu::GemvCandidates(shape.format, policy);
      if (list.empty()) candidates.resize(1);
      requests.push_back({shape, candidates});
      max_rows = std::max<size_t>(max_rows, shape.rows);
      max_cols = std::max<size_t>(max_cols, shape.cols);
    }
    if (!requests.empty()) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<bf16> x(max_cols);
      for (size_t k = 0; k < x.size(); ++k) x[k] = F32ToBf16(0.01f * static_cast<float>(k % 17) - 0.08f);
      std::vector<float> y(max_rows);
      cpu::GemvTuneOptions o;
      o.cache_dir = options_.gemv_tune_cache;
      o.threads = pool_->num_threads();
      o.clock_ns = options_.gemv_tune_clock;
      std::string warning;
      const std::vector<cpu::GemvChoice> chosen = cpu::TuneGemvs(
          requests,
          [&](const cpu::GemvShape& shape, const kernels::GemvVariants& v) {
            for (const uint8_t* w : by_shape.at(shape)) cpu::RunGemv(shape, w, v, x.data(), y.data(), pool_, &scratch_);
            if (options_.gemv_tune_pass_done) options_.gemv_tune_pass_done(shape.rows, shape.cols, v);
          },
          o, &warning);
      if (!warning.empty()) std::fprintf(stderr, "warning: %s (the tuning is measured again next time)\n", warning.c_str());
      for (const cpu::GemvChoice& c : chosen) choices_[c.shape] = c;
      tune_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t j = 0; j < groups[g].size(); ++j) {
        if (!weights[g][j].empty()) groups[g][j].gemv = LaunchChoice(weights[g][j], by_shape);
      }
    }
  }

  // One launch's variants: its single shape's choice, or for several weights the
  // candidate with the least time over them (each shape's pass time per weight).
  kernels::GemvVariants LaunchChoice(const std::vector<GemvWeight>& ws,
                                     const std::map<cpu::GemvShape, std::vector<const uint8_t*>>& by_shape) const {
    const cpu::GemvChoice& first = choices_.at(ws[0].shape);
    std::vector<double> total(first.candidates.size(), 0.0);
    for (const GemvWeight& w : ws) {
      const cpu::GemvChoice& c = choices_.at(w.shape);
      if (c.candidates != first.candidates || c.ns.empty()) return first.candidates[0];
      if (ws.size() == 1) return c.variants();
      const double n = std::max<size_t>(1, by_shape.at(w.shape).size());
      for (size_t k = 0; k < total.size(); ++k) total[k] += c.ns[k] / n;
    }
    size_t best = 0;
    for (size_t k = 1; k < total.size(); ++k) {
      if (total[k] < total[best]) best = k;
    }
    return total[best] < total[0] * (1.0 - cpu::kKeepDefaultWithin) ? first.candidates[best] : first.candidates[0];
  }

  void DeviceLoop() {
    uint64_t seen = 0;
    for (;;) {
      const std::vector<LaunchOp>* job;
      internal::Team* team;
      RowRange rows;
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
        rows = job_rows_;
      }
      absl::Status status = Execute(*job, team, rows);
      {
        std::lock_guard<std::mutex> lock(mu_);
        run_status_ = status;
        done_ = true;
      }
      done_flag_.store(true, std::memory_order_release);
      cv_.notify_all();
    }
  }

  // run(), timed as `op`'s call when kernel timing is on and `timed`.
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

  // Rows within every BO of several rows that `group` binds.
  absl::Status CheckRows(const CpuElf& elf, int group, RowRange rows) const {
    if (rows.first < 0 || rows.count < 1) {
      return absl::OutOfRangeError(absl::StrCat("rows [", rows.first, ", +", rows.count, ") in ELF '", elf.name_, "'"));
    }
    for (const LaunchOp& op : elf.groups_[group]) {
      for (const CpuBo* bo : op.bo) {
        if (bo != nullptr && bo->rows() > 1 && RowSlot(rows.first, bo->rows()) + rows.count > bo->rows()) {
          return absl::OutOfRangeError(absl::StrCat(op.where, ": rows [", rows.first, ", ", rows.first + rows.count,
                                                    ") do not fit BO '", bo->name(), "' of ", bo->rows(), " rows"));
        }
      }
    }
    return absl::OkStatus();
  }

  // One launch over `rows`: its kernel's multi-row call, or run() row by row.
  void RunRows(const LaunchOp& op, RowRange rows) {
    if (rows.count > 1 && op.kernel->run_rows != nullptr) {
      op.row = rows.first;
      op.kernel->run_rows(op, rows.first, rows.count, pool_);
      return;
    }
    cpu::RunRowByRow(op, rows.first, rows.count, pool_);
  }

  // A group's launches, in order, over token rows `rows`; with `team` (one row),
  // as one team run of the pool (see ThreadPool::RunTeam): one job and one barrier
  // per launch instead of a job per launch. The validator's checks then come first,
  // for the whole group.
  absl::Status Execute(const std::vector<LaunchOp>& ops, internal::Team* team, RowRange rows) {
    if (team != nullptr && pool_->num_threads() > 1) {
      for (const LaunchOp& op : ops) op.row = rows.first;
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
            if (op.team == TeamRole::kSingle) {
              TeamSingle(pool_, [&] { op.kernel->run(op, pool_); });
            } else {
              op.kernel->run(op, pool_);
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
      Timed(op, true, [&] { RunRows(op, rows); });
      for (CpuBo* out : op.outputs) out->MarkWrittenByLaunch();
    }
    return absl::OkStatus();
  }

  std::shared_ptr<cpu::Validator> validator_;
  std::shared_ptr<cpu::StaticArena> arena_ = std::make_shared<cpu::StaticArena>();
  // The device's own pool when it is given none: two devices never share threads or
  // the state a pool keeps between runs (its contention counts, its solo mode), so
  // they can run at the same time. Null when the caller's pool runs the kernels.
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_;
  // The kernels' per-thread scratch, one set per thread of pool_: this device's alone,
  // freed with it (every LaunchOp points here).
  kernels::KernelScratch scratch_;
  const CpuDeviceOptions options_;
  const int spin_;
  const kernels::GemvVariants variants_;  // every launch's (CpuDeviceOptions) unless tuned
  std::map<cpu::GemvShape, cpu::GemvChoice> choices_;  // gemv_tune: each shape's, once measured
  double tune_ms_ = 0;  // the tuning's wall time (cache reads included)
  std::thread thread_;  // with options_.device_thread
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool done_ = false;
  uint64_t posted_ = 0;
  const std::vector<LaunchOp>* job_ = nullptr;
  internal::Team* job_team_ = nullptr;
  RowRange job_rows_;
  absl::Status run_status_;
  std::atomic<bool> done_flag_{false};
  std::atomic<uint64_t> posted_flag_{0};  // posted_, readable without the lock
  std::map<std::string, int> time_slots_;  // symbol -> times_ index (kernel timing)
  std::vector<KernelTime> times_;
};

absl::Status CpuRun::Wait() { return device_->WaitForRun(); }

}  // namespace

std::string CpuDeviceOptions::Describe() const {
  const char* on = PrefetchOn(*this) ? "on" : "off";
  const std::string prefetch = gemv_prefetch == Prefetch::kAuto ? absl::StrCat("auto(", on, ")") : on;
  return absl::StrCat("host_spin=", host_spin < 0 ? std::string("auto") : absl::StrCat(host_spin),
                      " device_thread=", device_thread ? 1 : 0, " team_runs=", team_runs ? 1 : 0,
                      " kernel_times=", kernel_times ? 1 : 0, " gemv_bf16dot=", gemv_bf16dot ? 1 : 0,
                      " gemv_vnni=", gemv_vnni ? 1 : 0, " gemv_prefetch=", prefetch, " gemv_tune=", gemv_tune ? 1 : 0);
}

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

kernels::GemvVariants CpuGemvVariants(const Device& device) {
  const auto* cpu = dynamic_cast<const CpuDevice*>(&device);
  return cpu != nullptr ? cpu->variants() : kernels::GemvVariants();
}

std::vector<std::string> CpuGemvChoices(const Device& device) {
  const auto* cpu = dynamic_cast<const CpuDevice*>(&device);
  return cpu != nullptr ? cpu->ChoiceLines() : std::vector<std::string>{};
}

double CpuGemvTuneSeconds(const Device& device) {
  const auto* cpu = dynamic_cast<const CpuDevice*>(&device);
  return cpu != nullptr ? cpu->tune_seconds() : 0.0;
}

std::vector<kernels::GemvVariants> CpuLaunchGemvVariants(const LoadedElf& elf) {
  std::vector<kernels::GemvVariants> out;
  if (const auto* cpu = dynamic_cast<const CpuElf*>(&elf)) {
    for (const LaunchOp* op : cpu->gemvs_) out.push_back(op->gemv);
  }
  return out;
}

std::unique_ptr<Device> MakeCpuDevice(const DeviceOptions& options, ThreadPool* pool, const CpuDeviceOptions& cpu) {
  return std::make_unique<CpuDevice>(options, cpu, pool);
}

}  // namespace dk::runtime
