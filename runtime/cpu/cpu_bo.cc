#include "runtime/cpu/cpu_bo.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/status.h"

namespace dk::runtime::cpu {
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

PageMode ModeFor(size_t bytes) { return bytes >= kHugePageMin ? PageMode::kHugePages : PageMode::kDefault; }

}  // namespace

absl::Status Validator::Violation(std::string message) {
  std::lock_guard<std::mutex> lock(mu);
  absl::Status s = absl::FailedPreconditionError(absl::StrCat("BO protocol violation: ", message));
  if (first.ok()) first = s;
  return s;
}

uint8_t* StaticArena::Allocate(size_t bytes) {
  bytes = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (slabs_.empty() || slabs_.back().size() - used_ < bytes) {
    // Zeroed: a STATIC BO's Fill is handed zeros, and writes only what is not zero.
    auto slab = AlignedBuffer<uint8_t>::Zeroed(std::max(kSlabBytes, bytes), PageMode::kHugePages);
    if (slab.empty()) return nullptr;
    slabs_.push_back(std::move(slab));
    used_ = 0;
  }
  uint8_t* p = slabs_.back().data() + used_;
  used_ += bytes;
  return p;
}

CpuBo::CpuBo(std::string name, size_t row_bytes, BoCategory category, std::shared_ptr<Validator> v,
             const std::shared_ptr<StaticArena>& arena, int rows)
    : name_(std::move(name)),
      rows_(rows > 1 ? rows : 1),
      row_bytes_(rows > 1 ? row_bytes : 0),
      size_(row_bytes * rows_),
      category_(category),
      v_(std::move(v)) {
  const size_t bytes = size_;
  if (category == elf::STATIC && bytes < kHugePageMin) {
    arena_ = arena;
    device_ = arena_->Allocate(bytes);
  } else {
    // STATIC: zeroed, as the arena's slabs (Fill hands it over as zeros).
    own_device_ = category == elf::STATIC ? AlignedBuffer<uint8_t>::Zeroed(bytes, ModeFor(bytes))
                                          : AlignedBuffer<uint8_t>(bytes, ModeFor(bytes));
    device_ = own_device_.size() == bytes ? own_device_.data() : nullptr;
  }
}

absl::Status CpuBo::Write(const void* src, size_t bytes, size_t offset) {
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

absl::Status CpuBo::Read(void* dst, size_t bytes, size_t offset) {
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

absl::Status CpuBo::SyncToDevice() {
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

absl::Status CpuBo::Fill(const FillFn& fill) {
  if (category_ != elf::STATIC) return BufferObject::Fill(fill);
  if (v_->enabled && used_) {
    return v_->Violation(absl::StrCat("host rewrote STATIC BO '", name_, "' after a launch used it"));
  }
  // Zeros until the first write (fresh pages); written before, zeroed again.
  if (device_valid_) std::memset(device_, 0, size_);
  DK_RETURN_IF_ERROR(fill(device_));
  // As Write + SyncToDevice leave it: synced, no host side (it comes back zeroed if
  // the host touches it again).
  host_ = AlignedBuffer<uint8_t>();
  synced_version_ = ++host_version_;
  device_valid_ = true;
  return absl::OkStatus();
}

absl::Status CpuBo::SyncFromDevice() {
  if (v_->enabled && category_ == elf::INTERMEDIATE) {
    return v_->Violation(absl::StrCat("host synced INTERMEDIATE BO '", name_, "' from the device"));
  }
  if (!EnsureHost()) return NoMemory();
  std::memcpy(host_.data(), device_, size_);
  fetched_version_ = device_version_;
  return absl::OkStatus();
}

absl::Status CpuBo::SyncRangeToDevice(size_t bytes, size_t offset) {
  if (offset > size_ || bytes > size_ - offset) return Range("SyncRangeToDevice", bytes, offset);
  if (v_->enabled && category_ == elf::INTERMEDIATE) {
    return v_->Violation(absl::StrCat("host synced INTERMEDIATE BO '", name_, "' to the device"));
  }
  if (category_ == elf::STATIC) return SyncToDevice();  // written once, whole
  if (!EnsureHost()) return NoMemory();
  std::memcpy(device_ + offset, host_.data() + offset, bytes);
  synced_version_ = host_version_;
  device_valid_ = true;
  return absl::OkStatus();
}

absl::Status CpuBo::SyncRangeFromDevice(size_t bytes, size_t offset) {
  if (offset > size_ || bytes > size_ - offset) return Range("SyncRangeFromDevice", bytes, offset);
  if (v_->enabled && category_ == elf::INTERMEDIATE) {
    return v_->Violation(absl::StrCat("host synced INTERMEDIATE BO '", name_, "' from the device"));
  }
  if (!EnsureHost()) return NoMemory();
  std::memcpy(host_.data() + offset, device_ + offset, bytes);
  fetched_version_ = device_version_;
  return absl::OkStatus();
}

absl::Status CpuBo::CheckReadByLaunch(const std::string& where) {
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

bool CpuBo::EnsureHost() {
  if (host_.size() != size_) {
    host_ = AlignedBuffer<uint8_t>(size_, ModeFor(size_));
    host_.Zero();
  }
  return host_.size() == size_;
}
absl::Status CpuBo::NoMemory() const {
  return absl::ResourceExhaustedError(absl::StrCat("cannot allocate the host side of BO '", name_, "'"));
}
absl::Status CpuBo::Range(const char* op, size_t bytes, size_t offset) const {
  return absl::OutOfRangeError(absl::StrCat(op, " of ", bytes, " bytes at offset ", offset,
                                            " is outside BO '", name_, "' (", size_, " bytes)"));
}


}  // namespace dk::runtime::cpu
