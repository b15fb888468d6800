#!/usr/bin/env bash
# diagnose and profile name the missing flag (exit 2); diagnose says a directory is
# one (exit 1) (issue 15), and refuses a reference record whose prompt_ids hold an id
# the model does not have (>= vocab, negative, or above 2^32 - 1), naming it (exit 1).
#   diagnose_cli_test.sh DIAGNOSE PROFILE TINY.elf
set -uo pipefail
diagnose="$1" profile="$2" elf="$3"
source tools/testing/cli_expect.sh
tool="$diagnose"
expect_exit "diagnose no --elf" 2 "diagnose: --elf is required" --hf h.json
expect_exit "diagnose no --weights" 2 "diagnose: --weights is required" --elf "$elf" --hf h.json
expect_exit "diagnose no --hf" 2 "diagnose: --hf is required" --elf "$elf" --weights synthetic
expect_exit "diagnose --elf a directory" 1 "--elf: $TEST_TMPDIR is a directory, not a file" \
  --elf "$TEST_TMPDIR" --weights synthetic --hf h.json
expect_exit "diagnose missing --hf" 1 "--hf: $TEST_TMPDIR/none.json does not exist" \
  --elf "$elf" --weights synthetic --hf "$TEST_TMPDIR/none.json"

# A reference record for TINY.elf (1 layer, hidden 64, vocab 300) with PROMPT_IDS.
record() {
  local zeros
  zeros="$(printf '0,%.0s' $(seq 63))0"
  printf '{"model": "tiny", "weights_digest": "sha256:00", "prompt_ids": %s, "layers": [[%s]]}\n' "$1" "$zeros" \
    >"$TEST_TMPDIR/hf.json"
}
# The record is otherwise valid: with an id the model has, the comparison runs.
record "[5, 6]"
expect_exit "diagnose valid ids" 0 "prompt" --elf "$elf" --weights synthetic --hf "$TEST_TMPDIR/hf.json"
# 2^32 + 5 must not become id 5.
record "[4294967301]"
expect_exit "diagnose id 2^32 + 5" 1 "prompt_ids[0] = 4294967301 is not an id" \
  --elf "$elf" --weights synthetic --hf "$TEST_TMPDIR/hf.json"
record "[5, 18446744073709551615]"
expect_exit "diagnose id 2^64 - 1" 1 "prompt_ids[1] = 18446744073709551615 is not an id" \
  --elf "$elf" --weights synthetic --hf "$TEST_TMPDIR/hf.json"
record "[-1]"
expect_exit "diagnose id -1" 1 "prompt_ids[0] = -1 is not an id" \
  --elf "$elf" --weights synthetic --hf "$TEST_TMPDIR/hf.json"
record "[5, 300]"
expect_exit "diagnose id = vocab" 1 "prompt id 300 >= vocab 300" \
  --elf "$elf" --weights synthetic --hf "$TEST_TMPDIR/hf.json"
tool="$profile"
expect_exit "profile no --manifest" 2 "--manifest is required" --tokenizer t.json
expect_exit "profile no --tokenizer" 2 "--tokenizer is required" --manifest m.json
finish
