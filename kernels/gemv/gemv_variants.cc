#include "kernels/gemv/gemv_variants.h"

namespace dk::kernels {

bool GemvSoftwarePrefetchDefault() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  return intel;
#else
  return false;
#endif
}

std::string GemvVariants::Describe() const {
  return std::string("dot=") + (bf16_dot ? "1" : "0") + " vnni=" + (vnni ? "1" : "0") +
         " prefetch=" + (prefetch ? "1" : "0");
}

}  // namespace dk::kernels
