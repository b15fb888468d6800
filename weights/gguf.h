// GGUF reader (format versions 2 and 3, little-endian).
//
// A GGUF file is: magic "GGUF", version (u32), tensor count (u64), metadata KV count
// (u64), the metadata key/value pairs, the tensor infos (name, dims, ggml type, offset
// relative to the data section), padding to `general.alignment` (default 32), then the
// tensor data. Every read is bounds-checked; a malformed file yields an absl::Status
// naming what is wrong and where (byte offset), never a crash.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
//   absl::StatusOr<std::string> arch = f->GetString("general.architecture");
//   const GgufTensorInfo* t = f->FindTensor("token_embd.weight");
//   absl::StatusOr<absl::Span<const uint8_t>> bytes = f->TensorData(*t);
#ifndef DK_WEIGHTS_GGUF_H_
#define DK_WEIGHTS_GGUF_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace dk::weights {

// Metadata value types, numbered as in the GGUF spec.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint32", "array", ...; "unknown(N)" for values outside the enum.
std::string GgufTypeName(GgufType type);

// Tensor element types (ggml_type), numbered as in ggml.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
};

// Block geometry of a ggml type: `block_size` elements take `type_size` bytes.
struct GgmlTypeTraits {
  const char* name;
  int64_t block_size;
  int64_t type_size;
};

// Traits of `type`; NotFound for a type id this reader does not know.
absl::StatusOr<GgmlTypeTraits> GetGgmlTypeTraits(GgmlType type);

class GgufValue;

struct GgufArray {
  GgufType element_type = GgufType::kUint8;
  std::vector<GgufValue> elements;
};

// One metadata value: a scalar, a string or an array (arrays may nest).
class GgufValue {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t,
                               float, bool, std::string, GgufArray, uint64_t, int64_t,
                               double>;

  GgufValue() = default;
  GgufValue(GgufType type, Storage storage)
      : type_(type), storage_(std::move(storage)) {}

  GgufType type() const { return type_; }
  const Storage& storage() const { return storage_; }

  bool is_integer() const;
  // The value as a signed 64-bit integer: any integer type (uint64 values above
  // INT64_MAX are OutOfRange); InvalidArgument for non-integers.
  absl::StatusOr<int64_t> AsInt() const;
  // Any float or integer type.
  absl::StatusOr<double> AsDouble() const;
  absl::StatusOr<bool> AsBool() const;
  absl::StatusOr<absl::string_view> AsString() const;
  absl::StatusOr<const GgufArray*> AsArray() const;

 private:
  GgufType type_ = GgufType::kUint8;
  Storage storage_;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;        // relative to the start of the data section
  int64_t num_elements = 0;
  uint64_t size_bytes = 0;
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses an in-memory image (tests; small files). `name` is used in error messages.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::string bytes,
                                                            std::string name = "<memory>");

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute file offset
  uint64_t file_size() const { return size_; }
  const std::string& name() const { return name_; }

  // Keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }
  // nullptr when absent.
  const GgufValue* Find(absl::string_view key) const;

  // Typed getters: NotFound naming the key when absent, InvalidArgument naming the key and
  // both types when the type does not fit.
  absl::StatusOr<std::string> GetString(absl::string_view key) const;
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const;
  absl::StatusOr<double> GetDouble(absl::string_view key) const;
  absl::StatusOr<bool> GetBool(absl::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(absl::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(absl::string_view key) const;
  absl::StatusOr<std::vector<double>> GetDoubleArray(absl::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(absl::string_view name) const;
  // The tensor's bytes inside the file image (valid while this GgufFile lives).
  absl::StatusOr<absl::Span<const uint8_t>> TensorData(const GgufTensorInfo& info) const;
  // Drops the mapped file's pages from this process's resident set (they are read
  // again from the file, or the page cache, when next touched); the data is unchanged.
  void ReleaseResidentPages() const;

 private:
  GgufFile() = default;
  absl::Status Parse();

  std::string name_;
  std::string owned_;            // FromBytes image
  void* mapping_ = nullptr;      // Open image (mmap)
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;

  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  absl::flat_hash_map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace dk::weights

#endif  // DK_WEIGHTS_GGUF_H_
