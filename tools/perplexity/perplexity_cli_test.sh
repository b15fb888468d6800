#!/usr/bin/env bash
# perplexity's answers to bad command lines and inputs: each missing flag named (exit 2),
# a missing file or a text shorter than one window said so (exit 1), a window longer
# than the model's context refused.
#   perplexity_cli_test.sh PERPLEXITY TINY_768.elf TOKENIZER.json
set -uo pipefail
perplexity="$1" elf="$2" tok="$3"
source tools/testing/cli_expect.sh
tool="$perplexity"
printf 'The quick brown fox jumps over the lazy dog.\n' >"$TEST_TMPDIR/short.txt"
expect_exit "no --text" 2 "perplexity: --text is required" --elf "$elf" --reference_elf "$elf" --tokenizer "$tok"
expect_exit "no --elf" 2 "perplexity: --elf is required" --reference_elf "$elf" --tokenizer "$tok" \
  --text "$TEST_TMPDIR/short.txt"
expect_exit "no --reference_elf" 2 "perplexity: --reference_elf is required" --elf "$elf" --tokenizer "$tok" \
  --text "$TEST_TMPDIR/short.txt"
expect_exit "--window 1" 2 "--window 1 is outside [2, " --elf "$elf" --reference_elf "$elf" --tokenizer "$tok" \
  --text "$TEST_TMPDIR/short.txt" --window 1
expect_exit "missing --text" 1 "--text: $TEST_TMPDIR/none.txt does not exist" --elf "$elf" --reference_elf "$elf" \
  --tokenizer "$tok" --text "$TEST_TMPDIR/none.txt"
expect_exit "missing --reference_elf" 1 "--reference_elf: $TEST_TMPDIR/none.elf does not exist" --elf "$elf" \
  --reference_elf "$TEST_TMPDIR/none.elf" --tokenizer "$tok" --text "$TEST_TMPDIR/short.txt"
expect_exit "window past the context" 1 "--window 256 is longer than the model's context of 128" --elf "$elf" \
  --reference_elf "$elf" --tokenizer "$tok" --text "$TEST_TMPDIR/short.txt" --window 256
expect_exit "text shorter than a window" 1 "fewer than one window of 100" --elf "$elf" --reference_elf "$elf" \
  --tokenizer "$tok" --text "$TEST_TMPDIR/short.txt" --window 100
finish
