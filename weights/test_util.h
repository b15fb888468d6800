// Test helpers: build safetensors and GGUF images byte by byte, temp paths.
#ifndef DK_WEIGHTS_TEST_UTIL_H_
#define DK_WEIGHTS_TEST_UTIL_H_

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "elf/program.pb.h"
#include "gtest/gtest.h"

namespace dk::weights::testing {

// A tiny Llama shape: every dimension a multiple of 32 where GGUF blocks need it.
inline elf::ModelShape TinyShape(bool tied = true) {
  elf::ModelShape s;
  s.set_name("tiny");
  s.set_n_layers(2);
  s.set_hidden(32);
  s.set_n_heads(4);
  s.set_n_kv_heads(2);
  s.set_head_dim(8);
  s.set_ffn(64);
  s.set_vocab(16);
  s.set_rms_eps(1e-5f);
  s.set_rope_theta(10000.0f);
  s.set_tied_embeddings(tied);
  s.set_max_context(128);
  return s;
}

// A fresh directory under TEST_TMPDIR.
inline std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

template <typename T>
std::string RawBytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

struct StEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A safetensors image; offsets assigned in order. `header_override` replaces the
// JSON header when non-empty.
inline std::string SafetensorsImage(const std::vector<StEntry>& entries,
                                    std::string header_override = "") {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::string data;
  for (const StEntry& e : entries) {
    absl::StrAppend(&header, ",\"", e.name, "\":{\"dtype\":\"", e.dtype, "\",\"shape\":[",
                    absl::StrJoin(e.shape, ","), "],\"data_offsets\":[", data.size(), ",",
                    data.size() + e.bytes.size(), "]}");
    data += e.bytes;
  }
  header += "}";
  if (!header_override.empty()) header = header_override;
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(&out[0], &n, 8);
  return out + header + data;
}

// Builds GGUF v3 images: metadata first, then tensors (data aligned to 32).
class GgufWriter {
 public:
  GgufWriter& KvString(const std::string& key, const std::string& v) {
    Str(&kv_, key);
    U32(&kv_, 8);
    Str(&kv_, v);
    ++n_kv_;
    return *this;
  }
  GgufWriter& KvU32(const std::string& key, uint32_t v) {
    Str(&kv_, key);
    U32(&kv_, 4);
    U32(&kv_, v);
    ++n_kv_;
    return *this;
  }
  GgufWriter& KvF32(const std::string& key, float v) {
    Str(&kv_, key);
    U32(&kv_, 6);
    kv_.append(reinterpret_cast<const char*>(&v), 4);
    ++n_kv_;
    return *this;
  }
  GgufWriter& KvStringArray(const std::string& key, const std::vector<std::string>& v) {
    Str(&kv_, key);
    U32(&kv_, 9);  // array
    U32(&kv_, 8);  // of strings
    U64(&kv_, v.size());
    for (const std::string& e : v) Str(&kv_, e);
    ++n_kv_;
    return *this;
  }
  // `dims` in ggml order (dims[0] contiguous); `type` a ggml type id.
  GgufWriter& Tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                     const std::string& bytes) {
    while (data_.size() % 32 != 0) data_.push_back('\0');
    Str(&infos_, name);
    U32(&infos_, static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(&infos_, d);
    U32(&infos_, type);
    U64(&infos_, data_.size());
    data_ += bytes;
    ++n_tensors_;
    return *this;
  }
  std::string Bytes() const {
    std::string out;
    U32(&out, 0x46554747);
    U32(&out, 3);
    U64(&out, n_tensors_);
    U64(&out, n_kv_);
    out += kv_;
    out += infos_;
    while (out.size() % 32 != 0) out.push_back('\0');
    return out + data_;
  }

 private:
  static void U32(std::string* s, uint32_t v) { s->append(reinterpret_cast<char*>(&v), 4); }
  static void U64(std::string* s, uint64_t v) { s->append(reinterpret_cast<char*>(&v), 8); }
  static void Str(std::string* s, const std::string& v) {
    U64(s, v.size());
    *s += v;
  }
  std::string kv_, infos_, data_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
};

}  // namespace dk::weights::testing

#endif  // DK_WEIGHTS_TEST_UTIL_H_
