#!/usr/bin/env bash
# elf_opt on bad input (issue 15): each missing flag named (exit 2), an invalid input
# ELF refused before the pass runs (exit 1, nothing written), a failed write
# reported as a write failure, not as "produced an invalid program".
#   elf_opt_bad_input_test.sh ELF_OPT GOOD BAD_HOST_OFFSET BAD_ROW_BEGIN
set -uo pipefail
elf_opt="$1" good="$2"
source tools/testing/cli_expect.sh
tool="$elf_opt"
pass=(--pass=layout_alignment --allow_noop)
out="$TEST_TMPDIR/out.elf"

"$elf_opt" "${pass[@]}" --in "$good" --out "$out" 2>/dev/null || fail "the valid ELF is refused"
expect_exit "no --pass" 2 "--pass is required" --in "$good" --out "$out"
expect_exit "no --in" 2 "--in is required" "${pass[@]}" --out "$out"
expect_exit "no --out" 2 "--out is required" "${pass[@]}" --in "$good"
expect_exit "--in a directory" 1 "--in: $TEST_TMPDIR is a directory, not a file" \
  "${pass[@]}" --in "$TEST_TMPDIR" --out "$out"
rm -f "$out"
expect_exit "host_offset" 1 "at host_offset -4096 does not lie inside host value" \
  "${pass[@]}" --in "$3" --out "$out"
expect_exit "row_begin" 1 "negative weight row range [weight_row_begin -8" \
  "${pass[@]}" --in "$4" --out "$out"
[[ ! -e "$out" ]] || fail "an output was written for an invalid input"
expect_exit "unwritable --out" 1 "cannot write decode ELF /nonexistent/dir/out.elf: No such file or directory" \
  "${pass[@]}" --in "$good" --out /nonexistent/dir/out.elf
o="$("$elf_opt" "${pass[@]}" --in "$good" --out /nonexistent/dir/out.elf 2>&1)"
grep -qF "produced an invalid program" <<<"$o" && fail "a failed write was called an invalid program: $o"
# --weights: only for a pass with the option 'stored', and only a GGUF.
expect_exit "--weights on a pass without it" 2 "--weights: pass layout_alignment reads no weights file" \
  "${pass[@]}" --weights "$good" --in "$good" --out "$out"
expect_exit "--weights not a GGUF" 1 "--weights $good: " \
  --pass=quantize_weights --weights "$good" --in "$good" --out "$out" scheme=gguf
expect_exit "--weights missing" 1 "--weights: /nonexistent.gguf does not exist" \
  --pass=quantize_weights --weights /nonexistent.gguf --in "$good" --out "$out" scheme=gguf
expect_exit "scheme gguf without --weights" 1 "scheme gguf needs the file's tensor types" \
  --pass=quantize_weights --in "$good" --out "$out" scheme=gguf

finish
