#include "weights/sha256.h"

#include <openssl/evp.h>

#include "util/check.h"

namespace dk::weights {

void Sha256::FreeContext::operator()(evp_md_ctx_st* ctx) const { EVP_MD_CTX_free(ctx); }

// libcrypto fails these calls only without memory or with a broken installation
// (no SHA-256 in its default provider): not the input's fault, so a check.
Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  DK_CHECK(ctx_ != nullptr);
  DK_CHECK(EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
}

Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t size) {
  if (size == 0) return;
  DK_CHECK(EVP_DigestUpdate(ctx_.get(), data, size) == 1);
}

std::array<uint8_t, 32> Sha256::Final() {
  std::array<uint8_t, 32> digest{};
  unsigned int size = 0;
  DK_CHECK(EVP_DigestFinal_ex(ctx_.get(), digest.data(), &size) == 1);
  DK_CHECK(size == digest.size());
  return digest;
}

std::string Sha256::HexFinal() {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::array<uint8_t, 32> d = Final();
  std::string s(64, '0');
  for (int i = 0; i < 32; ++i) {
    s[2 * i] = kHex[d[i] >> 4];
    s[2 * i + 1] = kHex[d[i] & 15];
  }
  return s;
}

std::string Sha256Hex(absl::string_view s) {
  Sha256 h;
  h.Update(s);
  return h.HexFinal();
}

}  // namespace dk::weights
