#!/usr/bin/env bash
# verify's answers to bad command lines (issue 15): each missing flag named (exit 2),
# a directory or a missing file said to be one (exit 1).
#   verify_cli_test.sh VERIFY TINY.elf
set -uo pipefail
verify="$1" elf="$2"
source tools/testing/cli_expect.sh
tool="$verify"
expect_exit "no --elf" 2 "verify: --elf is required" --goldens g.json
expect_exit "no --goldens" 2 "verify: --goldens is required" --elf "$elf"
expect_exit "--prompts 0" 2 "--prompts 0 is outside [1, " --elf "$elf" --goldens g.json --prompts 0
expect_exit "--elf a directory" 1 "--elf: $TEST_TMPDIR is a directory, not a file" \
  --elf "$TEST_TMPDIR" --goldens g.json
expect_exit "missing --goldens" 1 "--goldens: $TEST_TMPDIR/none.json does not exist" \
  --elf "$elf" --goldens "$TEST_TMPDIR/none.json"
finish
