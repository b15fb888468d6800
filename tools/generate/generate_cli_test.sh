#!/usr/bin/env bash
# generate's answers to bad command lines (issue 15): each names the flag, exits 2
# for a bad flag and 1 for a bad path, and the valid command line still works.
#   generate_cli_test.sh GENERATE TINY.elf TOKENIZER.json SMALL_VOCAB.elf
# (TINY.elf's vocabulary covers TOKENIZER.json's ids; SMALL_VOCAB.elf's does not)
set -uo pipefail
generate="$1" elf="$2" tok="$3" small_vocab_elf="$4"
source tools/testing/cli_expect.sh
tool="$generate"

ok=(--elf "$elf" --tokenizer "$tok" --weights synthetic --prompt "a b")
expect_exit "no --elf" 2 "generate: --elf is required" --tokenizer "$tok"
expect_exit "no --tokenizer" 2 "generate: --tokenizer is required" --elf "$elf"
expect_exit "negative --max_new_tokens" 2 "--max_new_tokens -1 is outside" "${ok[@]}" --max_new_tokens -1
expect_exit "negative --max_context" 2 "--max_context -5 is outside" "${ok[@]}" --max_context -5
expect_exit "--elf a directory" 1 "--elf: $TEST_TMPDIR is a directory, not a file" \
  "${ok[@]}" --elf "$TEST_TMPDIR"
expect_exit "missing --weights" 1 "--weights: $TEST_TMPDIR/no_such_checkpoint does not exist" \
  "${ok[@]}" --weights "$TEST_TMPDIR/no_such_checkpoint"
expect_exit "missing --tokenizer" 1 "--tokenizer: /nonexistent/tok.json does not exist" \
  "${ok[@]}" --tokenizer /nonexistent/tok.json
# The up-front context check: an int sum wrapped negative and let it through.
expect_exit "INT_MAX --max_new_tokens" 1 "+ --max_new_tokens (2147483647) exceeds the KV cache of 128" \
  "${ok[@]}" --max_new_tokens 2147483647
# An unquoted prompt: the shell splits it; the words after the first are refused, not
# dropped (the run would otherwise answer "The" instead of the prompt meant).
expect_exit "unquoted --prompt" 2 "generate: unexpected argument 'capital': this tool takes only --flags" \
  "${ok[@]}" --prompt The capital
expect_exit "empty synthetic seed" 1 "--weights synthetic:: the seed after 'synthetic:' must be a decimal number" \
  "${ok[@]}" --weights synthetic:
expect_exit "non-numeric synthetic seed" 1 "--weights synthetic:x1: the seed after 'synthetic:' must be" \
  "${ok[@]}" --weights synthetic:x1
expect_exit "another model's tokenizer" 1 \
  "tokens but ELF $small_vocab_elf has a vocabulary of 300: it is not this model's tokenizer" \
  "${ok[@]}" --elf "$small_vocab_elf"
expect_exit "valid" 0 "new tokens" "${ok[@]}" --max_new_tokens 2

finish
