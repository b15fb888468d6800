#!/bin/bash
# verify_fails_test.sh VERIFY MESSAGE ARGS...: passes when `VERIFY ARGS` exits 1 and
# prints MESSAGE (a line, e.g. 'verify: FAIL', or part of the refusal); prints which
# checks failed. Shows that a new shape's verify can fail.
set -u
tool="$1" message="$2"
shift 2
out="$("$tool" "$@" 2>&1)"
rc=$?
printf '%s\n' "$out"
if [[ $rc != 1 ]] || ! grep -qF -- "$message" <<<"$out"; then
  echo "NOT REFUSED: verify exited $rc (want 1 with '$message')"
  exit 1
fi
echo "refused as expected: $(grep -oE '^(gate|numeric|same tokens as parent): FAIL' <<<"$out" | paste -sd, -)"
