// SHA-256 (FIPS 180-4), streaming, for weight digests: a thin wrapper over
// Debian's libcrypto (OpenSSL's EVP interface), which picks the fastest code the
// CPU offers (the x86 SHA extensions where present).
//
// Thread-safety: a Sha256 object is not thread-safe; use one per thread.
#ifndef DK_WEIGHTS_SHA256_H_
#define DK_WEIGHTS_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"

// OpenSSL's digest context (EVP_MD_CTX); declared here so that only sha256.cc
// includes OpenSSL's headers.
struct evp_md_ctx_st;

namespace dk::weights {

class Sha256 {
 public:
  Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  ~Sha256();

  void Update(const void* data, size_t size);
  void Update(absl::string_view s) { Update(s.data(), s.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> Final();
  // Final() as 64 lowercase hex digits.
  std::string HexFinal();

 private:
  struct FreeContext {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, FreeContext> ctx_;
};

// One-shot helper: hex digest of `s`.
std::string Sha256Hex(absl::string_view s);

}  // namespace dk::weights

#endif  // DK_WEIGHTS_SHA256_H_
