#include "weights/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "util/read_file.h"
#include "util/status.h"
#include "weights/dequant.h"
#include "weights/overlap.h"
#include "weights/parallel.h"

namespace dk::weights {
namespace {

using json = nlohmann::json;

// Headers above this are refused (the reference library's limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

// Element size of a safetensors dtype; 0 when unknown.
int DtypeSize(absl::string_view dtype) {
  if (dtype == "BF16" || dtype == "F16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

std::string ShapeStr(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A non-negative JSON integer, or an error naming `what`.
absl::StatusOr<uint64_t> NonNegInt(const json& j, const std::string& what) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return j.get<uint64_t>();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be a non-negative integer, got ", j.dump()));
}

// One tensor's header entry: dtype, shape and data_offsets, checked against each other
// and against the data section's `data_size` bytes. Errors name the tensor; the caller
// prefixes the file.
absl::StatusOr<SafetensorsTensorInfo> ParseTensorEntry(const std::string& name, const json& v,
                                                       uint64_t data_size) {
  auto Err = [](absl::string_view msg) { return absl::InvalidArgumentError(msg); };
  const std::string where = absl::StrCat("tensor \"", name, "\"");
  if (!v.is_object()) return Err(absl::StrCat(where, ": entry is not an object"));
  const auto dtype = v.find("dtype");
  const auto shape = v.find("shape");
  const auto offsets = v.find("data_offsets");
  if (dtype == v.end() || !dtype->is_string()) {
    return Err(absl::StrCat(where, ": missing or non-string \"dtype\""));
  }
  if (shape == v.end() || !shape->is_array()) {
    return Err(absl::StrCat(where, ": missing or non-array \"shape\""));
  }
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
    return Err(absl::StrCat(where, ": \"data_offsets\" must be [begin, end]"));
  }
  SafetensorsTensorInfo info;
  info.name = name;
  info.dtype = dtype->get<std::string>();
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : *shape) {
    absl::StatusOr<uint64_t> dim = NonNegInt(d, absl::StrCat(where, ": shape entry"));
    if (!dim.ok()) return Err(dim.status().message());
    if (*dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Err(absl::StrCat(where, ": dimension too large"));
    }
    info.shape.push_back(static_cast<int64_t>(*dim));
    if (*dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / *dim) {
      overflow = true;
    }
    numel *= *dim;
  }
  if (overflow) return Err(absl::StrCat(where, ": shape too large"));
  absl::StatusOr<uint64_t> begin = NonNegInt((*offsets)[0], where + ": begin offset");
  if (!begin.ok()) return Err(begin.status().message());
  absl::StatusOr<uint64_t> end = NonNegInt((*offsets)[1], where + ": end offset");
  if (!end.ok()) return Err(end.status().message());
  if (*begin > *end) {
    return Err(absl::StrCat(where, ": data_offsets [", *begin, ", ", *end,
                            "] end before begin"));
  }
  if (*end > data_size) {
    return Err(absl::StrCat(where, ": data_offsets [", *begin, ", ", *end,
                            "] past the end of the file (truncated? data section has ",
                            data_size, " bytes)"));
  }
  info.begin = *begin;
  info.end = *end;
  const int esize = DtypeSize(info.dtype);
  if (esize > 0 && numel * esize != *end - *begin) {
    return Err(absl::StrCat(where, ": ", info.dtype, " ", ShapeStr(info.shape),
                            " needs ", numel * esize, " bytes but data_offsets span ",
                            *end - *begin));
  }
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  absl::StatusOr<OpenedPath> opened = OpenUserPath(path, "safetensors file");
  if (!opened.ok()) return opened.status();
  f->size_ = opened->size;
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, opened->fd.get(), 0);
    if (m == MAP_FAILED) {
      return absl::InternalError(absl::StrCat("cannot map ", path, ": ", std::strerror(errno)));
    }
    f->mapping_ = m;
    f->data_ = static_cast<const uint8_t*>(m);
  }
  DK_RETURN_IF_ERROR(f->ParseHeader());
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

absl::Status SafetensorsFile::ParseHeader() {
  auto bad = [this](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors file ", path_, ": ", msg));
  };
  if (size_ < 8) return bad(absl::StrCat("truncated: ", size_, " bytes, no header length"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data_[i];
  if (header_len > size_ - 8) {
    return bad(absl::StrCat("truncated: header length ", header_len, " but only ",
                            size_ - 8, " bytes follow"));
  }
  if (header_len > kMaxHeaderBytes) {
    return bad(absl::StrCat("header length ", header_len, " exceeds ", kMaxHeaderBytes));
  }
  data_start_ = 8 + header_len;
  const uint64_t data_size = size_ - data_start_;
  const char* hp = reinterpret_cast<const char*>(data_ + 8);
  json header = json::parse(hp, hp + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad("header is not valid JSON");
  if (!header.is_object()) return bad("header JSON is not an object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return bad("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>()
                                                   : m.value().dump();
      }
      continue;
    }
    absl::StatusOr<SafetensorsTensorInfo> info = ParseTensorEntry(name, v, data_size);
    if (!info.ok()) return bad(info.status().message());
    tensors_.push_back(*std::move(info));
  }
  // Tensors must not share bytes (the reference library refuses overlaps too).
  std::vector<ByteRange> ranges;
  for (const SafetensorsTensorInfo& t : tensors_) ranges.push_back({t.begin, t.end, &t.name});
  if (const auto pair = FirstOverlap(ranges)) {
    const SafetensorsTensorInfo& a = tensors_[pair->first];
    const SafetensorsTensorInfo& b = tensors_[pair->second];
    return bad(absl::StrCat("tensors \"", a.name, "\" (data_offsets [", a.begin, ", ", a.end,
                            "]) and \"", b.name, "\" ([", b.begin, ", ", b.end,
                            "]) overlap in the data section"));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
              return a.name < b.name;
            });
  return absl::OkStatus();
}

const SafetensorsTensorInfo* SafetensorsFile::Find(absl::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const SafetensorsTensorInfo& a, absl::string_view n) { return a.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

absl::StatusOr<Tensor> SafetensorsFile::ReadBf16(const SafetensorsTensorInfo& info, ThreadPool* pool) const {
  GgmlType type;
  if (info.dtype == "BF16") {
    type = GgmlType::kBF16;
  } else if (info.dtype == "F16") {
    type = GgmlType::kF16;
  } else if (info.dtype == "F32") {
    type = GgmlType::kF32;
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "tensor \"", info.name, "\" in ", path_, " has unsupported dtype ", info.dtype,
        " (supported: BF16, F16, F32)"));
  }
  Tensor t;
  t.shape = info.shape;
  const int64_t n = t.numel();
  t.data = AlignedBuffer<bf16>(static_cast<size_t>(n));
  if (n > 0 && t.data.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", n, " elements for tensor \"", info.name, "\""));
  }
  const int esize = DtypeSize(info.dtype);
  const uint8_t* src = data_ + data_start_ + info.begin;
  bf16* dst = t.data.data();
  ParallelChunks(pool, n, int64_t{1} << 20, [&](int64_t b, int64_t e) {
    DequantizeToBf16(type, src + b * esize, e - b, dst + b);
  });
  return t;
}

absl::Status WriteSafetensorsBf16(
    const std::string& path,
    const std::vector<std::pair<std::string, const Tensor*>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") {
      return absl::InvalidArgumentError("tensor name \"__metadata__\" is reserved");
    }
    const uint64_t bytes = static_cast<uint64_t>(t->numel()) * 2;
    header[name] = {{"dtype", "BF16"},
                    {"shape", t->shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // as the reference writer pads

  FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, out) == 8 &&
            std::fwrite(text.data(), 1, text.size(), out) == text.size();
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    const Tensor* t = tensors[i].second;
    const size_t bytes = static_cast<size_t>(t->numel()) * 2;  // host is little-endian
    ok = std::fwrite(t->data.data(), 1, bytes, out) == bytes;
  }
  ok = (std::fclose(out) == 0) && ok;
  if (!ok) {
    return absl::DataLossError(absl::StrCat("error writing ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace dk::weights
