#!/usr/bin/env bash
# verify --model FILE: every stage of the chain a model file alone builds, against HF
# goldens matched by the weights digest, or (no --goldens) against the chain's own
# baseline, saying so. A broken model fails; another model's goldens are refused.
#   verify_model_test.sh VERIFY MODEL.gguf GOLDENS.json TOKENIZER.json TINY_CONFIG.json
set -uo pipefail
verify="$1" gguf="$2" goldens="$3" tok="$4" tiny_config="$5"
source tools/testing/cli_expect.sh
tool="$verify"
cache=(--cache_dir "$TEST_TMPDIR/cache")
tiny=(--model "$tiny_config" --tokenizer "$tok" --max_context 256 "${cache[@]}")

# No goldens: every stage against the baseline, and the report says the reference is not HF.
out="$("$verify" "${tiny[@]}" 2>&1)" || fail "tiny model without goldens failed: $out"
grep -qF "reference: this chain's own baseline stage (no --goldens), not HF transformers" <<<"$out" ||
  fail "the report does not name its reference: $out"
for stage in decode decode_aligned decode_bo decode_opt decode_fused decode_x12 decode_q8 decode_spec; do
  grep -qx "stage $stage: PASS" <<<"$out" || fail "no 'stage $stage: PASS' in: $out"
done

# HF goldens of the trained SmolLM2 GGUF: a stage passes, and fails once the model is broken.
out="$("$verify" --model "$gguf" --goldens "$goldens" --stage decode_x12 "${cache[@]}" 2>&1)" ||
  fail "decode_x12 against HF goldens failed: $out"
grep -qx "stage decode_x12: PASS" <<<"$out" || fail "no 'stage decode_x12: PASS' in: $out"
expect_exit "last layer dropped" 1 "stage decode_x12: FAIL" --model "$gguf" --goldens "$goldens" \
  --stage decode_x12 --test_mutation drop_last_layer "${cache[@]}"
expect_exit "another model's goldens" 1 "goldens from other weights are meaningless" "${tiny[@]}" --goldens "$goldens"
expect_exit "--model with --parent_elf" 2 "--parent_elf goes with --elf" "${tiny[@]}" --parent_elf x.elf
expect_exit "--model with --elf" 2 "give --model or --elf, not both" "${tiny[@]}" --elf x.elf
finish
