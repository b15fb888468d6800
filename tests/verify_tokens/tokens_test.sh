#!/usr/bin/env bash
# verify with the build's greedy tokens files against verify decoding itself.
#   tokens_test.sh VERIFY PARENT.elf CHILD.elf PARENT_TOKENS.json CHILD_TOKENS.json GOLDENS.json
set -uo pipefail
verify="$1" parent_elf="$2" elf="$3" parent_tokens="$4" tokens="$5" goldens="$6"
common=(--elf "$elf" --parent_elf "$parent_elf" --goldens "$goldens" --weights synthetic --prompts 2
        --gemv_tune=false)
tmp="$TEST_TMPDIR"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# run NAME ARGS...: verify's output in $tmp/NAME.txt, its exit status in $rc.
run() {
  local name="$1"
  shift
  "$verify" "${common[@]}" "$@" >"$tmp/$name.txt" 2>&1
  rc=$?
}

# 1. Decoding or reading the tokens: the same report, line for line, but for the two
# lines naming the files read.
run decoded
[[ $rc == 0 ]] || fail "verify (decoding) exited $rc: $(cat "$tmp/decoded.txt")"
run read --tokens "$tokens" --parent_tokens "$parent_tokens"
[[ $rc == 0 ]] || fail "verify (reading the tokens) exited $rc: $(cat "$tmp/read.txt")"
notes="$(grep -c 'were read from .* (made by the build: verify --write_tokens)$' "$tmp/read.txt")"
[[ $notes == 2 ]] || fail "expected 2 lines naming the tokens files read, got $notes"
grep -v 'were read from .* (made by the build' "$tmp/read.txt" | diff "$tmp/decoded.txt" - >&2 ||
  fail "the reports differ (above)"
grep -qx 'same tokens as parent: PASS' "$tmp/read.txt" || fail "no parent comparison in: $(cat "$tmp/read.txt")"

# 2. A file made from another ELF is refused, as --tokens or as --parent_tokens.
run swapped --tokens "$parent_tokens"
[[ $rc == 1 ]] && grep -q "stale or another stage's file" "$tmp/swapped.txt" ||
  fail "the parent's tokens as --tokens: exit $rc: $(cat "$tmp/swapped.txt")"
run swapped_parent --parent_tokens "$tokens"
[[ $rc == 1 ]] && grep -q "stale or another stage's file" "$tmp/swapped_parent.txt" ||
  fail "the child's tokens as --parent_tokens: exit $rc: $(cat "$tmp/swapped_parent.txt")"

# 3. One token changed (the first step's choice, in no top-5 of the goldens'): the gate
# fails on the stage's own file, the parent comparison on the parent's.
tamper() {
  sed -E '0,/"id":[0-9]+,"top5":\[[0-9]+,/s//"id":4000000000,"top5":[4000000000,/' "$1" >"$2"
  cmp -s "$1" "$2" && fail "sed changed nothing in $1"
}
tamper "$tokens" "$tmp/tampered.json"
run tampered --tokens "$tmp/tampered.json"
[[ $rc == 1 ]] && grep -qx 'gate: FAIL' "$tmp/tampered.txt" && grep -qx 'verify: FAIL' "$tmp/tampered.txt" ||
  fail "a changed token of the stage: exit $rc: $(cat "$tmp/tampered.txt")"
tamper "$parent_tokens" "$tmp/tampered_parent.json"
run tampered_parent --tokens "$tokens" --parent_tokens "$tmp/tampered_parent.json"
[[ $rc == 1 ]] && grep -qx 'same tokens as parent: FAIL' "$tmp/tampered_parent.txt" &&
  grep -qx 'gate: PASS' "$tmp/tampered_parent.txt" ||
  fail "a changed token of the parent: exit $rc: $(cat "$tmp/tampered_parent.txt")"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo PASS
