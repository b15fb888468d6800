#!/usr/bin/env bash
# A shape the repository has never seen, through --model as a new user runs it: the
# file alone streams text (generate), and verify --model matches the HF goldens
# recorded from that file by their weights digest, at the stage named.
#   model_flag_test.sh GENERATE VERIFY MODEL GOLDENS STAGE [TOKENIZER]
# (TOKENIZER: for a config.json alone, whose weights are synthetic and which holds none)
set -uo pipefail
generate="$1" verify="$2" model="$3" goldens="$4" stage="$5" tok="${6:-}"
source tools/testing/cli_expect.sh
cache=(--cache_dir "$TEST_TMPDIR/cache")
[[ -z "$tok" ]] || cache+=(--tokenizer "$tok")
out="$("$generate" --model "$model" --prompt "The capital of France is" --max_new_tokens 8 "${cache[@]}" \
  2>"$TEST_TMPDIR/err")" || fail "generate --model failed: $(cat "$TEST_TMPDIR/err")"
[[ "$out" == "The capital of France is"?* ]] || fail "no continuation streamed: '$out'"
grep -qE "stage $stage \(" "$TEST_TMPDIR/err" || fail "generate does not name its stage: $(cat "$TEST_TMPDIR/err")"
grep -qE "ms/token" "$TEST_TMPDIR/err" || fail "no decode timing: $(cat "$TEST_TMPDIR/err")"
out="$("$verify" --model "$model" --goldens "$goldens" --stage "$stage" "${cache[@]}" 2>&1)" ||
  fail "verify --model --stage $stage failed: $out"
grep -qx "stage $stage: PASS" <<<"$out" || fail "no 'stage $stage: PASS' in: $out"
finish
