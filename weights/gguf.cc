#include "weights/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "formats/weight_format.h"
#include "util/printable.h"
#include "weights/overlap.h"

namespace dk::weights {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;                  // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;

// Cursor over the file image; every read checks the remaining length.
class Reader {
 public:
  Reader(const uint8_t* data, uint64_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", name_, ": ", what, " (at byte offset ", pos_, ")"));
  }

  template <typename T>
  absl::Status Read(T* out, absl::string_view what) {
    if (remaining() < sizeof(T)) {
      return Error(absl::StrCat("truncated file: need ", sizeof(T), " bytes for ", what,
                                ", have ", remaining()));
    }
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string* out, absl::string_view what) {
    uint64_t len = 0;
    if (absl::Status s = Read(&len, absl::StrCat("length of ", what)); !s.ok()) return s;
    if (len > remaining()) {
      return Error(absl::StrCat("string length ", len, " of ", what,
                                " runs past the end of the file (truncated or corrupt; ", remaining(),
                                " bytes left)"));
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

// Smallest encoded size of one value of `type` (for sanity-checking array counts).
uint64_t MinEncodedSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kString:
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 1;
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

template <typename T>
absl::StatusOr<GgufValue> ReadScalar(Reader& r, GgufType type, absl::string_view what) {
  T v{};
  if (absl::Status s = r.Read(&v, what); !s.ok()) return s;
  return GgufValue(type, GgufValue::Storage(v));
}

absl::StatusOr<GgufValue> ReadValue(Reader& r, GgufType type, absl::string_view what,
                                    int depth) {
  switch (type) {
    case GgufType::kUint8:
      return ReadScalar<uint8_t>(r, type, what);
    case GgufType::kInt8:
      return ReadScalar<int8_t>(r, type, what);
    case GgufType::kUint16:
      return ReadScalar<uint16_t>(r, type, what);
    case GgufType::kInt16:
      return ReadScalar<int16_t>(r, type, what);
    case GgufType::kUint32:
      return ReadScalar<uint32_t>(r, type, what);
    case GgufType::kInt32:
      return ReadScalar<int32_t>(r, type, what);
    case GgufType::kFloat32:
      return ReadScalar<float>(r, type, what);
    case GgufType::kUint64:
      return ReadScalar<uint64_t>(r, type, what);
    case GgufType::kInt64:
      return ReadScalar<int64_t>(r, type, what);
    case GgufType::kFloat64:
      return ReadScalar<double>(r, type, what);
    case GgufType::kBool: {
      uint8_t b = 0;
      if (absl::Status s = r.Read(&b, what); !s.ok()) return s;
      if (b > 1) return r.Error(absl::StrCat("bool value ", int{b}, " of ", what, " is not 0 or 1"));
      return GgufValue(type, GgufValue::Storage(b != 0));
    }
    case GgufType::kString: {
      std::string str;
      if (absl::Status s = r.ReadString(&str, what); !s.ok()) return s;
      return GgufValue(type, GgufValue::Storage(std::move(str)));
    }
    case GgufType::kArray: {
      if (depth >= kMaxArrayDepth) return r.Error(absl::StrCat("arrays nested too deeply in ", what));
      uint32_t elem_type = 0;
      if (absl::Status s = r.Read(&elem_type, absl::StrCat("array type of ", what)); !s.ok()) {
        return s;
      }
      if (!IsKnownType(elem_type)) {
        return r.Error(absl::StrCat("unknown array element type ", elem_type, " in ", what));
      }
      uint64_t n = 0;
      if (absl::Status s = r.Read(&n, absl::StrCat("array length of ", what)); !s.ok()) return s;
      const GgufType et = static_cast<GgufType>(elem_type);
      if (n > r.remaining() / MinEncodedSize(et)) {
        return r.Error(absl::StrCat("array of ", n, " ", GgufTypeName(et), " in ", what,
                                    " runs past the end of the file (truncated or corrupt)"));
      }
      GgufArray arr;
      arr.element_type = et;
      arr.elements.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        absl::StatusOr<GgufValue> v = ReadValue(r, et, what, depth + 1);
        if (!v.ok()) return v.status();
        arr.elements.push_back(*std::move(v));
      }
      return GgufValue(type, GgufValue::Storage(std::move(arr)));
    }
  }
  return r.Error(absl::StrCat("unknown value type ", static_cast<uint32_t>(type), " in ", what));
}

}  // namespace

std::string GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return absl::StrCat("unknown(", static_cast<uint32_t>(type), ")");
}

absl::StatusOr<GgmlTypeTraits> GetGgmlTypeTraits(GgmlType type) {
  // The types that are weight formats here are sized by the format library.
  if (const std::optional<formats::WeightFormat> f = formats::FromGgmlTypeId(static_cast<uint32_t>(type))) {
    return GgmlTypeTraits{formats::GgufTypeName(*f).data(), formats::BlockElems(*f), formats::BlockBytes(*f)};
  }
  switch (static_cast<uint32_t>(type)) {
    case 0: return GgmlTypeTraits{"F32", 1, 4};
    case 1: return GgmlTypeTraits{"F16", 1, 2};
    case 6: return GgmlTypeTraits{"Q5_0", 32, 22};
    case 7: return GgmlTypeTraits{"Q5_1", 32, 24};
    case 9: return GgmlTypeTraits{"Q8_1", 32, 40};
    case 10: return GgmlTypeTraits{"Q2_K", 256, 84};
    case 11: return GgmlTypeTraits{"Q3_K", 256, 110};
    case 12: return GgmlTypeTraits{"Q4_K", 256, 144};
    case 13: return GgmlTypeTraits{"Q5_K", 256, 176};
    case 14: return GgmlTypeTraits{"Q6_K", 256, 210};
    case 15: return GgmlTypeTraits{"Q8_K", 256, 292};
    case 16: return GgmlTypeTraits{"IQ2_XXS", 256, 66};
    case 17: return GgmlTypeTraits{"IQ2_XS", 256, 74};
    case 18: return GgmlTypeTraits{"IQ3_XXS", 256, 98};
    case 19: return GgmlTypeTraits{"IQ1_S", 256, 50};
    case 20: return GgmlTypeTraits{"IQ4_NL", 32, 18};
    case 21: return GgmlTypeTraits{"IQ3_S", 256, 110};
    case 22: return GgmlTypeTraits{"IQ2_S", 256, 82};
    case 23: return GgmlTypeTraits{"IQ4_XS", 256, 136};
    case 24: return GgmlTypeTraits{"I8", 1, 1};
    case 25: return GgmlTypeTraits{"I16", 1, 2};
    case 26: return GgmlTypeTraits{"I32", 1, 4};
    case 27: return GgmlTypeTraits{"I64", 1, 8};
    case 28: return GgmlTypeTraits{"F64", 1, 8};
    case 29: return GgmlTypeTraits{"IQ1_M", 256, 56};
    case 34: return GgmlTypeTraits{"TQ1_0", 256, 54};
    case 35: return GgmlTypeTraits{"TQ2_0", 256, 66};
    case 39: return GgmlTypeTraits{"MXFP4", 32, 17};
    default:
      return absl::NotFoundError(
          absl::StrCat("unknown ggml tensor type ", static_cast<uint32_t>(type)));
  }
}

// --- GgufValue ------------------------------------------------------------------------

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<int64_t> GgufValue::AsInt() const {
  if (!is_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an integer, got ", GgufTypeName(type_)));
  }
  if (const uint64_t* u = std::get_if<uint64_t>(&storage_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::OutOfRangeError(absl::StrCat("uint64 value ", *u, " exceeds int64"));
    }
    return static_cast<int64_t>(*u);
  }
  return std::visit(
      [](const auto& v) -> int64_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(v);
        } else {
          return 0;
        }
      },
      storage_);
}

absl::StatusOr<double> GgufValue::AsDouble() const {
  if (const float* f = std::get_if<float>(&storage_)) return *f;
  if (const double* d = std::get_if<double>(&storage_)) return *d;
  if (is_integer()) {
    if (const uint64_t* u = std::get_if<uint64_t>(&storage_)) return static_cast<double>(*u);
    absl::StatusOr<int64_t> i = AsInt();
    if (!i.ok()) return i.status();
    return static_cast<double>(*i);
  }
  return absl::InvalidArgumentError(absl::StrCat("expected a number, got ", GgufTypeName(type_)));
}

absl::StatusOr<bool> GgufValue::AsBool() const {
  if (const bool* b = std::get_if<bool>(&storage_)) return *b;
  return absl::InvalidArgumentError(absl::StrCat("expected a bool, got ", GgufTypeName(type_)));
}

absl::StatusOr<absl::string_view> GgufValue::AsString() const {
  if (const std::string* s = std::get_if<std::string>(&storage_)) return absl::string_view(*s);
  return absl::InvalidArgumentError(absl::StrCat("expected a string, got ", GgufTypeName(type_)));
}

absl::StatusOr<const GgufArray*> GgufValue::AsArray() const {
  if (const GgufArray* a = std::get_if<GgufArray>(&storage_)) return a;
  return absl::InvalidArgumentError(absl::StrCat("expected an array, got ", GgufTypeName(type_)));
}

// --- GgufFile -------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("GGUF ", path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("GGUF ", path, ": fstat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("GGUF ", path, ": not a regular file"));
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->name_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* m = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("GGUF ", path, ": mmap: ", std::strerror(err)));
    }
    file->mapping_ = m;
    file->data_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::string bytes,
                                                              std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->name_ = std::move(name);
  file->owned_ = std::move(bytes);
  file->data_ = reinterpret_cast<const uint8_t*>(file->owned_.data());
  file->size_ = file->owned_.size();
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

void GgufFile::ReleaseResidentPages() const {
  // A private read-only mapping never written: MADV_DONTNEED only unmaps its pages
  // (re-read from the file on the next touch). Advice, so a failure changes nothing.
  if (mapping_ != nullptr) ::madvise(mapping_, size_, MADV_DONTNEED);
}

absl::Status GgufFile::Parse() {
  Reader r(data_, size_, name_);
  uint32_t magic = 0;
  if (absl::Status s = r.Read(&magic, "magic"); !s.ok()) return s;
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GGUF %s: bad magic 0x%08x (expected \"GGUF\"); not a GGUF file", name_, magic));
  }
  if (absl::Status s = r.Read(&version_, "version"); !s.ok()) return s;
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xFFFF) == 0 && version_ != 0) {
      return absl::UnimplementedError(absl::StrCat(
          "GGUF ", name_, ": version field ", version_, " looks big-endian; not supported"));
    }
    return absl::UnimplementedError(absl::StrCat(
        "GGUF ", name_, ": unsupported version ", version_, " (supported: 2, 3)"));
  }
  uint64_t n_tensors = 0, n_kv = 0;
  if (absl::Status s = r.Read(&n_tensors, "tensor count"); !s.ok()) return s;
  if (absl::Status s = r.Read(&n_kv, "metadata count"); !s.ok()) return s;
  // Each KV takes at least 12 bytes (key length + type), each tensor info at least 24.
  if (n_kv > r.remaining() / 12) {
    return r.Error(absl::StrCat("metadata count ", n_kv, " is larger than the file can hold (truncated or corrupt)"));
  }
  if (n_tensors > r.remaining() / 24) {
    return r.Error(absl::StrCat("tensor count ", n_tensors,
                                " is larger than the file can hold (truncated or corrupt)"));
  }

  keys_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    if (absl::Status s = r.ReadString(&key, absl::StrCat("key of metadata entry ", i));
        !s.ok()) {
      return s;
    }
    uint32_t type = 0;
    if (absl::Status s = r.Read(&type, absl::StrCat("type of metadata '", Printable(key), "'")); !s.ok()) {
      return s;
    }
    if (!IsKnownType(type)) {
      return r.Error(absl::StrCat("unknown value type ", type, " for metadata '", Printable(key), "'"));
    }
    absl::StatusOr<GgufValue> value =
        ReadValue(r, static_cast<GgufType>(type), absl::StrCat("metadata '", Printable(key), "'"), 0);
    if (!value.ok()) return value.status();
    if (kv_.contains(key)) return r.Error(absl::StrCat("duplicate metadata key '", Printable(key), "'"));
    keys_.push_back(key);
    kv_.emplace(std::move(key), *std::move(value));
  }

  if (const GgufValue* a = Find("general.alignment")) {
    absl::StatusOr<int64_t> v = a->AsInt();
    if (!v.ok() || *v <= 0 || (*v & (*v - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF ", name_, ": general.alignment must be a positive power of two integer"));
    }
    alignment_ = static_cast<uint64_t>(*v);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    if (absl::Status s = r.ReadString(&t.name, absl::StrCat("name of tensor ", i)); !s.ok()) {
      return s;
    }
    uint32_t n_dims = 0;
    if (absl::Status s = r.Read(&n_dims, absl::StrCat("dims of tensor '", Printable(t.name), "'"));
        !s.ok()) {
      return s;
    }
    if (n_dims == 0 || n_dims > kMaxDims) {
      return r.Error(absl::StrCat("tensor '", Printable(t.name), "' has ", n_dims,
                                  " dimensions (expected 1..", kMaxDims, ")"));
    }
    t.num_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      if (absl::Status s = r.Read(&dim, absl::StrCat("dim ", d, " of tensor '", Printable(t.name), "'"));
          !s.ok()) {
        return s;
      }
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          static_cast<uint64_t>(t.num_elements) >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim) {
        return r.Error(absl::StrCat("tensor '", Printable(t.name), "' has invalid dim ", d, " = ", dim));
      }
      t.dims.push_back(static_cast<int64_t>(dim));
      t.num_elements *= static_cast<int64_t>(dim);
    }
    uint32_t type = 0;
    if (absl::Status s = r.Read(&type, absl::StrCat("type of tensor '", Printable(t.name), "'")); !s.ok()) {
      return s;
    }
    t.type = static_cast<GgmlType>(type);
    absl::StatusOr<GgmlTypeTraits> traits = GetGgmlTypeTraits(t.type);
    if (!traits.ok()) {
      return r.Error(absl::StrCat("tensor '", Printable(t.name), "': ", traits.status().message()));
    }
    if (t.dims[0] % traits->block_size != 0) {
      return r.Error(absl::StrCat("tensor '", Printable(t.name), "': row length ", t.dims[0],
                                  " is not a multiple of the ", traits->name, " block size ",
                                  traits->block_size));
    }
    t.size_bytes = static_cast<uint64_t>(t.num_elements / traits->block_size) *
                   static_cast<uint64_t>(traits->type_size);
    if (absl::Status s = r.Read(&t.offset, absl::StrCat("offset of tensor '", Printable(t.name), "'"));
        !s.ok()) {
      return s;
    }
    if (t.offset % alignment_ != 0) {
      return r.Error(absl::StrCat("tensor '", Printable(t.name), "' offset ", t.offset,
                                  " is not a multiple of the alignment ", alignment_));
    }
    if (tensor_index_.contains(t.name)) {
      return r.Error(absl::StrCat("duplicate tensor name '", Printable(t.name), "'"));
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF ", name_, ": truncated file: data section starts at ", data_offset_,
        " but the file has ", size_, " bytes"));
  }
  for (const GgufTensorInfo& t : tensors_) {
    const uint64_t avail = size_ - data_offset_;
    if (t.offset > avail || t.size_bytes > avail - t.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF ", name_, ": truncated file: tensor '", Printable(t.name), "' needs bytes [",
          data_offset_ + t.offset, ", ", data_offset_ + t.offset + t.size_bytes,
          ") but the file has ", size_));
    }
  }
  // Tensors must not share bytes (llama.cpp's reader requires each tensor at the
  // next aligned offset; safetensors files are refused for overlaps too).
  std::vector<ByteRange> ranges;
  for (const GgufTensorInfo& t : tensors_) ranges.push_back({t.offset, t.offset + t.size_bytes, &t.name});
  if (const auto pair = FirstOverlap(ranges)) {
    const GgufTensorInfo& a = tensors_[pair->first];
    const GgufTensorInfo& b = tensors_[pair->second];
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF ", name_, ": tensors '", Printable(a.name), "' (data bytes [", a.offset, ", ",
        a.offset + a.size_bytes, ")) and '", Printable(b.name), "' ([", b.offset, ", ",
        b.offset + b.size_bytes, ")) overlap in the data section"));
  }
  return absl::OkStatus();
}

const GgufValue* GgufFile::Find(absl::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {

absl::Status KeyError(const std::string& file, absl::string_view key, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("GGUF ", file, ": metadata '", key, "': ",
                                             s.message()));
}

}  // namespace

#define DK_GGUF_LOOKUP(value_var, key)                                                      \
  const GgufValue* value_var = Find(key);                                                  \
  if (value_var == nullptr) {                                                              \
    return absl::NotFoundError(absl::StrCat("GGUF ", name_, ": missing metadata '", key, \
                                            "'"));                                         \
  }

absl::StatusOr<std::string> GgufFile::GetString(absl::string_view key) const {
  DK_GGUF_LOOKUP(v, key);
  absl::StatusOr<absl::string_view> s = v->AsString();
  if (!s.ok()) return KeyError(name_, key, s.status());
  return std::string(*s);
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  DK_GGUF_LOOKUP(v, key);
  absl::StatusOr<int64_t> i = v->AsInt();
  if (!i.ok()) return KeyError(name_, key, i.status());
  return *i;
}

absl::StatusOr<double> GgufFile::GetDouble(absl::string_view key) const {
  DK_GGUF_LOOKUP(v, key);
  absl::StatusOr<double> d = v->AsDouble();
  if (!d.ok()) return KeyError(name_, key, d.status());
  return *d;
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  DK_GGUF_LOOKUP(v, key);
  absl::StatusOr<bool> b = v->AsBool();
  if (!b.ok()) return KeyError(name_, key, b.status());
  return *b;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(absl::string_view key) const {
  DK_GGUF_LOOKUP(v, key);
  absl::StatusOr<const GgufArray*> a = v->AsArray();
  if (!a.ok()) return KeyError(name_, key, a.status());
  if ((*a)->element_type != GgufType::kString) {
    return KeyError(name_, key, absl::InvalidArgumentError(absl::StrCat(
                                    "expected an array of string, got an array of ",
                                    GgufTypeName((*a)->element_type))));
  }
  std::vector<std::string> out;
  out.reserve((*a)->elements.size());
  for (const GgufValue& e : (*a)->elements) {
    out.emplace_back(std::get<std::string>(e.storage()));
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(absl::string_view key) const {
  DK_GGUF_LOOKUP(v, key);
  absl::StatusOr<const GgufArray*> a = v->AsArray();
  if (!a.ok()) return KeyError(name_, key, a.status());
  std::vector<int64_t> out;
  out.reserve((*a)->elements.size());
  for (const GgufValue& e : (*a)->elements) {
    absl::StatusOr<int64_t> i = e.AsInt();
    if (!i.ok()) return KeyError(name_, key, i.status());
    out.push_back(*i);
  }
  return out;
}

absl::StatusOr<std::vector<double>> GgufFile::GetDoubleArray(absl::string_view key) const {
  DK_GGUF_LOOKUP(v, key);
  absl::StatusOr<const GgufArray*> a = v->AsArray();
  if (!a.ok()) return KeyError(name_, key, a.status());
  std::vector<double> out;
  out.reserve((*a)->elements.size());
  for (const GgufValue& e : (*a)->elements) {
    absl::StatusOr<double> d = e.AsDouble();
    if (!d.ok()) return KeyError(name_, key, d.status());
    out.push_back(*d);
  }
  return out;
}

#undef DK_GGUF_LOOKUP

const GgufTensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<absl::Span<const uint8_t>> GgufFile::TensorData(
    const GgufTensorInfo& info) const {
  const uint64_t avail = size_ - std::min(size_, data_offset_);
  if (info.offset > avail || info.size_bytes > avail - info.offset) {
    return absl::OutOfRangeError(absl::StrCat("GGUF ", name_, ": tensor '", info.name,
                                              "' lies outside the file"));
  }
  return absl::Span<const uint8_t>(data_ + data_offset_ + info.offset, info.size_bytes);
}

}  // namespace dk::weights
