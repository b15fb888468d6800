// Overflow-checked size arithmetic shared by elf's files (bo_bytes.cc,
// model_shape.cc, validate.cc); not part of the library's interface.
#ifndef DK_ELF_INTERNAL_H_
#define DK_ELF_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "google/protobuf/repeated_field.h"

namespace dk::elf::internal {

// a * b for non-negative a, b; false when the product exceeds kMaxBytes (or int64).
inline bool MulWithinLimit(int64_t a, int64_t b, int64_t* out) {
  if (__builtin_mul_overflow(a, b, out)) return false;
  return *out <= kMaxBytes;
}

// Elements of a shape with positive dimensions, at most kMaxBytes; an error naming
// `what` otherwise.
inline absl::StatusOr<int64_t> CheckedNumel(const google::protobuf::RepeatedField<int64_t>& shape,
                                     const std::string& what) {
  if (shape.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " has no shape"));
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has a non-positive dimension ", d));
    }
    if (!MulWithinLimit(n, d, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has a shape of more than ", kMaxBytes, " elements"));
    }
  }
  return n;
}

}  // namespace dk::elf::internal

#endif  // DK_ELF_INTERNAL_H_
