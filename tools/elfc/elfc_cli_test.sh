#!/usr/bin/env bash
# elfc's answers to bad command lines (issue 15): each names the flag, exits 2 for a
# bad flag and 1 for a bad path or config, and a valid command line still writes.
#   elfc_cli_test.sh ELFC TINY.textproto
set -uo pipefail
elfc="$1" config="$2"
source tools/testing/cli_expect.sh
tool="$elfc"
out="$TEST_TMPDIR/out.elf"

expect_exit "no --config" 2 "elfc: --config is required" --out "$out"
expect_exit "no --out" 2 "elfc: --out is required" --config "$config"
expect_exit "stray argument" 2 "elfc: unexpected argument 'extra'" --config "$config" --out "$out" extra
expect_exit "missing --config" 1 "--config: $TEST_TMPDIR/no.textproto does not exist" \
  --config "$TEST_TMPDIR/no.textproto" --out "$out"
expect_exit "--config a directory" 1 "--config: $TEST_TMPDIR is a directory, not a file" \
  --config "$TEST_TMPDIR" --out "$out"
expect_exit "--config /dev/zero" 1 "--config /dev/zero is not a regular file" --config /dev/zero --out "$out"
printf 'name: "x"\nhidden: -64\n' >"$TEST_TMPDIR/bad.textproto"
expect_exit "bad config" 1 "bad.textproto" --config "$TEST_TMPDIR/bad.textproto" --out "$out"
[[ ! -e "$out" ]] || fail "an ELF was written for a bad config"
expect_exit "unwritable --out" 1 "/nonexistent/dir/out.elf" --config "$config" --out /nonexistent/dir/out.elf
"$elfc" --config "$config" --out "$out" || fail "the valid config is refused"
[[ -s "$out" ]] || fail "no ELF written for the valid config"

finish
