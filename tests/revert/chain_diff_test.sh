#!/usr/bin/env bash
# Usage: chain_diff_test.sh ORIGINAL_BUILD REVERTED_BUILD
# Checks that the chain lines (one rule per line: decode_elf and the optimization
# rules) of REVERTED_BUILD are those of ORIGINAL_BUILD with exactly one rule line
# deleted and the next rule line's src pointed past it (at the deleted rule's src),
# nothing else changed.
set -euo pipefail
# A chain line is a rule written on one line, `rule(name = ...`; a rule spread over
# several lines (tests/profile's npu2 plan) is not a stage of the chain.
chain() { grep -E '^(decode_elf|layout_alignment|buffer_object_reuse|merge_multi_launch)\(name = ' "$1" || true; }
src_of() { sed -nE 's/.*[(, ]src = "([^"]*)".*/\1/p' <<<"$1"; }
name_of() { sed -nE 's/^[a-z_]+\(name = "([^"]*)".*/\1/p' <<<"$1"; }
fail() {
  echo "FAIL: $*" >&2
  { echo "--- chain of $orig"; chain "$orig"; echo "--- chain of $copy"; chain "$copy"; } >&2
  exit 1
}
orig="$1"
copy="$2"
mapfile -t a < <(chain "$orig")
mapfile -t b < <(chain "$copy")
(( ${#a[@]} >= 2 )) || fail "$orig has no chain to revert (${#a[@]} chain lines)"
(( ${#b[@]} == ${#a[@]} - 1 )) || fail "$copy has ${#b[@]} chain lines, expected $(( ${#a[@]} - 1 ))"
# The deleted line: the first position where the two differ (b is a minus that line).
d=0
while (( d < ${#b[@]} )) && [[ "${a[d]}" == "${b[d]}" ]]; do d=$(( d + 1 )); done
deleted="${a[d]}"
(( d > 0 )) || fail "the deleted line is the baseline: $deleted"
(( d + 1 < ${#a[@]} )) || fail "the deleted line is the last stage (nothing to repoint): $deleted"
old="${a[d + 1]}"
new="${b[d]}"
want="${old/src = \"$(src_of "$old")\"/src = \"$(src_of "$deleted")\"}"
[[ "$(src_of "$old")" == ":$(name_of "$deleted")" ]] || fail "the line after the deleted one did not use it as src: $old"
[[ "$new" == "$want" ]] || fail "expected the next line repointed to '$want', got '$new'"
for (( i = d + 1; i < ${#b[@]}; i++ )); do
  [[ "${a[i + 1]}" == "${b[i]}" ]] || fail "line changed besides the revert: '${a[i + 1]}' -> '${b[i]}'"
done
echo "PASS: -$deleted"
echo "      -$old"
echo "      +$new"
