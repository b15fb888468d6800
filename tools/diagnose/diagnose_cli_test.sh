#!/usr/bin/env bash
# diagnose and profile name the missing flag (exit 2); diagnose says a directory is
# one (exit 1) (issue 15).
#   diagnose_cli_test.sh DIAGNOSE PROFILE TINY.elf
set -uo pipefail
diagnose="$1" profile="$2" elf="$3"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_exit() {  # expect_exit NAME CODE MESSAGE TOOL ARGS...
  local name="$1" code="$2" message="$3"
  shift 3
  local out rc
  out="$("$@" 2>&1)"
  rc=$?
  [[ $rc == "$code" ]] || fail "$name: exit $rc, expected $code; output:"$'\n'"$out"
  grep -qF -- "$message" <<<"$out" || fail "$name: no '$message' in:"$'\n'"$out"
}
expect_exit "diagnose no --elf" 2 "diagnose: --elf is required" "$diagnose" --hf h.json
expect_exit "diagnose no --weights" 2 "diagnose: --weights is required" "$diagnose" --elf "$elf" --hf h.json
expect_exit "diagnose no --hf" 2 "diagnose: --hf is required" "$diagnose" --elf "$elf" --weights synthetic
expect_exit "diagnose --elf a directory" 1 "--elf: $TEST_TMPDIR is a directory, not a file" \
  "$diagnose" --elf "$TEST_TMPDIR" --weights synthetic --hf h.json
expect_exit "diagnose missing --hf" 1 "--hf: $TEST_TMPDIR/none.json does not exist" \
  "$diagnose" --elf "$elf" --weights synthetic --hf "$TEST_TMPDIR/none.json"
expect_exit "profile no --manifest" 2 "--manifest is required" "$profile" --tokenizer t.json
expect_exit "profile no --tokenizer" 2 "--tokenizer is required" "$profile" --manifest m.json
if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo PASS
