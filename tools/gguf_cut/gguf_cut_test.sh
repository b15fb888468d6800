#!/bin/bash
# gguf_cut_test.sh GGUF_CUT SMOLLM2.gguf GEMMA3.gguf
set -u
tool="$1" smollm2="$2" gemma3="$3"
source tools/testing/cli_expect.sh
out="$TEST_TMPDIR/out.gguf"
for spec in "$smollm2:30" "$gemma3:18"; do
  file="${spec%:*}" blocks="${spec##*:}"
  "$tool" --in="$file" --blocks="$blocks" --out="$out" >/dev/null || fail "cutting $file at $blocks failed"
  cmp -s "$file" "$out" || fail "$file cut at its own $blocks blocks is not the same file byte for byte"
done
"$tool" --in="$gemma3" --blocks=6 --out="$out" | grep -q "6 blocks, 80 of 236 tensors" || fail "6 blocks of Gemma 3: not 80 tensors"
expect_exit "more blocks than the file" 1 "has 18 blocks (gemma3.block_count)" --in="$gemma3" --blocks=19 --out="$out"
expect_exit "no blocks" 2 "--blocks" --in="$gemma3" --blocks=0 --out="$out"
expect_exit "no --in" 2 "--in" --blocks=1 --out="$out"
expect_exit "missing file" 1 "" --in="$TEST_TMPDIR/none.gguf" --blocks=1 --out="$out"
finish
