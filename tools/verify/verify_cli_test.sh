#!/usr/bin/env bash
# verify's answers to bad command lines (issue 15): each missing flag named (exit 2),
# a directory or a missing file said to be one (exit 1).
#   verify_cli_test.sh VERIFY TINY.elf
set -uo pipefail
verify="$1" elf="$2"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_exit() {  # expect_exit NAME CODE MESSAGE ARGS...
  local name="$1" code="$2" message="$3"
  shift 3
  local out rc
  out="$("$verify" "$@" 2>&1)"
  rc=$?
  [[ $rc == "$code" ]] || fail "$name: exit $rc, expected $code; output:"$'\n'"$out"
  grep -qF -- "$message" <<<"$out" || fail "$name: no '$message' in:"$'\n'"$out"
}
expect_exit "no --elf" 2 "verify: --elf is required" --goldens g.json
expect_exit "no --goldens" 2 "verify: --goldens is required" --elf "$elf"
expect_exit "--prompts 0" 2 "--prompts 0 is outside [1, " --elf "$elf" --goldens g.json --prompts 0
expect_exit "--elf a directory" 1 "--elf: $TEST_TMPDIR is a directory, not a file" \
  --elf "$TEST_TMPDIR" --goldens g.json
expect_exit "missing --goldens" 1 "--goldens: $TEST_TMPDIR/none.json does not exist" \
  --elf "$elf" --goldens "$TEST_TMPDIR/none.json"
if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo PASS
