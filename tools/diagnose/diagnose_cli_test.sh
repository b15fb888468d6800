#!/usr/bin/env bash
# diagnose and profile name the missing flag (exit 2); diagnose says a directory is
# one (exit 1) (issue 15).
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
tool="$profile"
expect_exit "profile no --manifest" 2 "--manifest is required" --tokenizer t.json
expect_exit "profile no --tokenizer" 2 "--tokenizer is required" --manifest m.json
finish
