// Weights::Digest: sha256 over every tensor (weights.h says what is hashed), the
// proof that goldens and a run use the same weights.
#include "absl/strings/str_cat.h"
#include "util/check.h"
#include "weights/sha256.h"
#include "weights/weights.h"

namespace dk::weights {

std::string Weights::Digest() const {
  static_assert(sizeof(bf16) == 2, "");
  Sha256 h;
  for (const auto& [name, t] : tensors_) {
    DK_CHECK(t.has_data());  // released (ReleaseData): the digest would describe other weights
    h.Update(name.data(), name.size() + 1);  // includes the NUL
    uint8_t rank[4];
    const uint32_t r = static_cast<uint32_t>(t.shape.size());
    for (int i = 0; i < 4; ++i) rank[i] = static_cast<uint8_t>(r >> (8 * i));
    h.Update(rank, 4);
    for (int64_t d : t.shape) {
      uint8_t b[8];
      for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(static_cast<uint64_t>(d) >> (8 * i));
      h.Update(b, 8);
    }
    h.Update(t.data.data(), static_cast<size_t>(t.numel()) * 2);  // host is little-endian
  }
  return absl::StrCat("sha256:", h.HexFinal());
}

}  // namespace dk::weights
