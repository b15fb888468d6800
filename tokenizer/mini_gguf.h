// MiniGguf: a GGUF file of metadata only, built in memory for the tokenizer's tests.
#ifndef DK_TOKENIZER_MINI_GGUF_H_
#define DK_TOKENIZER_MINI_GGUF_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "weights/gguf.h"

namespace dk::tokenizer {

class MiniGguf {
 public:
  MiniGguf& Str(const std::string& key, const std::string& v) {
    Key(key, 8);
    Lstr(v);
    return *this;
  }
  MiniGguf& U32(const std::string& key, uint32_t v) {
    Key(key, 4);
    Raw(&v, 4);
    return *this;
  }
  MiniGguf& Bool(const std::string& key, bool v) {
    Key(key, 7);
    uint8_t b = v;
    Raw(&b, 1);
    return *this;
  }
  MiniGguf& Strs(const std::string& key, const std::vector<std::string>& v) {
    Key(key, 9);
    uint32_t t = 8;
    uint64_t n = v.size();
    Raw(&t, 4);
    Raw(&n, 8);
    for (const auto& s : v) Lstr(s);
    return *this;
  }
  MiniGguf& I32s(const std::string& key, const std::vector<int32_t>& v) {
    Key(key, 9);
    uint32_t t = 5;
    uint64_t n = v.size();
    Raw(&t, 4);
    Raw(&n, 8);
    for (int32_t x : v) Raw(&x, 4);
    return *this;
  }
  absl::StatusOr<std::unique_ptr<weights::GgufFile>> Build() const {
    std::string out;
    uint32_t magic = 0x46554747, version = 3;
    uint64_t n_tensors = 0, n_kv = count_;
    out.append(reinterpret_cast<const char*>(&magic), 4);
    out.append(reinterpret_cast<const char*>(&version), 4);
    out.append(reinterpret_cast<const char*>(&n_tensors), 8);
    out.append(reinterpret_cast<const char*>(&n_kv), 8);
    return weights::GgufFile::FromBytes(out + body_, "mini.gguf");
  }

 private:
  void Raw(const void* p, size_t n) { body_.append(static_cast<const char*>(p), n); }
  void Lstr(const std::string& s) {
    uint64_t n = s.size();
    Raw(&n, 8);
    body_ += s;
  }
  void Key(const std::string& key, uint32_t type) {
    ++count_;
    Lstr(key);
    Raw(&type, 4);
  }
  std::string body_;
  int count_ = 0;
};

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_MINI_GGUF_H_
