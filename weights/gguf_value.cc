// GGUF value types: names, ggml tensor type sizes, and GgufValue's typed accessors
// (the reader that builds them is gguf.cc).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "formats/weight_format.h"
#include "weights/gguf.h"

namespace dk::weights {

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
    case 7: return GgmlTypeTraits{"Q5_1", 32, 24};
    case 9: return GgmlTypeTraits{"Q8_1", 32, 40};
    case 10: return GgmlTypeTraits{"Q2_K", 256, 84};
    case 11: return GgmlTypeTraits{"Q3_K", 256, 110};
    case 13: return GgmlTypeTraits{"Q5_K", 256, 176};
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

}  // namespace dk::weights
