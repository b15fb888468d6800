// The CPU backend's buffer objects: separate host and device sides (as XRT BOs),
// with the BO protocol's checks (cpu_device.h lists them) when validation is on.
// Internal to runtime/cpu. Thread-safety: one host thread drives a device and its BOs.
#ifndef DK_RUNTIME_CPU_CPU_BO_H_
#define DK_RUNTIME_CPU_CPU_BO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "elf/program.pb.h"
#include "runtime/runtime.h"
#include "util/aligned_buffer.h"

namespace dk::runtime::cpu {

// Shared between a device and its BOs: the first protocol violation.
struct Validator {
  bool enabled = false;
  std::mutex mu;
  absl::Status first = absl::OkStatus();
  absl::Status Violation(std::string message);
};

// BOs of at least this many bytes (weights) get huge pages of their own.
inline constexpr size_t kHugePageMin = size_t{4} << 20;

// Where the device sides of STATIC BOs under kHugePageMin go: huge-page slabs, each BO
// right after the one allocated before it. On their own such BOs would sit on 4 KiB
// pages (a huge page each would waste most of it), and a small model's weights would
// cost a TLB miss every 4 KiB of the stream (docs/cpu-backend.md has the effect).
// Slabs are reserved, not touched: only what BOs use becomes resident. Space is not
// reused (STATIC BOs are allocated once per load). Shared by the device and its BOs,
// so a BO may outlive the device. Thread-safety: Allocate from the device's host thread.
class StaticArena {
 public:
  // `bytes` bytes, 64-byte aligned; nullptr when out of memory.
  uint8_t* Allocate(size_t bytes);

 private:
  static constexpr size_t kSlabBytes = size_t{64} << 20;
  std::vector<AlignedBuffer<uint8_t>> slabs_;
  size_t used_ = 0;  // bytes of the last slab handed out
};

class CpuBo final : public BufferObject {
 public:
  // The device side comes from `arena` for a STATIC BO under kHugePageMin. `rows`
  // > 1: rows token rows of `bytes` each (Device::Allocate).
  CpuBo(std::string name, size_t bytes, elf::BoCategory category, std::shared_ptr<Validator> v,
        const std::shared_ptr<StaticArena>& arena, int rows = 1);

  bool ok() const { return device_ != nullptr; }
  const std::string& name() const override { return name_; }
  size_t size() const override { return size_; }
  elf::BoCategory category() const { return category_; }
  uint8_t* device() { return device_; }
  const uint8_t* device() const { return device_; }
  // Bytes from one token row to the next; 0 for a BO of one row (every run's row
  // reads the same bytes).
  size_t row_bytes() const { return row_bytes_; }
  int rows() const { return rows_; }
  // The device side of token row `row`: its slot RowSlot(row, rows()).
  uint8_t* device_row(size_t row) const { return device_ + RowSlot(row, rows_) * row_bytes_; }

  absl::Status Write(const void* src, size_t bytes, size_t offset) override;
  absl::Status Read(void* dst, size_t bytes, size_t offset) override;
  absl::Status SyncToDevice() override;
  absl::Status SyncFromDevice() override;
  absl::Status SyncRangeToDevice(size_t bytes, size_t offset) override;
  absl::Status SyncRangeFromDevice(size_t bytes, size_t offset) override;
  // A STATIC BO: `fill` writes the device side itself (no host side, no copy); the
  // others as BufferObject::Fill.
  absl::Status Fill(const FillFn& fill) override;

  // Called on the device side before / after a launch; `where` names the launch.
  absl::Status CheckReadByLaunch(const std::string& where);
  void MarkWrittenByLaunch() {
    ++device_version_;
    device_valid_ = true;
  }

 private:
  // The host side is allocated on first use.
  bool EnsureHost();
  absl::Status NoMemory() const;
  absl::Status Range(const char* op, size_t bytes, size_t offset) const;

  const std::string name_;
  const int rows_;
  const size_t row_bytes_;
  const size_t size_;
  const elf::BoCategory category_;
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

}  // namespace dk::runtime::cpu

#endif  // DK_RUNTIME_CPU_CPU_BO_H_
