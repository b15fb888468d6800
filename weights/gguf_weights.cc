// GGUF files as Weights: metadata -> ModelShape, tensors renamed to HF names,
// dequantized to bf16, the converter's changes undone (gguf_arch.h says which; the
// file format itself is gguf.h).
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "formats/weight_format.h"
#include "util/bf16.h"
#include "util/status.h"
#include "weights/common.h"
#include "weights/dequant.h"
#include "weights/gguf.h"
#include "weights/gguf_arch.h"
#include "weights/parallel.h"
#include "weights/weights.h"

namespace dk::weights {
namespace {

// The block format the GEMV kernels read that `type` is, or NONE.
elf::BlockFormat BlockFormatOf(GgmlType type) {
  const std::optional<formats::WeightFormat> f = formats::FromGgmlTypeId(static_cast<uint32_t>(type));
  return f ? elf::BlockFormatOf(*f) : elf::BLOCK_FORMAT_NONE;
}

// Tensor `info` of `f` as HF tensor `name` of a model of `shape` (`dims`, PyTorch
// order, what ExpectedTensors wants): checked against its bytes, dequantized to
// bf16 in HF row order, less the converter's offset; keeps the file's blocks when
// the kernels read their format.
absl::StatusOr<Tensor> LoadGgufTensor(const GgufFile& f, const GgufTensorInfo& info, const std::string& name,
                                      const std::vector<int64_t>& dims, const elf::ModelShape& shape,
                                      bool blocks_only, ThreadPool* pool) {
  auto where = [&] { return absl::StrCat("tensor \"", info.name, "\" (", name, ") in ", f.name()); };
  Tensor t;
  t.shape.assign(info.dims.rbegin(), info.dims.rend());  // ggml order -> PyTorch order
  if (t.shape != dims) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), " has shape ", ShapeStr(t.shape), ", expected ", ShapeStr(dims)));
  }
  const int64_t cols = t.shape.back();
  const int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(info.type, cols);
  if (!row_bytes.ok()) {
    return absl::Status(row_bytes.status().code(), absl::StrCat(where(), ": ", row_bytes.status().message()));
  }
  absl::StatusOr<absl::Span<const uint8_t>> bytes = f.TensorData(info);
  if (!bytes.ok()) return absl::Status(bytes.status().code(), absl::StrCat(where(), ": ", bytes.status().message()));
  if (bytes->size() != *row_bytes * static_cast<uint64_t>(rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": ", bytes->size(), " bytes of data, expected ", *row_bytes * rows));
  }
  // Llama's Q and K rows are stored permuted for interleaved RoPE; undone as
  // transformers' GGUF loader does.
  const int64_t n_head = GgufQkPermutedHeads(shape, name);
  if (n_head > 0 && rows % (2 * n_head) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": ", rows, " rows cannot be split into ", n_head, " heads x 2 halves"));
  }
  // Blocks only (LoadGguf's blocks_only): the file's blocks, no bf16 values, where the
  // kernels read its format and the converter changed no value.
  if (const elf::BlockFormat format = BlockFormatOf(info.type);
      blocks_only && format != elf::BLOCK_FORMAT_NONE && t.shape.size() == 2 &&
      GgufStoredOffset(shape, name) == 0.0f) {
    t.stored = StoredBlocks{format, bytes->data(), static_cast<size_t>(*row_bytes), n_head};
    return t;
  }
  t.data = AlignedBuffer<bf16>(static_cast<size_t>(t.numel()));
  if (t.numel() > 0 && t.data.empty()) return absl::ResourceExhaustedError(absl::StrCat(where(), ": out of memory"));
  const uint8_t* src = bytes->data();
  bf16* dst = t.data.data();
  const GgmlType type = info.type;
  const uint64_t rb = *row_bytes;
  if (const float offset = GgufStoredOffset(shape, name); offset != 0.0f) {
    // Gemma's 1 + w norms (small): w = f32(stored) - 1, then rounded once, as
    // transformers computes it.
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeToF32(type, src + r * rb, cols, row.data());
      for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = F32ToBf16(row[c] - offset);
    }
    return t;  // never kept as blocks: they hold 1 + w
  }
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(cols, 1));
  ParallelChunks(pool, rows, rows_per_chunk, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t hf_row = n_head > 0 ? GgufQkRowToHfRow(r, rows, n_head) : r;
      DequantizeToBf16(type, src + r * rb, cols, dst + hf_row * cols);
    }
  });
  if (const elf::BlockFormat format = BlockFormatOf(type); format != elf::BLOCK_FORMAT_NONE && t.shape.size() == 2) {
    t.stored = StoredBlocks{format, src, static_cast<size_t>(rb), n_head};
  }
  return t;
}

}  // namespace

absl::StatusOr<elf::ModelShape> GgufShape(const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  return ShapeFromGguf(*f, path);
}

absl::StatusOr<std::map<std::string, std::string>> GgufStoredTypes(const std::string& path) {
  DK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  // The types only mean something for a file LoadGguf would load: another
  // architecture's tensors would be matched to this one's names by accident.
  DK_ASSIGN_OR_RETURN(const elf::ModelShape shape, ShapeFromGguf(*f, path));
  std::map<std::string, std::string> types;
  for (const GgufTensorInfo& info : f->tensors()) {
    const std::string name = GgufNameToHf(shape, info.name);
    if (name.empty()) continue;
    auto traits = GetGgmlTypeTraits(info.type);
    types[name] = traits.ok() ? traits->name : absl::StrCat("ggml type ", static_cast<uint32_t>(info.type));
  }
  return types;
}

absl::StatusOr<Weights> LoadGgufTensors(const std::string& path,
                                        const std::function<bool(absl::string_view)>& select,
                                        const BlocksOnly& blocks_only, ThreadPool* pool) {
  DK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> owned, GgufFile::Open(path));
  // Kept mapped while the weights live: the StoredBlocks point into it.
  const std::shared_ptr<const GgufFile> file(std::move(owned));
  const GgufFile* f = file.get();
  DK_ASSIGN_OR_RETURN(elf::ModelShape shape, ShapeFromGguf(*f, path));
  std::map<std::string, std::vector<int64_t>> expected;
  for (auto& [name, dims] : ExpectedTensors(shape)) expected[name] = dims;

  Weights w;
  w.set_source(path);
  w.set_shape(shape);
  for (const GgufTensorInfo& info : f->tensors()) {
    const std::string name = GgufNameToHf(shape, info.name);
    const auto exp = expected.find(name);
    if (exp == expected.end()) continue;  // no HF counterpart (e.g. rope_freqs)
    if (select && !select(name)) continue;
    DK_ASSIGN_OR_RETURN(Tensor t, LoadGgufTensor(*f, info, name, exp->second, shape,
                                                 blocks_only != nullptr && blocks_only(name), pool));
    w.Add(name, std::move(t));
  }
  // Dequantizing touched every page; the blocks are read again (from the page cache)
  // only by an ELF that copies them, so they need not stay resident.
  f->ReleaseResidentPages();
  w.Retain(file);
  return w;
}

absl::StatusOr<Weights> LoadGguf(const std::string& path) { return LoadGguf(path, nullptr); }

absl::StatusOr<Weights> LoadGguf(const std::string& path, const BlocksOnly& blocks_only, ThreadPool* pool) {
  DK_ASSIGN_OR_RETURN(Weights w, LoadGgufTensors(path, nullptr, blocks_only, pool));
  DK_RETURN_IF_ERROR(CheckWeights(w, w.shape()));
  return w;
}

}  // namespace dk::weights
