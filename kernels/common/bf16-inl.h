// SIMD bf16 <-> f32 conversions shared by the kernels, per Highway target.
// Highway 1.0.3's DemoteTo(bf16) truncates; torch rounds to nearest even, and so
// must we (the verify gate compares against torch), hence StoreRoundedBf16.
// NaN inputs are not preserved by the SIMD rounding (they may become +-inf);
// kernels document that they expect finite activations.

// Per-target include guard (Highway's -inl.h convention).
#if defined(DK_KERNELS_COMMON_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DK_KERNELS_COMMON_BF16_INL_H_
#undef DK_KERNELS_COMMON_BF16_INL_H_
#else
#define DK_KERNELS_COMMON_BF16_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "util/bf16.h"

HWY_BEFORE_NAMESPACE();
namespace dk::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loads Lanes(df) bf16 values (any alignment) widened to f32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadBf16(DF df, const bf16* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto u16 = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p));
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, u16)));
}

// Stores Lanes(df) f32 values as bf16, rounded to nearest even (any alignment).
template <class DF>
HWY_INLINE void StoreRoundedBf16(DF df, hn::Vec<DF> v, bf16* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du32, 0x7fffu), lsb)));
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, rounded)), du16,
             reinterpret_cast<uint16_t*>(p));
}

// Rounds f32 lanes to bf16 precision (the value a bf16 tensor would hold).
template <class DF>
HWY_INLINE hn::Vec<DF> RoundToBf16(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du32;
  const auto u = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  const auto rounded = hn::Add(u, hn::Add(hn::Set(du32, 0x7fffu), lsb));
  return hn::BitCast(df, hn::And(rounded, hn::Set(du32, 0xffff0000u)));
}

}  // namespace HWY_NAMESPACE
}  // namespace dk::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
