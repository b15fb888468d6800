// Every tensor of a real Q4_K_M GGUF (Gemma 3 270M: Q5_0, Q4_K, Q6_K, Q8_0 and F32
// tensors), read through the GGUF reader and dequantized to f32 by weights/dequant.h,
// has the sha256 that gguf-py 0.19.0's dequantization of the same tensor has
// (weights/testdata/gemma3_270m_q4_k_m_dequant.json, recorded by
// tools/peer/dequant_digests.py file): the block formats are bit-exact on real data,
// not only on crafted blocks.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/cpp/runfiles/runfiles.h"
#include "weights/dequant.h"
#include "weights/gguf.h"
#include "weights/sha256.h"

namespace dk::weights {
namespace {

// sha256 of the tensor's f32 values as little-endian bytes (this host's order; the
// project builds for x86-64 and AArch64, both little-endian).
absl::StatusOr<std::string> F32Digest(const GgufFile& file, const GgufTensorInfo& t) {
  static_assert(sizeof(float) == 4);
  absl::StatusOr<absl::Span<const uint8_t>> data = file.TensorData(t);
  if (!data.ok()) return data.status();
  const int64_t cols = t.dims.empty() ? 1 : t.dims[0];
  absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(t.type, cols);
  if (!row_bytes.ok()) return row_bytes.status();
  const int64_t rows = cols == 0 ? 0 : t.num_elements / cols;
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(cols, 1));
  std::vector<float> buf(static_cast<size_t>(rows_per_chunk * cols));
  Sha256 sha;
  for (int64_t r = 0; r < rows; r += rows_per_chunk) {
    const int64_t n = std::min(rows_per_chunk, rows - r) * cols;
    DequantizeToF32(t.type, data->data() + r * *row_bytes, n, buf.data());
    sha.Update(buf.data(), static_cast<size_t>(n) * sizeof(float));
  }
  return sha.HexFinal();
}

std::string TypeName(GgmlType type) {
  absl::StatusOr<GgmlTypeTraits> traits = GetGgmlTypeTraits(type);
  return traits.ok() ? traits->name : absl::StrCat("type ", static_cast<uint32_t>(type));
}

TEST(DequantGgufFileTest, EveryGemma3TensorEqualsGgufPy) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  std::ifstream in(runfiles->Rlocation("decodekit/weights/testdata/gemma3_270m_q4_k_m_dequant.json"));
  ASSERT_TRUE(in) << "gemma3_270m_q4_k_m_dequant.json";
  const nlohmann::json golden = nlohmann::json::parse(in);
  absl::StatusOr<std::unique_ptr<GgufFile>> file =
      GgufFile::Open(runfiles->Rlocation("gemma3_270m/model.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), golden["tensors"].size());

  std::map<std::string, int> per_type;  // tensors compared, by type
  std::vector<std::string> mismatches;
  for (const nlohmann::json& g : golden["tensors"]) {
    const std::string name = g["name"];
    const GgufTensorInfo* t = (*file)->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    const std::string type = TypeName(t->type);
    ASSERT_EQ(type, g["type"].get<std::string>()) << name;
    ASSERT_EQ(t->dims, g["dims"].get<std::vector<int64_t>>()) << name;
    absl::StatusOr<std::string> digest = F32Digest(**file, *t);
    ASSERT_TRUE(digest.ok()) << name << ": " << digest.status();
    ++per_type[type];
    if (*digest != g["f32_sha256"].get<std::string>()) mismatches.push_back(absl::StrCat(name, " (", type, ")"));
  }
  if (mismatches.size() > 10) mismatches.resize(10);
  EXPECT_TRUE(mismatches.empty()) << "tensors whose f32 values differ from gguf-py's (first 10): "
                                  << absl::StrJoin(mismatches, ", ");
  // The file's formats, so that a golden recorded from another file is noticed.
  const std::map<std::string, int> want = {{"F32", 109}, {"Q4_K", 27}, {"Q5_0", 81}, {"Q6_K", 9}, {"Q8_0", 10}};
  EXPECT_EQ(per_type, want);
}

}  // namespace
}  // namespace dk::weights
