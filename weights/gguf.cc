#include "weights/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/printable.h"
#include "util/read_file.h"
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


// Magic, version and the two counts, each count bounded by what the rest of the
// file could hold.
absl::Status ReadPreamble(Reader& r, const std::string& name, uint32_t& version,
                          uint64_t& n_tensors, uint64_t& n_kv) {
  uint32_t magic = 0;
  if (absl::Status s = r.Read(&magic, "magic"); !s.ok()) return s;
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GGUF %s: bad magic 0x%08x (expected \"GGUF\"); not a GGUF file", name, magic));
  }
  if (absl::Status s = r.Read(&version, "version"); !s.ok()) return s;
  if (version != 2 && version != 3) {
    if ((version & 0xFFFF) == 0 && version != 0) {
      return absl::UnimplementedError(absl::StrCat(
          "GGUF ", name, ": version field ", version, " looks big-endian; not supported"));
    }
    return absl::UnimplementedError(absl::StrCat(
        "GGUF ", name, ": unsupported version ", version, " (supported: 2, 3)"));
  }
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
  return absl::OkStatus();
}

absl::Status ReadMetadata(Reader& r, uint64_t n_kv, std::vector<std::string>& keys,
                          absl::flat_hash_map<std::string, GgufValue>& kv) {
  keys.reserve(n_kv);
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
    if (kv.contains(key)) return r.Error(absl::StrCat("duplicate metadata key '", Printable(key), "'"));
    keys.push_back(key);
    kv.emplace(std::move(key), *std::move(value));
  }
  return absl::OkStatus();
}

// The dims of tensor `t` (its name read), with their product.
absl::Status ReadTensorDims(Reader& r, GgufTensorInfo& t) {
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
  return absl::OkStatus();
}

// Tensor info `i`: name, dims, ggml type (its size in bytes follows) and offset.
absl::StatusOr<GgufTensorInfo> ReadTensorInfo(Reader& r, uint64_t i, uint64_t alignment) {
  GgufTensorInfo t;
  if (absl::Status s = r.ReadString(&t.name, absl::StrCat("name of tensor ", i)); !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadTensorDims(r, t); !s.ok()) return s;
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
  // Checked: a dims product within int64 can still overflow in bytes (F32 dims
  // [2^62] would wrap to a size of 0 and be "inside" any file).
  if (__builtin_mul_overflow(static_cast<uint64_t>(t.num_elements / traits->block_size),
                             static_cast<uint64_t>(traits->type_size), &t.size_bytes)) {
    return r.Error(absl::StrCat("tensor '", Printable(t.name), "': ", t.num_elements, " ",
                                traits->name, " elements take more than 2^64 bytes"));
  }
  if (absl::Status s = r.Read(&t.offset, absl::StrCat("offset of tensor '", Printable(t.name), "'"));
      !s.ok()) {
    return s;
  }
  if (t.offset % alignment != 0) {
    return r.Error(absl::StrCat("tensor '", Printable(t.name), "' offset ", t.offset,
                                " is not a multiple of the alignment ", alignment));
  }
  return t;
}

// Every tensor's bytes inside the file's data section, and no two sharing bytes
// (llama.cpp's reader requires each tensor at the next aligned offset; safetensors
// files are refused for overlaps too).
absl::Status CheckTensorData(const std::string& name, uint64_t size, uint64_t data_offset,
                             const std::vector<GgufTensorInfo>& tensors) {
  for (const GgufTensorInfo& t : tensors) {
    const uint64_t avail = size - data_offset;
    if (t.offset > avail || t.size_bytes > avail - t.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF ", name, ": truncated file: tensor '", Printable(t.name), "' needs bytes [",
          data_offset + t.offset, ", ", data_offset + t.offset + t.size_bytes,
          ") but the file has ", size));
    }
  }
  std::vector<ByteRange> ranges;
  for (const GgufTensorInfo& t : tensors) ranges.push_back({t.offset, t.offset + t.size_bytes, &t.name});
  if (const auto pair = FirstOverlap(ranges)) {
    const GgufTensorInfo& a = tensors[pair->first];
    const GgufTensorInfo& b = tensors[pair->second];
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF ", name, ": tensors '", Printable(a.name), "' (data bytes [", a.offset, ", ",
        a.offset + a.size_bytes, ")) and '", Printable(b.name), "' ([", b.offset, ", ",
        b.offset + b.size_bytes, ")) overlap in the data section"));
  }
  return absl::OkStatus();
}

}  // namespace

// --- GgufFile -------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  absl::StatusOr<OpenedPath> opened = OpenUserPath(path, "GGUF");
  if (!opened.ok()) return opened.status();
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->name_ = path;
  file->size_ = opened->size;
  if (file->size_ > 0) {
    void* m = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, opened->fd.get(), 0);
    if (m == MAP_FAILED) {
      return absl::InternalError(absl::StrCat("GGUF ", path, ": mmap: ", std::strerror(errno)));
    }
    file->mapping_ = m;
    file->data_ = static_cast<const uint8_t*>(m);
  }
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
  uint64_t n_tensors = 0, n_kv = 0;
  if (absl::Status s = ReadPreamble(r, name_, version_, n_tensors, n_kv); !s.ok()) return s;
  if (absl::Status s = ReadMetadata(r, n_kv, keys_, kv_); !s.ok()) return s;

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
    absl::StatusOr<GgufTensorInfo> t = ReadTensorInfo(r, i, alignment_);
    if (!t.ok()) return t.status();
    if (tensor_index_.contains(t->name)) {
      return r.Error(absl::StrCat("duplicate tensor name '", Printable(t->name), "'"));
    }
    tensor_index_.emplace(t->name, tensors_.size());
    tensors_.push_back(*std::move(t));
  }

  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF ", name_, ": truncated file: data section starts at ", data_offset_,
        " but the file has ", size_, " bytes"));
  }
  return CheckTensorData(name_, size_, data_offset_, tensors_);
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
