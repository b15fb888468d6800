#!/bin/bash
# quickstart ELF MODEL PROMPT [flags]: what it prints and how it exits.
set -u
tool="$1" elf="$2" model="$3"
source tools/testing/cli_expect.sh

out="$("$tool" "$elf" "$model" "The capital of France is" --max_new_tokens 12 2>&1)" || fail "completion exited $?: $out"
grep -q "The capital of France is.*Paris" <<<"$out" || fail "no Paris in the completion: $out"
grep -q "stopped at max_new_tokens" <<<"$out" || fail "no stop reason: $out"

out="$("$tool" "$elf" "$model" "Hi!" --chat --max_new_tokens 64 2>&1)" || fail "chat exited $?: $out"
grep -q "Hello" <<<"$out" || fail "no Hello in the chat answer: $out"
grep -q "stopped at end of generation" <<<"$out" || fail "the chat answer did not end its turn: $out"
grep -q "<|im_end|>\|<|im_start|>" <<<"$out" && fail "chat markup in the answer: $out"

out="$("$tool" "$elf" "$model" "The capital of France is" --stop Paris --max_new_tokens 12 2>&1)" || fail "stop exited $?"
grep -q "stopped at stop string" <<<"$out" || fail "no stop string: $out"
head -1 <<<"$out" | grep -q "Paris" && fail "the stop string was printed: $out"

a="$("$tool" "$elf" "$model" "Once upon a time" --temperature 0.9 --seed 3 --max_new_tokens 16 2>/dev/null)"
b="$("$tool" "$elf" "$model" "Once upon a time" --temperature 0.9 --seed 3 --max_new_tokens 16 2>/dev/null)"
[[ -n "$a" && "$a" == "$b" ]] || fail "seeded sampling differs: '$a' vs '$b'"

expect_exit "missing ELF" 1 "/no/such.elf" /no/such.elf "$model" "Hi"
expect_exit "bad chat format" 1 "vicuna" "$elf" "$model" "Hi" --chat=vicuna
expect_exit "no prompt" 2 "usage: quickstart" "$elf" "$model"
expect_exit "unknown flag" 2 "unknown flag --tempo" "$elf" "$model" "Hi" --tempo 1
finish
