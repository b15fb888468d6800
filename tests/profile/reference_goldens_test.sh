#!/bin/bash
# reference_goldens_test.sh VERIFY DECODE.elf GOLDENS.json TOKENIZER
# Goldens the reference decoder recorded (//tests/profile:goldens) pass verify's
# baseline stage, verify names that reference (not HF), and a copy claiming another
# weights digest is refused before anything runs.
set -u
tool="$1" elf="$2" goldens="$3" tok="$4"
source tools/testing/cli_expect.sh
grep -q '"reference": "decodekit reference decoder' "$goldens" || fail "$goldens does not name the reference decoder"
out="$("$tool" --elf="$elf" --goldens="$goldens" --weights=synthetic --tokenizer="$tok" --prompts=2 2>&1)"
rc=$?
[[ $rc == 0 ]] || fail "verify exited $rc on the reference decoder's goldens:"$'\n'"$out"
grep -qx 'verify: PASS' <<<"$out" || fail "no 'verify: PASS':"$'\n'"$out"
grep -q '^verify: reference decodekit reference decoder (.*not HF transformers)$' <<<"$out" ||
  fail "verify does not print the goldens' reference:"$'\n'"$out"
wrong="$TEST_TMPDIR/wrong_digest.json"
sed -E 's/"weights_digest": "sha256:[0-9a-f]+"/"weights_digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000"/' \
  "$goldens" >"$wrong"
grep -q '"sha256:0000' "$wrong" || fail "could not rewrite the digest"
expect_exit "goldens of other weights" 1 "were recorded with weights sha256:0000" \
  --elf="$elf" --goldens="$wrong" --weights=synthetic --tokenizer="$tok" --prompts=2
expect_exit "another seed" 1 "but this run uses synthetic(seed=2)" \
  --elf="$elf" --goldens="$goldens" --weights=synthetic:2 --tokenizer="$tok" --prompts=2
finish
