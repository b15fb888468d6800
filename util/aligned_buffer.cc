#include "util/aligned_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace dk {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void* AllocateAligned(size_t bytes, PageMode mode) {
  if (bytes == 0) bytes = 1;
  const size_t align = mode == PageMode::kHugePages ? kHugePage : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p != nullptr && mode == PageMode::kHugePages) {
    // Best effort: without THP support the memory is still valid, on 4 KiB pages.
    (void)madvise(p, rounded, MADV_HUGEPAGE);
  }
  return p;
}

void FreeAligned(void* p) { std::free(p); }

namespace {
size_t ZeroedAlign(PageMode mode) { return mode == PageMode::kHugePages ? kHugePage : size_t{4096}; }
size_t ZeroedSpan(size_t bytes, PageMode mode) {
  const size_t align = ZeroedAlign(mode);
  return ((bytes == 0 ? 1 : bytes) + align - 1) / align * align;
}
}  // namespace

void* AllocateZeroed(size_t bytes, PageMode mode) {
  const size_t align = ZeroedAlign(mode), span = ZeroedSpan(bytes, mode);
  // mmap aligns to 4 KiB only: map align - 4 KiB more, unmap what lies outside.
  const size_t mapped = span + align - 4096;
  void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t p = (base + align - 1) / align * align;
  if (p > base) (void)munmap(m, p - base);
  if (base + mapped > p + span) (void)munmap(reinterpret_cast<void*>(p + span), base + mapped - (p + span));
  if (mode == PageMode::kHugePages) (void)madvise(reinterpret_cast<void*>(p), span, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(p);
}

void FreeZeroed(void* p, size_t bytes, PageMode mode) {
  if (p != nullptr) (void)munmap(p, ZeroedSpan(bytes, mode));
}

}  // namespace dk
