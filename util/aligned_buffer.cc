#include "util/aligned_buffer.h"

#include <sys/mman.h>

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

}  // namespace dk
