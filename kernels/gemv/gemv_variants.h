// Which inner loop a GEMV / GEMM call takes where a CPU offers more than one. The
// fastest depends on the CPU, not on its CPUID flags (on a Zen 4 the VNNI Q8_0 loop
// ran 1.7x slower than the Highway one; on a Zen 5 it was the faster). Bits: prefetch
// on and off compute the same bits; bf16_dot and vnni do not (vdpbf16ps rounds after
// each pair of products, flushes denormals, and sums in other lanes than the widening
// loop; the VNNI and Highway int8 loops scale different partial sums of a block), so
// only prefetch is ever chosen by timing (runtime/cpu/gemv_tuner.h). A value is passed with every call: whoever owns the calls
// (runtime/cpu's device, per GEMV shape) decides, and nothing is process-wide.
// Thread-safety: a plain value.
#ifndef DK_KERNELS_GEMV_GEMV_VARIANTS_H_
#define DK_KERNELS_GEMV_GEMV_VARIANTS_H_

#include <string>

namespace dk::kernels {

// Whether software prefetching of the bf16 weight streams is the default on this CPU:
// it sped the packed and x12 vdpbf16ps kernels up on the Intel CPUs they were tuned
// on and slowed them on an AMD EPYC (Zen 4), so true for Intel CPUs (constant).
bool GemvSoftwarePrefetchDefault();

struct GemvVariants {
  // bf16 x on bf16 weights: vdpbf16ps where the CPU has AVX512_BF16 and the target is
  // an AVX-512 one (false: widen to f32 and FMA; other bits).
  bool bf16_dot = true;
  // int8 x on block weights (QuantActivations::kInt8): vpdpbusd where the CPU has
  // AVX512-VNNI or AVX-VNNI (false: Highway's i16 multiply-adds; other bits).
  bool vnni = true;
  // The packed and x12 vdpbf16ps loops prefetch their weight stream in software.
  bool prefetch = GemvSoftwarePrefetchDefault();

  bool operator==(const GemvVariants& o) const {
    return bf16_dot == o.bf16_dot && vnni == o.vnni && prefetch == o.prefetch;
  }
  bool operator!=(const GemvVariants& o) const { return !(*this == o); }
  // "dot=1 vnni=1 prefetch=0".
  std::string Describe() const;
};

}  // namespace dk::kernels

#endif  // DK_KERNELS_GEMV_GEMV_VARIANTS_H_
