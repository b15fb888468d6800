#include "weights/sha256.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace dk::weights {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Every length around the block and padding boundaries, fed in odd pieces and at
// once: same digests.
TEST(Sha256Test, ChunkingDoesNotMatter) {
  std::mt19937 rng(7);
  std::string data(1100, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t len = 0; len <= data.size(); len += (len < 200 ? 1 : 37)) {
    Sha256 whole;
    whole.Update(data.data(), len);
    const std::string expected = whole.HexFinal();
    Sha256 chunked;
    size_t pos = 0, step = 1;
    while (pos < len) {
      const size_t n = std::min(step, len - pos);
      chunked.Update(data.data() + pos, n);
      pos += n;
      step = step * 3 % 97 + 1;
    }
    EXPECT_EQ(chunked.HexFinal(), expected) << "len " << len;
    EXPECT_EQ(Sha256Hex(absl::string_view(data.data(), len)), expected) << "len " << len;
  }
}

}  // namespace
}  // namespace dk::weights
