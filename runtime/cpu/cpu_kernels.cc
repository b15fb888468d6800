#include "runtime/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "elf/elf.h"
#include "formats/weight_format.h"
#include "kernels/gemv/gemm.h"
#include "kernels/gemv/gemv_fused.h"
#include "kernels/gemv/gemv_quant.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_ksplit.h"
#include "kernels/gemv/gemv_x12.h"
#include "kernels/gemv/quantize.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "registry/registry.h"
#include "util/bf16.h"
#include "util/status.h"

namespace dk::runtime::cpu {
namespace {

// ---------------------------------------------------------------- weight layouts

// The format of a weight stored in `layout` and block `format`, as the kernels read
// it: a bf16 layout, or blocks row-major with cols a multiple of the block.
absl::StatusOr<formats::WeightFormat> FormatOf(const std::string& layout, elf::BlockFormat format, size_t cols) {
  if (format == elf::BLOCK_FORMAT_NONE) {
    absl::StatusOr<formats::WeightFormat> f =
        formats::FromRegistry(layout.empty() ? registry::kRowMajor : layout, "");
    if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat("the cpu device has no weight layout '", layout, "'"));
    return *f;
  }
  const std::optional<formats::WeightFormat> blocks = elf::WeightFormatOfBlocks(format);
  if (!blocks) {
    return absl::InvalidArgumentError(absl::StrCat("the cpu device has no block format ", static_cast<int>(format)));
  }
  if (!(layout.empty() || layout == registry::kRowMajor) || cols % formats::BlockElems(*blocks) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the cpu device reads ", elf::BlockFormatName(format),
                                                   " blocks only row_major with cols % ", formats::BlockElems(*blocks),
                                                   " == 0 (layout ", layout, ", cols ", cols, ")"));
  }
  return *blocks;
}

// ---------------------------------------------------------------- run

// Calls call(x, y) with the GEMV's x and y BOs as the types they hold (f32 or bf16).
template <typename Fn>
void WithXY(const LaunchOp& op, const Fn& call) {
  if (op.x_f32) {
    op.y_f32 ? call(op.At<float>(1), op.At<float>(2)) : call(op.At<float>(1), op.At<bf16>(2));
  } else {
    op.y_f32 ? call(op.At<bf16>(1), op.At<float>(2)) : call(op.At<bf16>(1), op.At<bf16>(2));
  }
}

void RunGemv(const LaunchOp& op, ThreadPool* pool) {
  const bf16* w = op.At<bf16>(0);
  const size_t rows = op.p[0], cols = op.p[1];
  WithXY(op, [&](const auto* x, auto* y) {
    if (formats::IsBlockFormat(op.format)) {
      // int8 activations (vpdpbusd where present): the faster strategy for every
      // format (kernels/gemv/gemv_quant.h).
      kernels::QuantGemv(op.format, kernels::QuantActivations::kInt8, op.At<uint8_t>(0), rows, cols, x, y,
                         pool, op.gemv, op.scratch);
    } else if (op.format == formats::WeightFormat::kBf16X12) {
      if constexpr (std::is_same_v<std::decay_t<decltype(*x)>, bf16>) {
        kernels::X12Gemv(op.At<uint8_t>(0), rows, cols, x, y, pool, op.gemv, op.scratch);
      }  // f32 x is refused at load (CheckGemv)
    } else if (op.format == formats::WeightFormat::kBf16Packed) {
      kernels::PackedGemv(w, rows, cols, x, y, pool, op.gemv, op.scratch);
    } else {
      kernels::Gemv(w, rows, cols, x, y, pool, op.gemv, op.scratch);
    }
  });
}
// npu2's K-split GEMV: K in chunks of p[2] columns, the partials added in order.
void RunGemvKSplit(const LaunchOp& op, ThreadPool* pool) {
  WithXY(op, [&](const auto* x, auto* y) {
    kernels::KSplitGemv(op.At<bf16>(0), op.format == formats::WeightFormat::kBf16Packed, op.p[0], op.p[1],
                        op.p[2], x, y, pool, op.scratch);
  });
}
void RunRmsNorm(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNorm(op.At<bf16>(0), op.At<bf16>(1), op.p[0], op.eps, op.At<bf16>(2));
}
void RunRope(const LaunchOp& op, ThreadPool*) {
  bf16* y = op.At<bf16>(3);
  const size_t n = op.p[0] * op.p[1];
  if (op.bo[3] != op.bo[0]) std::memcpy(y, op.At<bf16>(0), n * sizeof(bf16));
  kernels::RopeHalfSplit(y, op.p[0], op.p[1], op.At<bf16>(1), op.At<bf16>(2));
}
void RunSiluMul(const LaunchOp& op, ThreadPool*) {
  kernels::SiluMul(op.At<bf16>(0), op.At<bf16>(1), op.p[0], op.At<bf16>(2));
}
void RunAdd(const LaunchOp& op, ThreadPool*) {
  kernels::Add(op.At<bf16>(0), op.At<bf16>(1), op.p[0], op.At<bf16>(2));
}
void RunRmsNormPlusOne(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNormPlusOne(op.At<bf16>(0), op.At<bf16>(1), op.p[0], op.eps, op.At<bf16>(2));
}
void RunHeadRmsNormPlusOne(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNormHeads(op.At<bf16>(0), op.At<bf16>(1), op.p[0], op.p[1], op.eps, op.At<bf16>(2),
                        /*plus_one=*/true);
}
void RunGeluTanhMul(const LaunchOp& op, ThreadPool*) {
  kernels::GeluTanhMul(op.At<bf16>(0), op.At<bf16>(1), op.p[0], op.At<bf16>(2));
}
void RunHeadRmsNorm(const LaunchOp& op, ThreadPool*) {
  kernels::RmsNormHeads(op.At<bf16>(0), op.At<bf16>(1), op.p[0], op.p[1], op.eps, op.At<bf16>(2));
}
void RunBiasAdd(const LaunchOp& op, ThreadPool*) {
  kernels::AddBias(op.At<float>(0), op.At<bf16>(1), op.p[0], op.At<bf16>(2));
}

// The fused kernels (kernels/gemv/gemv_fused.h); bo[] in the registry's order.
void RunRmsGemv(const LaunchOp& op, ThreadPool* pool) {
  const kernels::FusedWeight w{op.At<void>(2), static_cast<size_t>(op.p[0])};
  void* y = op.At<void>(3);
  kernels::RmsNormGemv(op.format, op.At<bf16>(0), op.At<bf16>(1), op.eps, op.p[1], &w, 1, &y,
                       op.y_f32, pool, op.gemv, op.scratch);
}
void RunRmsGemv3(const LaunchOp& op, ThreadPool* pool) {
  kernels::FusedWeight w[3];
  void* y[3];
  for (int i = 0; i < 3; ++i) {
    w[i] = {op.At<void>(2 + i), static_cast<size_t>(op.p[i])};
    y[i] = op.At<void>(5 + i);
  }
  kernels::RmsNormGemv(op.format, op.At<bf16>(0), op.At<bf16>(1), op.eps, op.p[3], w, 3, y,
                       op.y_f32, pool, op.gemv, op.scratch);
}
void RunRmsGemvSiluMul(const LaunchOp& op, ThreadPool* pool) {
  const size_t rows = op.p[0];
  kernels::RmsNormGemvSiluMul(op.format, op.At<bf16>(0), op.At<bf16>(1), op.eps, op.p[1],
                              {op.At<void>(2), rows}, {op.At<void>(3), rows}, op.At<bf16>(4), pool, op.gemv,
                              op.scratch);
}
void RunGemvAdd(const LaunchOp& op, ThreadPool* pool) {
  kernels::GemvAdd(op.format, op.At<bf16>(0), op.p[1], {op.At<void>(1), static_cast<size_t>(op.p[0])},
                   op.At<bf16>(2), op.At<bf16>(3), pool, op.gemv, op.scratch);
}

// ---------------------------------------------------------------- several rows

// The multi-row forms (kernels/gemv/gemm.h), each row bit-identical to run() at that
// row. op.row is the first row; strides come from the BOs (in elements of T).
template <typename T>
size_t Stride(const LaunchOp& op, int i) {
  return op.bo[i]->row_bytes() / sizeof(T);
}
void RunGemvRows(const LaunchOp& op, size_t first, size_t count, ThreadPool* pool) {
  // f32 x (a baseline's F32 activations) has no multi-row form.
  if (op.x_f32) return RunRowByRow(op, first, count, pool);
  const size_t rows = op.p[0], cols = op.p[1];
  const auto call = [&](auto* y) {
    using Y = std::remove_pointer_t<decltype(y)>;
    kernels::Gemm(op.format, op.At<void>(0), rows, cols, op.At<bf16>(1), Stride<bf16>(op, 1), count, y,
                  Stride<Y>(op, 2), pool, op.gemv, op.scratch);
  };
  op.y_f32 ? call(op.At<float>(2)) : call(op.At<bf16>(2));
}
void RunRmsGemvRows(const LaunchOp& op, size_t, size_t count, ThreadPool* pool) {
  const kernels::FusedWeight w{op.At<void>(2), static_cast<size_t>(op.p[0])};
  void* y = op.At<void>(3);
  const size_t y_stride = op.y_f32 ? Stride<float>(op, 3) : Stride<bf16>(op, 3);
  kernels::RmsNormGemm(op.format, op.At<bf16>(0), Stride<bf16>(op, 0), count, op.At<bf16>(1), op.eps, op.p[1], &w,
                       1, &y, &y_stride, op.y_f32, pool, op.gemv, op.scratch);
}
void RunRmsGemv3Rows(const LaunchOp& op, size_t, size_t count, ThreadPool* pool) {
  kernels::FusedWeight w[3];
  void* y[3];
  size_t y_stride[3];
  for (int i = 0; i < 3; ++i) {
    w[i] = {op.At<void>(2 + i), static_cast<size_t>(op.p[i])};
    y[i] = op.At<void>(5 + i);
    y_stride[i] = op.y_f32 ? Stride<float>(op, 5 + i) : Stride<bf16>(op, 5 + i);
  }
  kernels::RmsNormGemm(op.format, op.At<bf16>(0), Stride<bf16>(op, 0), count, op.At<bf16>(1), op.eps, op.p[3], w,
                       3, y, y_stride, op.y_f32, pool, op.gemv, op.scratch);
}
void RunRmsGemvSiluMulRows(const LaunchOp& op, size_t, size_t count, ThreadPool* pool) {
  const size_t rows = op.p[0];
  kernels::RmsNormGemmSiluMul(op.format, op.At<bf16>(0), Stride<bf16>(op, 0), count, op.At<bf16>(1), op.eps,
                              op.p[1], {op.At<void>(2), rows}, {op.At<void>(3), rows}, op.At<bf16>(4),
                              Stride<bf16>(op, 4), pool, op.gemv, op.scratch);
}
void RunGemvAddRows(const LaunchOp& op, size_t, size_t count, ThreadPool* pool) {
  kernels::GemmAdd(op.format, op.At<bf16>(0), Stride<bf16>(op, 0), count, op.p[1],
                   {op.At<void>(1), static_cast<size_t>(op.p[0])}, op.At<bf16>(2), Stride<bf16>(op, 2),
                   op.At<bf16>(3), Stride<bf16>(op, 3), pool, op.gemv, op.scratch);
}

// ---------------------------------------------------------------- check

absl::Status CheckGemv(const LaunchBinding& b) {
  LaunchOp& op = b.op();
  const int64_t rows = op.p[0], cols = op.p[1];
  DK_RETURN_IF_ERROR(b.Weight("w", rows, cols));
  DK_RETURN_IF_ERROR(b.Expect("x", cols, true));
  DK_RETURN_IF_ERROR(b.Expect("y", rows, true));
  op.x_f32 = b.Bo("x").dtype() == elf::F32;
  op.y_f32 = b.Bo("y").dtype() == elf::F32;
  if (op.format == formats::WeightFormat::kBf16X12 && op.x_f32) {
    return b.Error(absl::StrCat("the ", registry::kPackedPanelX12V1, " GEMV reads bf16 x, BO '", b.Bo("x").name(),
                                "' is F32"));
  }
  return absl::OkStatus();
}
absl::Status CheckGemvKSplit(const LaunchBinding& b) {
  const LaunchOp& op = b.op();
  if (op.p[2] <= 0 || !kernels::KSplitGemvShapeOk(op.p[1], op.p[2])) {
    return b.Error(absl::StrCat("K-split GEMV needs cols (", op.p[1], ") a multiple of k_chunk (", op.p[2],
                                "), itself a multiple of 32"));
  }
  return CheckGemv(b);
}

// The fused kernels with one weight (two for the SiLU gate): bf16 x (and norm,
// residual) of cols (rows) elements.
enum class Fused { kRmsGemv, kGemvAdd, kRmsGemvSiluMul };
absl::Status CheckFused(const LaunchBinding& b, Fused kind) {
  LaunchOp& op = b.op();
  const int64_t rows = op.p[0], cols = op.p[1];
  const bool silu = kind == Fused::kRmsGemvSiluMul;
  DK_RETURN_IF_ERROR(b.Weight(silu ? "w_gate" : "w", rows, cols));
  if (silu) DK_RETURN_IF_ERROR(b.Weight("w_up", rows, cols));
  DK_RETURN_IF_ERROR(b.Expect("x", cols, false));
  DK_RETURN_IF_ERROR(kind == Fused::kGemvAdd ? b.Expect("residual", rows, false) : b.Expect("norm", cols, false));
  DK_RETURN_IF_ERROR(b.Expect("y", rows, kind == Fused::kRmsGemv));
  op.y_f32 = b.Bo("y").dtype() == elf::F32;
  return absl::OkStatus();
}
absl::Status CheckRmsGemv(const LaunchBinding& b) { return CheckFused(b, Fused::kRmsGemv); }
absl::Status CheckGemvAdd(const LaunchBinding& b) { return CheckFused(b, Fused::kGemvAdd); }
absl::Status CheckRmsGemvSiluMul(const LaunchBinding& b) { return CheckFused(b, Fused::kRmsGemvSiluMul); }

absl::Status CheckRmsGemv3(const LaunchBinding& b) {
  LaunchOp& op = b.op();
  const int64_t cols = op.p[3];
  DK_RETURN_IF_ERROR(b.Expect("x", cols, false));
  DK_RETURN_IF_ERROR(b.Expect("norm", cols, false));
  for (int i = 0; i < 3; ++i) {
    DK_RETURN_IF_ERROR(b.Weight(absl::StrCat("w", i), op.p[i], cols));
    DK_RETURN_IF_ERROR(b.Expect(absl::StrCat("y", i), op.p[i], true));
  }
  op.y_f32 = b.Bo("y0").dtype() == elf::F32;
  if (b.Bo("y1").dtype() != b.Bo("y0").dtype() || b.Bo("y2").dtype() != b.Bo("y0").dtype()) {
    return b.Error("outputs y0, y1, y2 differ in dtype");
  }
  return absl::OkStatus();
}

// rmsnorm and Gemma's rmsnorm_plus1.
absl::Status CheckRmsNorm(const LaunchBinding& b) {
  const int64_t n = b.op().p[0];
  DK_RETURN_IF_ERROR(b.Expect("x", n, false));
  DK_RETURN_IF_ERROR(b.Expect("w", n, false));
  return b.Expect("y", n, false);
}
// head_rmsnorm and head_rmsnorm_plus1: [n_heads, head_dim] with one head_dim weight.
absl::Status CheckHeadRmsNorm(const LaunchBinding& b) {
  const int64_t n = b.op().p[0] * b.op().p[1];
  DK_RETURN_IF_ERROR(b.Expect("x", n, false));
  DK_RETURN_IF_ERROR(b.Expect("w", b.op().p[1], false));
  return b.Expect("y", n, false);
}
absl::Status CheckRope(const LaunchBinding& b) {
  const LaunchOp& op = b.op();
  if (op.p[1] % 2) return b.Error("head_dim must be even");
  const int64_t n = op.p[0] * op.p[1];
  DK_RETURN_IF_ERROR(b.Expect("x", n, false));
  DK_RETURN_IF_ERROR(b.Expect("y", n, false));
  DK_RETURN_IF_ERROR(b.Expect("cos", op.p[1] / 2, false));
  return b.Expect("sin", op.p[1] / 2, false);
}
absl::Status CheckBiasAdd(const LaunchBinding& b) {
  const int64_t n = b.op().p[0];
  if (b.Bo("x").dtype() != elf::F32) {
    return b.Error(absl::StrCat("BO '", b.Bo("x").name(), "' has dtype ", elf::DType_Name(b.Bo("x").dtype()),
                                ", expected F32"));
  }
  DK_RETURN_IF_ERROR(b.Expect("x", n, true));
  DK_RETURN_IF_ERROR(b.Expect("bias", n, false));
  return b.Expect("y", n, false);
}
// silu_mul, add, gelu_tanh_mul: every BO holds n bf16.
absl::Status CheckElementwise(const LaunchBinding& b) {
  for (const auto& [param, name] : b.bound()) DK_RETURN_IF_ERROR(b.Expect(param, b.op().p[0], false));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- team

// Kernels that ignore the pool run whole on one member.
TeamRole Single(const LaunchOp&) { return TeamRole::kSingle; }
// The K-split GEMV keeps its own jobs.
TeamRole OwnJobs(const LaunchOp&) { return TeamRole::kNone; }
// The GEMVs, plain or fused, on bf16 weights in any layout make one ParallelRanges
// call and write only their rows' outputs and the calling thread's scratch outside
// it; the quantized ones keep their own jobs.
TeamRole GemvTeam(const LaunchOp& op) {
  return formats::IsBlockFormat(op.format) ? TeamRole::kNone : TeamRole::kRanges;
}

// Which parameters a kernel binds (inputs first, in the order of LaunchOp::bo) comes
// from the registry.
constexpr KernelRow kKernels[] = {
    {"gemv", &RunGemv, &CheckGemv, &GemvTeam, &RunGemvRows},
    {"gemv_ksplit", &RunGemvKSplit, &CheckGemvKSplit, &OwnJobs},
    {"rmsnorm", &RunRmsNorm, &CheckRmsNorm, &Single},
    {"rmsnorm_plus1", &RunRmsNormPlusOne, &CheckRmsNorm, &Single},
    {"head_rmsnorm", &RunHeadRmsNorm, &CheckHeadRmsNorm, &Single},
    {"head_rmsnorm_plus1", &RunHeadRmsNormPlusOne, &CheckHeadRmsNorm, &Single},
    {"rope", &RunRope, &CheckRope, &Single},
    {"silu_mul", &RunSiluMul, &CheckElementwise, &Single},
    {"gelu_tanh_mul", &RunGeluTanhMul, &CheckElementwise, &Single},
    {"add", &RunAdd, &CheckElementwise, &Single},
    {"bias_add", &RunBiasAdd, &CheckBiasAdd, &Single},
    {"rms_gemv", &RunRmsGemv, &CheckRmsGemv, &GemvTeam, &RunRmsGemvRows},
    {"rms_gemv3", &RunRmsGemv3, &CheckRmsGemv3, &GemvTeam, &RunRmsGemv3Rows},
    {"rms_gemv_silu_mul", &RunRmsGemvSiluMul, &CheckRmsGemvSiluMul, &GemvTeam, &RunRmsGemvSiluMulRows},
    {"gemv_add", &RunGemvAdd, &CheckGemvAdd, &GemvTeam, &RunGemvAddRows},
};

}  // namespace

void RunRowByRow(const LaunchOp& op, size_t first, size_t count, ThreadPool* pool) {
  for (size_t r = first; r < first + count; ++r) {
    op.row = r;
    op.kernel->run(op, pool);
  }
}

const KernelRow* FindKernel(const std::string& id) {
  for (const KernelRow& row : kKernels) {
    if (id == row.id) return &row;
  }
  return nullptr;
}

// ---------------------------------------------------------------- LaunchBinding

const elf::BufferObject& LaunchBinding::Bo(const std::string& param) const {
  return program_.bos(bo_index_.at(bound_.at(param)));
}

absl::Status LaunchBinding::Error(const std::string& message) const {
  return absl::InvalidArgumentError(absl::StrCat(op_->where, ": ", message));
}

absl::Status LaunchBinding::Expect(const std::string& param, int64_t elements, bool allow_f32) const {
  const elf::BufferObject& b = Bo(param);
  const bool f32 = b.dtype() == elf::F32;
  if (b.dtype() != elf::BF16 && !(allow_f32 && f32)) {
    return Error(absl::StrCat("BO '", b.name(), "' has dtype ", elf::DType_Name(b.dtype()), ", expected BF16",
                              allow_f32 ? " or F32" : ""));
  }
  const int64_t want = elements * (f32 ? 4 : 2);
  if (b.size_bytes() < want) {
    return Error(absl::StrCat("BO '", b.name(), "' holds ", b.size_bytes(), " bytes, the launch needs ", want));
  }
  return absl::OkStatus();
}

absl::Status LaunchBinding::Weight(const std::string& param, int64_t rows, int64_t cols) const {
  LaunchOp& op = *op_;
  if (variant_.k() != 0 && variant_.k() != cols) {
    return Error(absl::StrCat("symbol is specialized for K=", variant_.k(), " but cols=", cols));
  }
  const elf::BufferObject& w = Bo(param);
  const std::string w_layout = w.layout().empty() ? std::string(registry::kRowMajor) : w.layout();
  if (w_layout != variant_.layout()) {
    return Error(absl::StrCat("weight BO '", w.name(), "' has layout ", w_layout, " but the kernel reads ",
                              variant_.layout()));
  }
  if (elf::BlockFormatName(w.block_format()) != variant_.block_format()) {
    return Error(absl::StrCat("weight BO '", w.name(), "' has block format '", elf::BlockFormatName(w.block_format()),
                              "' but the kernel reads '", variant_.block_format(), "'"));
  }
  absl::StatusOr<formats::WeightFormat> format = FormatOf(w_layout, w.block_format(), cols);
  if (!format.ok()) {
    if (w.block_format() == elf::BLOCK_FORMAT_NONE) return format.status();
    return Error(std::string(format.status().message()));
  }
  op.format = *format;
  DK_ASSIGN_OR_RETURN(const size_t need, WeightLayoutBytes(w_layout, w.block_format(), rows, cols));
  if (w.dtype() != elf::BF16 || w.size_bytes() < static_cast<int64_t>(need)) {
    return Error(absl::StrCat("weight BO '", w.name(), "' must be BF16 of at least ", need, " bytes"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- layouts

absl::StatusOr<size_t> WeightLayoutBytes(const std::string& layout, elf::BlockFormat format, size_t rows,
                                         size_t cols) {
  DK_ASSIGN_OR_RETURN(const formats::WeightFormat f, FormatOf(layout, format, cols));
  DK_ASSIGN_OR_RETURN(const int64_t bytes, formats::TensorBytes(f, rows, cols));
  return static_cast<size_t>(bytes);
}

namespace {
// memcpy over the pool in 2 MiB pieces: at load the destination is fresh memory, whose
// first touch (the kernel zeroing each page) takes most of a copy's time, and that
// goes as many times faster as there are threads touching.
void CopyBytes(const void* src, size_t bytes, void* dst, ThreadPool* pool) {
  constexpr size_t kPiece = size_t{2} << 20;
  ParallelRanges(pool, (bytes + kPiece - 1) / kPiece, [&](size_t p0, size_t p1, int) {
    const size_t b = p0 * kPiece, e = std::min(bytes, p1 * kPiece);
    std::memcpy(static_cast<uint8_t*>(dst) + b, static_cast<const uint8_t*>(src) + b, e - b);
  });
}
}  // namespace

absl::Status PackWeightLayout(const std::string& layout, elf::BlockFormat format, const void* src, size_t rows,
                              size_t cols, void* out, ThreadPool* pool, bool out_zeroed) {
  DK_ASSIGN_OR_RETURN(const formats::WeightFormat f, FormatOf(layout, format, cols));
  if (formats::IsBlockFormat(f) && !kernels::CanQuantizeWeights(f)) {
    const std::string name = elf::BlockFormatName(format);
    return absl::InvalidArgumentError(absl::StrCat("the cpu device reads ", name,
                                                   " blocks only as a weights file stores them (blocks_as_stored); "
                                                   "it does not quantize bf16 weights to ", name));
  }
  const bf16* w = static_cast<const bf16*>(src);
  switch (f) {
    case formats::WeightFormat::kBf16RowMajor: CopyBytes(src, rows * cols * sizeof(bf16), out, pool); break;
    case formats::WeightFormat::kBf16Packed: kernels::PackGemvWeights(w, rows, cols, static_cast<bf16*>(out)); break;
    case formats::WeightFormat::kBf16X12:
      kernels::PackX12GemvWeights(w, rows, cols, static_cast<uint8_t*>(out), pool, out_zeroed);
      break;
    default: kernels::QuantizeWeights(f, w, rows, cols, static_cast<uint8_t*>(out)); break;
  }
  return absl::OkStatus();
}

}  // namespace dk::runtime::cpu
