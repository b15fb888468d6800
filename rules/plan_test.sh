#!/usr/bin/env bash
# decode_plan_test (plan_test.bzl): each ELF's device runs, as elf_dump --summary
# counts them, are the ones the BUILD expects, and its merge ran for the expected
# target.
#   plan_test.sh ELF_DUMP [ELF TARGET RUNS_PER_LAYER MODEL_WIDE]...
set -uo pipefail
elf_dump="$1"
shift
failures=0
while (($# >= 4)); do
  elf="$1" target="$2" per_layer="$3" model_wide="$4"
  shift 4
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
  merge="$(grep '^lineage: merge_multi_launch ' <<<"$summary")"
  if [[ "$merge" != "lineage: merge_multi_launch [$target] applied"* ]]; then
    echo "FAIL: $elf: expected merge_multi_launch applied for target $target, got: ${merge:-no merge in the lineage}" >&2
    failures=$((failures + 1))
  fi
  echo "$elf ($target): $runs"
  echo "  $merge"
done
if (($#)); then
  echo "usage: plan_test.sh ELF_DUMP [ELF TARGET RUNS_PER_LAYER MODEL_WIDE]..." >&2
  exit 2
fi
exit $((failures > 0))
