// Owning, aligned, uninitialized-or-zeroed arrays, optionally on transparent huge pages.
#ifndef DK_UTIL_ALIGNED_BUFFER_H_
#define DK_UTIL_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace dk {

enum class PageMode {
  kDefault,     // ordinary 4 KiB pages, 64-byte aligned
  kHugePages,   // 2 MiB aligned, madvise(MADV_HUGEPAGE); falls back silently
};

// Allocates `bytes` bytes aligned to 64 (or 2 MiB for kHugePages); returns nullptr
// on failure. Free with FreeAligned.
void* AllocateAligned(size_t bytes, PageMode mode = PageMode::kDefault);
void FreeAligned(void* p);
// As AllocateAligned (4096-byte aligned at least), but fresh pages of the OS, so
// zero-filled without a write: a page no one writes is never touched (and never
// becomes resident). Free with FreeZeroed and the same bytes and mode.
void* AllocateZeroed(size_t bytes, PageMode mode);
void FreeZeroed(void* p, size_t bytes, PageMode mode);

// An owning array of trivially-copyable T. Move-only. Not thread-safe for
// concurrent mutation (like std::vector).
template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n, PageMode mode = PageMode::kDefault)
      : data_(static_cast<T*>(AllocateAligned(n * sizeof(T) + 64, mode))), size_(n) {
    if (data_ == nullptr) size_ = 0;
  }
  // n elements that hold zeros from the start, on fresh pages (AllocateZeroed): what
  // is never written is never touched.
  static AlignedBuffer Zeroed(size_t n, PageMode mode = PageMode::kDefault) {
    AlignedBuffer b;
    b.data_ = static_cast<T*>(AllocateZeroed(n * sizeof(T) + 64, mode));
    if (b.data_ != nullptr) {
      b.size_ = n;
      b.zeroed_mode_ = mode;
      b.zeroed_ = true;
    }
    return b;
  }
  ~AlignedBuffer() { Free(); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        zeroed_(std::exchange(o.zeroed_, false)),
        zeroed_mode_(o.zeroed_mode_) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      zeroed_ = std::exchange(o.zeroed_, false);
      zeroed_mode_ = o.zeroed_mode_;
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  void Zero() {
    if (data_) std::memset(static_cast<void*>(data_), 0, bytes());
  }

 private:
  void Free() {
    if (zeroed_) {
      FreeZeroed(data_, size_ * sizeof(T) + 64, zeroed_mode_);
    } else {
      FreeAligned(data_);
    }
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  bool zeroed_ = false;  // from AllocateZeroed
  PageMode zeroed_mode_ = PageMode::kDefault;
};

}  // namespace dk

#endif  // DK_UTIL_ALIGNED_BUFFER_H_
