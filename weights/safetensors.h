// safetensors reader and writer (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {...}, "<name>": {"dtype": "BF16", "shape": [..],
//                                      "data_offsets": [begin, end]}, ...}
// then the tensor data; offsets are relative to the end of the header.
//
// Open() validates the whole header up front (JSON syntax and types, offsets inside
// the file, byte size == numel x dtype size for known dtypes), so reading a tensor
// afterwards cannot go out of bounds. Errors name the file and the tensor.
//
// Thread-safety: a SafetensorsFile is immutable after Open; concurrent reads are safe.
#ifndef DK_WEIGHTS_SAFETENSORS_H_
#define DK_WEIGHTS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "weights/weights.h"

namespace dk::weights {

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype;           // "BF16", "F16", "F32", ... as in the header
  std::vector<int64_t> shape;  // as in the header (PyTorch order)
  uint64_t begin = 0;          // byte offsets relative to the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates its header.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const SafetensorsTensorInfo* Find(absl::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor converted to bf16 (BF16 copied; F16 -> f32 exactly -> bf16 RNE;
  // F32 -> bf16 RNE). Unimplemented naming the tensor for other dtypes. Converted on
  // `pool` (null: on the caller).
  absl::StatusOr<Tensor> ReadBf16(const SafetensorsTensorInfo& info, ThreadPool* pool = nullptr) const;

 private:
  SafetensorsFile() = default;
  absl::Status ParseHeader();

  std::string path_;
  void* mapping_ = nullptr;
  const uint8_t* data_ = nullptr;  // whole file
  uint64_t size_ = 0;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (bf16) to `path` as a safetensors file with dtype BF16 and the
// given string metadata (e.g. {"format": "pt"}).
absl::Status WriteSafetensorsBf16(
    const std::string& path,
    const std::vector<std::pair<std::string, const Tensor*>>& tensors,
    const std::map<std::string, std::string>& metadata);

}  // namespace dk::weights

#endif  // DK_WEIGHTS_SAFETENSORS_H_
