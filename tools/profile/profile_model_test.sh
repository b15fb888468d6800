#!/usr/bin/env bash
# profile --model FILE: the standard chain built for a model file alone (here an HF
# config.json: synthetic weights of its shape), every stage timed, the record written
# to --out_dir; --model with --manifest is a usage error.
#   profile_model_test.sh PROFILE TOKENIZER.json TINY_CONFIG.json
set -uo pipefail
profile="$1" tok="$2" tiny_config="$3"
source tools/testing/cli_expect.sh
tool="$profile"
out="$TEST_TMPDIR/out"
"$profile" --model "$tiny_config" --tokenizer "$tok" --cache_dir "$TEST_TMPDIR/cache" \
  --max_context 256 --out_dir "$out" --new_tokens 2 --warmup 0 --rounds 1 --prefill_prompts= \
  --png=false --bandwidth_mib 16 >"$TEST_TMPDIR/stdout" 2>"$TEST_TMPDIR/stderr"
rc=$?
# 0, or 4 (the final stage not faster than the baseline: a timing on a tiny model).
[[ $rc == 0 || $rc == 4 ]] || fail "profile --model exited $rc: $(tail -5 "$TEST_TMPDIR/stderr")"
grep -qF "no --goldens: the stages are timed without the verify gate" "$TEST_TMPDIR/stderr" ||
  fail "no note about the missing goldens: $(cat "$TEST_TMPDIR/stderr")"
[[ -s "$out/phase5_decode.md" ]] || fail "no $out/phase5_decode.md"
for stage in decode decode_aligned decode_bo decode_opt decode_fused decode_x12 decode_q8 decode_spec; do
  grep -qF ":$stage " "$out/phase5_decode.md" || fail "stage $stage not in the record"
done
grep -qF "decode_gguf" "$out/phase5_decode.md" && fail "a config.json has no decode_gguf stage"
grep -qF -- "--model $tiny_config" "$out/phase5_decode.md" ||
  fail "the record does not give the command"
expect_exit "--model and --manifest" 2 "give --model or --manifest, not both" \
  --model "$tiny_config" --manifest "$TEST_TMPDIR/m.json" --tokenizer "$tok"
finish
