// The CPU backend's kernel table: one row per registry kernel id, holding the
// function that runs a launch, the check of its operands at load, and how it takes
// part in a team run. Adding a kernel to the CPU device is one row here (plus the
// kernel's own folder under kernels/ and its registry entry). Also the weight
// layouts those kernels read (bytes and the load-time packer). Internal to runtime/cpu.
// Thread-safety: the table is immutable; a LaunchOp is read-only once loaded.
#ifndef DK_RUNTIME_CPU_CPU_KERNELS_H_
#define DK_RUNTIME_CPU_CPU_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "elf/program.pb.h"
#include "formats/weight_format.h"
#include "kernels/common/scratch.h"
#include "kernels/gemv/gemv_variants.h"
#include "registry/registry.pb.h"
#include "runtime/cpu/cpu_bo.h"
#include "util/thread_pool.h"

namespace dk::runtime::cpu {

struct KernelRow;

// How a launch takes part in a team run (ThreadPool::RunTeam, a group's launches as
// one pool job): its kernel's ParallelRanges shared by the members, or whole on one
// member (a kernel without the pool); kNone: its group runs launch by launch.
enum class TeamRole { kNone, kRanges, kSingle };

// One resolved launch: its kernel's row, BOs by role, integer parameters, and what
// the row's check found out about its operands.
struct LaunchOp {
  const KernelRow* kernel = nullptr;
  CpuBo* bo[8] = {};  // inputs, then outputs, in the registry's order
  int64_t p[4] = {};  // the registry's int_params, in order
  float eps = 0;
  formats::WeightFormat format = formats::WeightFormat::kBf16RowMajor;  // the GEMV weight's
  bool x_f32 = false, y_f32 = false;
  // The GEMV's inner loops: the device's choice for this launch's weight shape.
  kernels::GemvVariants gemv;
  // The kernels' per-thread scratch: the device's (indexed by the pool's thread).
  kernels::KernelScratch* scratch = nullptr;
  std::string where;         // "ELF 'x', group 'g', launch i (symbol)"
  int time_slot = -1;        // with kernel timing: its symbol's entry
  int64_t weight_bytes = 0;  // with kernel timing: the weight bytes it streams
  std::vector<CpuBo*> inputs, outputs;
  TeamRole team = TeamRole::kNone;
  // The token row the next run() works on (the device sets it before each call):
  // every BO of several rows is read and written at this row, the others whole.
  mutable size_t row = 0;

  // BO `i`'s device bytes at the current row, as T.
  template <typename T>
  T* At(int i) const {
    return static_cast<T*>(static_cast<void*>(bo[i]->device_row(row)));
  }
};

// A launch's bound operands as the program states them, for a row's check.
class LaunchBinding {
 public:
  LaunchBinding(const elf::Program& program, const registry::KernelVariant& variant,
                const std::map<std::string, std::string>& bound, const std::map<std::string, int>& bo_index,
                LaunchOp* op)
      : program_(program), variant_(variant), bound_(bound), bo_index_(bo_index), op_(op) {}

  LaunchOp& op() const { return *op_; }
  const std::map<std::string, std::string>& bound() const { return bound_; }
  // The BO bound to `param` (bound: the device binds every parameter before checking).
  const elf::BufferObject& Bo(const std::string& param) const;
  // `param` holds at least `elements` bf16 (or f32 where allowed) elements.
  absl::Status Expect(const std::string& param, int64_t elements, bool allow_f32) const;
  // `param` is a GEMV weight [rows, cols] in the variant's weight format; records
  // that format in the op.
  absl::Status Weight(const std::string& param, int64_t rows, int64_t cols) const;
  // InvalidArgument "<where>: <message>".
  absl::Status Error(const std::string& message) const;

 private:
  const elf::Program& program_;
  const registry::KernelVariant& variant_;
  const std::map<std::string, std::string>& bound_;
  const std::map<std::string, int>& bo_index_;
  LaunchOp* op_;
};

struct KernelRow {
  const char* id;  // the registry's kernel id
  void (*run)(const LaunchOp& op, ThreadPool* pool);
  // The bound BOs against the launch's parameters (dtypes, sizes, weight layout).
  absl::Status (*check)(const LaunchBinding& launch);
  TeamRole (*team)(const LaunchOp& op);
  // Rows [first, first + count) in one call (the device sets op.row = first), each
  // row's result bit-identical to run() at that row (the multi-row kernels,
  // kernels/gemv/gemm.h); nullptr: the device calls run() once per row.
  void (*run_rows)(const LaunchOp& op, size_t first, size_t count, ThreadPool* pool) = nullptr;
};

// op.kernel->run() once per row of [first, first + count) (a kernel without
// run_rows, or a call its multi-row form does not cover).
void RunRowByRow(const LaunchOp& op, size_t first, size_t count, ThreadPool* pool);

// The row of kernel id `id`; nullptr when the CPU device has no such kernel.
const KernelRow* FindKernel(const std::string& id);

// Bytes a [rows, cols] bf16 weight takes in `layout` and block `format` as the
// kernels read it, and the load-time packer from row-major bf16 into that layout.
absl::StatusOr<size_t> WeightLayoutBytes(const std::string& layout, elf::BlockFormat format, size_t rows,
                                         size_t cols);
absl::Status PackWeightLayout(const std::string& layout, elf::BlockFormat format, const void* src, size_t rows,
                              size_t cols, void* out, ThreadPool* pool, bool out_zeroed = false);

}  // namespace dk::runtime::cpu

#endif  // DK_RUNTIME_CPU_CPU_KERNELS_H_
