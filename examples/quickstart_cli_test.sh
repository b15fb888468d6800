#!/bin/bash
# quickstart ELF MODEL PROMPT [flags]: a number flag with a value that is not a number
# of its range is a usage error (exit 2) naming the flag and the value, before any file
# is opened (so the paths here need not exist); values in range get past the parsing
# (to the missing ELF, exit 1).
set -u
tool="$1"
source tools/testing/cli_expect.sh
elf=/no/such.elf model=/no/such.gguf

expect_exit "--max_new_tokens abc" 2 "--max_new_tokens abc: expected an integer in [0, 2147483647]" \
  "$elf" "$model" "Hi" --max_new_tokens abc
expect_exit "--max_new_tokens 12x" 2 "--max_new_tokens 12x:" "$elf" "$model" "Hi" --max_new_tokens 12x
expect_exit "--max_new_tokens -1" 2 "--max_new_tokens -1:" "$elf" "$model" "Hi" --max_new_tokens=-1
expect_exit "--max_new_tokens 2^31" 2 "--max_new_tokens 2147483648:" "$elf" "$model" "Hi" --max_new_tokens 2147483648
expect_exit "--seed -1" 2 "--seed -1: expected an integer in [0, 18446744073709551615]" \
  "$elf" "$model" "Hi" --seed=-1
expect_exit "--seed 2^64" 2 "--seed 18446744073709551616:" "$elf" "$model" "Hi" --seed 18446744073709551616
expect_exit "--seed empty" 2 "--seed :" "$elf" "$model" "Hi" --seed=
expect_exit "--temperature -0.5" 2 "--temperature -0.5: expected a finite number >= 0" \
  "$elf" "$model" "Hi" --temperature=-0.5
expect_exit "--temperature nan" 2 "--temperature nan:" "$elf" "$model" "Hi" --temperature nan
expect_exit "--temperature inf" 2 "--temperature inf:" "$elf" "$model" "Hi" --temperature inf
expect_exit "--temperature 0.7x" 2 "--temperature 0.7x:" "$elf" "$model" "Hi" --temperature 0.7x
expect_exit "--top_p 0" 2 "--top_p 0: expected a number in (0, 1]" "$elf" "$model" "Hi" --top_p 0
expect_exit "--top_p 1.5" 2 "--top_p 1.5:" "$elf" "$model" "Hi" --top_p 1.5
expect_exit "--top_p abc" 2 "--top_p abc:" "$elf" "$model" "Hi" --top_p abc

# The edges of each range parse: the run gets as far as opening the ELF.
expect_exit "values in range" 1 "$elf" "$elf" "$model" "Hi" --max_new_tokens 0 --seed 18446744073709551615 \
  --temperature 0 --top_p 1
expect_exit "values in range" 1 "$elf" "$elf" "$model" "Hi" --max_new_tokens=2147483647 --seed=0 \
  --temperature=1e3 --top_p=1e-3
finish
