// Test fixtures shared by the ELF tests: a one-layer toy program and its
// quantized variant, and the check that validation refuses a program.
#ifndef DK_ELF_TOY_PROGRAM_H_
#define DK_ELF_TOY_PROGRAM_H_

#include <string>

#include "elf/elf.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace dk::elf {

// A one-layer toy program: an RMSNorm + GEMV group, a host attention step, and an
// LM-head group.
inline Program ToyProgram() {
  Program p;
  const bool ok = google::protobuf::TextFormat::ParseFromString(R"pb(
    schema_version: 2
    model { name: "toy" n_layers: 1 hidden: 64 n_heads: 2 n_kv_heads: 1 head_dim: 32
            ffn: 128 vocab: 100 rms_eps: 1e-5 rope_theta: 10000 max_context: 16 }
    weights_digest: "sha256:00"
    values { name: "h" shape: 64 dtype: BF16 }
    values { name: "hn" shape: 64 dtype: BF16 }
    values { name: "logits" shape: 100 dtype: F32 }
    bos { name: "x" shape: 64 dtype: BF16 category: WRITE layer: -1 host_value: "h"
          size_bytes: 128 }
    bos { name: "norm.w" shape: 64 dtype: BF16 category: WRITE layer: 0
          weight_tensor: "model.layers.0.input_layernorm.weight" size_bytes: 128 }
    bos { name: "xn" shape: 64 dtype: BF16 category: OUTPUT layer: 0 host_value: "hn"
          size_bytes: 128 }
    bos { name: "q.w" shape: [64, 64] dtype: BF16 category: WRITE layer: 0 size_bytes: 8192 }
    bos { name: "head.w" shape: [100, 64] dtype: BF16 layout: "packed_panel_v1"
          category: STATIC layer: -1 size_bytes: 13312 }
    bos { name: "logits" shape: 100 dtype: F32 category: OUTPUT layer: -1 size_bytes: 400
          host_value: "logits" }
    steps { group { name: "layer0.norm" entry_symbol: "layer0_norm" layer: 0
      launches { kernel_symbol: "dk_rmsnorm_bf16"
                 bindings { param: "x" bo: "x" } bindings { param: "w" bo: "norm.w" }
                 bindings { param: "y" bo: "xn" } params { key: "n" value: 64 } } } }
    steps { host { kind: ATTENTION layer: 0 bindings { param: "q" value: "hn" } } }
    steps { group { name: "lm_head" entry_symbol: "lm_head" layer: -1
      launches { kernel_symbol: "dk_gemv_bf16_packed"
                 bindings { param: "w" bo: "head.w" } bindings { param: "x" bo: "xn" }
                 bindings { param: "y" bo: "logits" }
                 params { key: "rows" value: 100 } params { key: "cols" value: 64 } } } }
    lineage { pass: "baseline" target: "cpu" applied: true reason: "straight port" }
  )pb", &p);
  EXPECT_TRUE(ok);
  return p;
}
inline void ExpectInvalid(const Program& p, const std::string& needle) {
  const absl::Status s = ValidateProgram(p);
  ASSERT_FALSE(s.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  // Every reader refuses it too (WriteElf validates; ReadElf of such bytes is tested
  // through the tools' sh_tests).
  EXPECT_FALSE(WriteElf(p).ok());
}
// ToyProgram with its LM head in Q8_0 blocks, read by the Q8_0 GEMV.
inline Program QuantizedToy() {
  Program p = ToyProgram();
  BufferObject* w = p.mutable_bos(4);
  w->set_layout("row_major");
  w->set_weight_tensor("model.embed_tokens.weight");
  w->set_block_format(Q8_0);
  w->set_size_bytes(100 * (64 / 32) * 34);  // rows x blocks per row x 34 bytes
  p.mutable_steps(2)->mutable_group()->mutable_launches(0)->set_kernel_symbol("dk_gemv_q8_0_rowmajor");
  return p;
}

}  // namespace dk::elf

#endif  // DK_ELF_TOY_PROGRAM_H_
