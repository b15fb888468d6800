// Block dequantizers for the ggml formats after Q8_0 / Q4_0 / Q4_1: Q5_0 and Q5_1
// (32 elements) and the K-quants Q2_K ... Q6_K (256-element super-blocks), each
// writing one block's elements as f32 in gguf-py's operation order (weights/dequant.h
// says why). Private to the weights library; weights/dequant.h is the interface.
//
// Thread-safety: pure functions.
#ifndef DK_WEIGHTS_DEQUANT_KQUANT_H_
#define DK_WEIGHTS_DEQUANT_KQUANT_H_

#include <cstdint>

namespace dk::weights::internal {

// One block at `b` (any address; the ggml_blocks.h structs are bytes only) -> its
// 32 (Q5_0, Q5_1) or 256 (K-quants) elements at `out`.
void DequantQ5_0Block(const uint8_t* b, float* out);
void DequantQ5_1Block(const uint8_t* b, float* out);
void DequantQ2_KBlock(const uint8_t* b, float* out);
void DequantQ3_KBlock(const uint8_t* b, float* out);
void DequantQ4_KBlock(const uint8_t* b, float* out);
void DequantQ5_KBlock(const uint8_t* b, float* out);
void DequantQ6_KBlock(const uint8_t* b, float* out);

}  // namespace dk::weights::internal

#endif  // DK_WEIGHTS_DEQUANT_KQUANT_H_
