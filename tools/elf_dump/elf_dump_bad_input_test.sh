#!/usr/bin/env bash
# elf_dump refuses ELFs whose integer fields are out of range (issue 15), naming the
# field and the BO, with exit 1; a directory is said to be one.
#   elf_dump_bad_input_test.sh ELF_DUMP GOOD BAD_HOST_OFFSET BAD_ROW_BEGIN BAD_VOCAB BAD_LAYERS
set -uo pipefail
elf_dump="$1" good="$2"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# expect_refused NAME MESSAGE ARGS...: elf_dump ARGS exits 1, prints MESSAGE, and nothing on stdout.
expect_refused() {
  local name="$1" message="$2"
  shift 2
  local out err rc
  out="$("$elf_dump" "$@" 2>"$TEST_TMPDIR/err")"
  rc=$?
  err="$(cat "$TEST_TMPDIR/err")"
  [[ $rc == 1 ]] || fail "$name: exit $rc, expected 1; stderr:"$'\n'"$err"
  grep -qF -- "$message" <<<"$err" || fail "$name: no '$message' in:"$'\n'"$err"
  [[ -z "$out" ]] || fail "$name: printed a program for an invalid ELF"
  [[ "$(grep -c . <<<"$err")" == 1 ]] || fail "$name: expected one line of error, got:"$'\n'"$err"
}

"$elf_dump" --summary "$good" >/dev/null || fail "the valid ELF is refused"
for flags in "" "--summary"; do
  # shellcheck disable=SC2086
  expect_refused "host_offset $flags" 'at host_offset -4096 does not lie inside host value' $flags "$3"
  # shellcheck disable=SC2086
  expect_refused "row_begin $flags" 'has an empty or negative weight row range [weight_row_begin -8' $flags "$4"
  # shellcheck disable=SC2086
  expect_refused "vocab $flags" 'model "tiny": vocab 2147483647 exceeds the limit' $flags "$5"
  # shellcheck disable=SC2086
  expect_refused "layers $flags" 'model "tiny": n_layers 2147483647 exceeds the limit' $flags "$6"
done
expect_refused "diff" 'at host_offset -4096' --diff "$good" "$3"
expect_refused "directory" "decode ELF $TEST_TMPDIR is a directory, not a file" "$TEST_TMPDIR"
expect_refused "/dev/zero" "decode ELF /dev/zero is not a regular file" /dev/zero

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo PASS
