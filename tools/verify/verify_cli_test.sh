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
# A recorded greedy run stands for none of these (verify/greedy_tokens.h).
expect_exit "--tokens with --test_mutation" 2 "--tokens / --parent_tokens does not go with --test_mutation" \
  --elf "$elf" --goldens g.json --tokens t.json --test_mutation drop_last_layer
expect_exit "--write_tokens with --nogreedy" 2 "--write_tokens does not go with --nogreedy" \
  --elf "$elf" --goldens g.json --write_tokens t.json --nogreedy
expect_exit "--write_tokens with --tokens" 2 "--write_tokens does not go with --tokens / --parent_tokens" \
  --elf "$elf" --goldens g.json --write_tokens t.json --tokens t.json
expect_exit "--parent_tokens without --parent_elf" 2 "--parent_tokens needs --parent_elf" \
  --elf "$elf" --goldens g.json --parent_tokens t.json
finish
