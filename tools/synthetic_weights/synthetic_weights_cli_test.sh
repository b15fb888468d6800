#!/usr/bin/env bash
# synthetic_weights' answers to bad command lines (issue 15): each names the flag,
# exits 2 for a missing flag and 1 for a bad path or config, messages in the one
# "<tool>: <message>" form; a valid command line still writes a checkpoint.
#   synthetic_weights_cli_test.sh SYNTHETIC_WEIGHTS TINY.textproto
set -uo pipefail
sw="$1" config="$2"
source tools/testing/cli_expect.sh
tool="$sw"
out="$TEST_TMPDIR/ckpt"

expect_exit "no --config" 2 "synthetic_weights: --config is required" --out "$out"
expect_exit "no --out" 2 "synthetic_weights: --out is required" --config "$config"
expect_exit "missing --config" 1 "synthetic_weights: --config: $TEST_TMPDIR/no.textproto does not exist" \
  --config "$TEST_TMPDIR/no.textproto" --out "$out"
expect_exit "--config a directory" 1 "--config: $TEST_TMPDIR is a directory, not a file" \
  --config "$TEST_TMPDIR" --out "$out"
expect_exit "--config /dev/zero" 1 "--config /dev/zero is not a regular file" --config /dev/zero --out "$out"
: >"$TEST_TMPDIR/a_file"
expect_exit "--out a file" 1 "--out: $TEST_TMPDIR/a_file is not a directory" \
  --config "$config" --out "$TEST_TMPDIR/a_file"
printf 'name: "x"\nhidden: -64\n' >"$TEST_TMPDIR/bad.textproto"
expect_exit "bad config" 1 "bad.textproto" --config "$TEST_TMPDIR/bad.textproto" --out "$out"
o="$("$sw" --config "$TEST_TMPDIR/no.textproto" --out "$out" 2>&1)"
grep -qE "NOT_FOUND|INVALID_ARGUMENT" <<<"$o" && fail "a status code name in front of the message: $o"
o="$("$sw" --config "$config" --out "$out" 2>/dev/null)" || fail "the valid config is refused"
grep -q "^sha256:" <<<"$o" || fail "no digest printed: $o"
[[ -s "$out/model.safetensors" && -s "$out/config.json" ]] || fail "no checkpoint in $out"
expect_exit "--shards 0" 2 "synthetic_weights: --shards 0 is outside [1, 99999]" \
  --config "$config" --out "$out" --shards 0
"$sw" --config "$config" --out "$TEST_TMPDIR/sharded" --shards 2 >/dev/null 2>&1 || fail "--shards 2 is refused"
for f in model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json; do
  [[ -s "$TEST_TMPDIR/sharded/$f" ]] || fail "--shards 2 wrote no $f"
done

finish
