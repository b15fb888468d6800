#!/usr/bin/env bash
# elf_dump on real ELFs of a tiny chain: the text dump, --summary, --diff of two
# stages, and usage errors.
#   elf_dump_test.sh ELF_DUMP DECODE ALIGNED BO OPT Q8
set -uo pipefail
elf_dump="$1" decode="$2" aligned="$3" bo="$4" opt="$5" q8="$6"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect() {  # expect NAME OUTPUT LINE: OUTPUT contains LINE (a fixed string)
  grep -qF -- "$3" <<<"$2" || fail "$1: no '$3' in:"$'\n'"$2"
}

out="$("$elf_dump" "$opt")" || fail "dump exited $?"
expect dump "$out" 'name: "L0.rms_gemv_rope"'
expect dump "$out" 'pass: "merge_multi_launch"'

out="$("$elf_dump" --summary "$opt")" || fail "--summary exited $?"
expect summary "$out" "launch groups (device runs per token): 3, launches: 18, host steps: 5"
expect summary "$out" "BOs: 4 WRITE, 13 STATIC, 12 INTERMEDIATE, 6 OUTPUT"
expect summary "$out" "device runs: 2 per layer (1 layer) + 1 model-wide = 3 per token"
out="$("$elf_dump" --summary "$decode")" || fail "--summary exited $?"
expect summary "$out" "device runs: 14 per layer (1 layer) + 2 model-wide = 16 per token"

out="$("$elf_dump" --diff "$bo" "$opt")" || fail "--diff exited $?"
expect diff "$out" "+++ $opt (baseline -> layout_alignment -> buffer_object_reuse -> merge_multi_launch)"
expect diff "$out" "lineage added: merge_multi_launch [cpu] applied: 18 -> 3 device runs per token"
expect diff "$out" "runs per token: 18 -> 3"
expect diff "$out" "merged: L0.rms_gemv_rope <- L0.attn_norm + L0.q_proj + L0.k_proj + L0.v_proj + L0.rope_q + L0.rope_k"
expect diff "$out" "merged: lm_head <- final_norm + lm_head.part0 + lm_head.part1 + lm_head.part2"

out="$("$elf_dump" --diff "$aligned" "$bo")" || fail "--diff exited $?"
expect diff "$out" "L0.q_proj.w: WRITE -> STATIC"
expect diff "$out" "L0.q_proj.y: OUTPUT -> INTERMEDIATE"

out="$("$elf_dump" --diff "$decode" "$aligned")" || fail "--diff exited $?"
expect diff "$out" "L0.down_proj.w: row_major -> packed_panel_v1"
expect diff "$out" "dk_gemv_bf16_rowmajor -> dk_gemv_bf16_packed: 10 launches"

# The quantized stage: block formats in the summary and the diff.
out="$("$elf_dump" --summary "$opt")" || fail "--summary exited $?"
expect summary "$out" "weight BOs: 13 bf16 ("  # 10 GEMV weights + 3 norms
out="$("$elf_dump" --summary "$q8")" || fail "--summary exited $?"
expect summary "$out" "weight BOs: 6 bf16 ("  # 3 LM-head partitions + 3 norms
expect summary "$out" ", 7 q8_0 ("
out="$("$elf_dump" --diff "$opt" "$q8")" || fail "--diff exited $?"
expect diff "$out" "L0.down_proj.w: packed_panel_v1 -> row_major q8_0"
expect diff "$out" "dk_gemv_bf16_packed -> dk_gemv_q8_0_rowmajor: 7 launches"
expect diff "$out" "lineage added: quantize_weights [cpu] applied: 7 GEMV weights quantized to q8_0"

out="$("$elf_dump" --diff "$opt" "$opt")" || fail "--diff exited $?"
expect "diff of itself" "$out" "no differences"

"$elf_dump" --diff "$opt" >/dev/null 2>&1
[[ $? == 2 ]] || fail "--diff with one file should exit 2"
out="$("$elf_dump" --diff "$opt" /nonexistent.elf 2>&1)"
[[ $? == 1 ]] || fail "--diff with a missing file should exit 1"
expect "missing file" "$out" "/nonexistent.elf"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo PASS
