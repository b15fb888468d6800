// Test only: deliberately broken candidates for tests/mutations, which prove that the
// verify test (top-5 gate + numeric check) catches real bugs. The verify tool applies
// one with --test_mutation=NAME AFTER the weights digest was checked against the
// goldens, so the candidate runs on broken weights or broken host ops while the
// goldens stay HF's. Never used outside those tests.
//
//   k_no_rope_last_layer   K of the last layer written to the KV cache without RoPE
//   drop_last_layer        the last decoder layer removed (its o_proj and down_proj zero:
//                          h_out = h_in exactly)
//   rope_unscaled          RoPE without Llama-3 scaling (models that have it)
//   rope_theta_10000       RoPE with theta 10000 instead of the model's (models without
//                          scaling; the Llama-2 default, a classic config bug)
//   swap_kv_heads          KV heads 0 and 1 swapped in the last layer (rows of k_proj
//                          and v_proj)
//   noise_1pct             1% noise on one projection: layer 0's v_proj + N(0, (0.01 *
//                          rms)^2), deterministic
//   attention_off_by_one   attention over positions [0, p) instead of [0, p]: the newest
//                          K/V (just written) left out, except at position 0
//   no_qkv_bias            the q/k/v projection biases dropped (zero) in every layer
//                          (models with attention_bias)
//   no_qk_norm             the QK-norm launches (head_rmsnorm) dropped from the program,
//                          RoPE reading the raw q / k (models with qk_norm; a merged
//                          stage, where those values are INTERMEDIATE BOs)
//   no_gelu                Gemma's GELU-tanh * up launches run as SiLU * up
//   no_norm_plus_one       Gemma's (1 + w) norms run as Llama's w norms
//   no_post_ffn_norm       Gemma's post_feedforward_layernorm launches dropped (a merged stage)
//   no_embedding_scale     the embedding row not scaled by sqrt(hidden)
//   no_sliding_window      every layer attends to all positions (sliding layers too)
//   no_local_rope          sliding layers' RoPE with the global theta
//   qk_norm_weights_one    the QK-norm applied with its weights ignored (every q_norm /
//                          k_norm weight the identity scale: 1, or 0 for (1 + w) norms)
//   no_post_attention_norm Gemma's post_attention_layernorm launches dropped (a merged stage)
//   no_pre_ffn_norm        Gemma's pre_feedforward_layernorm launches dropped (a merged stage)
//   rope_bases_swapped     the global and the sliding layers' RoPE bases swapped
//
// Thread-safety: the host-op wrappers are driven by one thread, like the host ops.
#ifndef DK_VERIFY_MUTATIONS_H_
#define DK_VERIFY_MUTATIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "elf/program.pb.h"
#include "runtime/cpu/session.h"
#include "weights/weights.h"

namespace dk::verify {

// The names above.
std::vector<std::string> MutationNames();

// Applies mutation `name` to the candidate `*program`: changes `*weights` or the
// program in place and/or sets `*wrap_host`. InvalidArgument for an unknown name or one
// that does not apply to the model (rope_unscaled on a model without scaling).
absl::Status ApplyMutation(const std::string& name, elf::Program* program, weights::Weights* weights,
                           runtime::HostOpsWrapper* wrap_host);

}  // namespace dk::verify

#endif  // DK_VERIFY_MUTATIONS_H_
