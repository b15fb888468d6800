// libFuzzer target: the GGUF reader (issue 15). Any input must give an error or a
// file whose metadata and tensor data can all be read without reading past the
// image.
//   ./bazelw build --config=fuzz //weights:gguf_fuzzer
//   bazel-bin/weights/gguf_fuzzer -max_total_time=60 CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string>

#include "weights/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = dk::weights::GgufFile::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
  if (!file.ok()) return 0;
  const dk::weights::GgufFile& f = **file;
  for (const std::string& key : f.keys()) {
    (void)f.GetString(key);
    (void)f.GetInt(key);
    (void)f.GetDouble(key);
    (void)f.GetBool(key);
    (void)f.GetStringArray(key);
    (void)f.GetIntArray(key);
    (void)f.GetDoubleArray(key);
  }
  uint64_t sum = 0;
  for (const dk::weights::GgufTensorInfo& t : f.tensors()) {
    auto bytes = f.TensorData(t);
    if (!bytes.ok()) continue;
    for (uint8_t b : *bytes) sum += b;  // touches every byte: ASan sees any overrun
  }
  return static_cast<int>(sum & 0);
}
