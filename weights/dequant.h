// Conversions of stored tensor elements to f32 / bf16, matching the reference
// tooling bit for bit:
//  - f16 -> f32 is exact (subnormals, inf and NaN included);
//  - ggml block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K ... Q6_K)
//    are dequantized to f32 as gguf-py's numpy code does (gguf/quants.py, gguf-py
//    0.19.0): e.g. Q8_0 x = d*q; Q4_1 x = d*q + m; Q4_K x = (d*sc)*q - dmin*mn, each
//    product and sum rounded to f32 separately, never fused (the K-quant formulas,
//    and why their products are exact, are in weights/dequant_kquant.cc); then
//    rounded to bf16 with round-to-nearest-even as torch's .to(torch.bfloat16) does.
//    Every tensor of a real Q4_K_M file is checked against gguf-py by digest
//    (weights/dequant_gguf_file_test.cc).
//  - Other ggml types (IQ*, TQ*, Q8_1, Q8_K, the integer types, ...) are refused:
//    GgmlRowBytes answers Unimplemented naming the type.
// This library is built with -ffp-contract=off so that no FMA can change a result.
//
// Thread-safety: all functions are pure; safe to call concurrently.
#ifndef DK_WEIGHTS_DEQUANT_H_
#define DK_WEIGHTS_DEQUANT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "util/bf16.h"
#include "weights/gguf.h"

namespace dk::weights {

// IEEE binary16 bits -> f32, exactly.
float F16ToF32(uint16_t h);

// True for the ggml types the loaders can dequantize: F32, F16, BF16, Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
bool IsSupportedGgmlType(GgmlType type);

// The bytes `n` elements of `type` occupy (ggml's block geometry, GetGgmlTypeTraits);
// InvalidArgument when `n` is not a multiple of the block size (32, or 256 for the
// K-quants), Unimplemented naming the type for an unsupported one.
absl::StatusOr<uint64_t> GgmlRowBytes(GgmlType type, int64_t n);

// Dequantizes `n` elements (`src` holds GgmlRowBytes(type, n) bytes). The type must
// be supported and `n` a multiple of its block size (checked by GgmlRowBytes first;
// violating that is a programmer error).
void DequantizeToF32(GgmlType type, const uint8_t* src, int64_t n, float* out);
void DequantizeToBf16(GgmlType type, const uint8_t* src, int64_t n, bf16* out);

// llama.cpp's converter stores the rows of attn_q / attn_k permuted for interleaved
// RoPE: HF row (h, j, i) of a [n_head, 2, rows/(2*n_head)] row index is stored at
// GGUF row (h, i, j). Returns the HF row that GGUF row `gguf_row` holds. `rows`
// must be a multiple of 2 * n_head.
int64_t GgufQkRowToHfRow(int64_t gguf_row, int64_t rows, int64_t n_head);
// Its inverse: the GGUF row that holds HF row `hf_row`.
int64_t HfRowToGgufQkRow(int64_t hf_row, int64_t rows, int64_t n_head);

}  // namespace dk::weights

#endif  // DK_WEIGHTS_DEQUANT_H_
