#!/usr/bin/env bash
# decode_plan_test (plan_test.bzl): each ELF's device runs per token and per prompt
# chunk (its prefill plan), as elf_dump --summary counts them, are the ones the BUILD
# expects, and its merge ran for the expected target.
#   plan_test.sh ELF_DUMP [ELF TARGET RUNS_PER_LAYER MODEL_WIDE PREFILL_RUNS_PER_LAYER]...
set -uo pipefail
elf_dump="$1"
shift
failures=0
while (($# >= 5)); do
  elf="$1" target="$2" per_layer="$3" model_wide="$4" prefill_per_layer="$5"
  shift 5
  if ! summary="$("$elf_dump" --summary "$elf")"; then
    echo "FAIL: elf_dump --summary $elf exited non-zero" >&2
    failures=$((failures + 1))
    continue
  fi
  runs="$(grep '^device runs: ' <<<"$summary")"
  want="device runs: $per_layer per layer ("
  if [[ "$runs" != "$want"* || "$runs" != *" + $model_wide model-wide = "* ]]; then
    echo "FAIL: $elf: expected $per_layer device runs per layer + $model_wide model-wide, got: ${runs:-no runs line}" >&2
    failures=$((failures + 1))
  fi
  # The prompt runs through the same model-wide runs (the LM head, for its last row).
  prefill="$(grep '^prefill device runs: ' <<<"$summary")"
  if [[ "$prefill" != "prefill device runs: $target, "*": $prefill_per_layer per layer ("* ||
        "$prefill" != *" + $model_wide model-wide = "*" per chunk" ]]; then
    echo "FAIL: $elf: expected a $target prefill of $prefill_per_layer device runs per layer + $model_wide model-wide, got: ${prefill:-no prefill line}" >&2
    failures=$((failures + 1))
  fi
  merge="$(grep '^lineage: merge_multi_launch ' <<<"$summary")"
  if [[ "$merge" != "lineage: merge_multi_launch [$target] applied"* ]]; then
    echo "FAIL: $elf: expected merge_multi_launch applied for target $target, got: ${merge:-no merge in the lineage}" >&2
    failures=$((failures + 1))
  fi
  echo "$elf ($target): $runs"
  echo "  $prefill"
  echo "  $merge"
done
if (($#)); then
  echo "usage: plan_test.sh ELF_DUMP [ELF TARGET RUNS_PER_LAYER MODEL_WIDE PREFILL_RUNS_PER_LAYER]..." >&2
  exit 2
fi
exit $((failures > 0))
