#!/usr/bin/env bash
# complete_test.sh COMPLETE ELF MODEL: the program completes a prompt through the stage.
set -u
out="$("$1" "$2" "$3" "The capital of France is" 2>&1)" || { echo "FAIL: complete exited $?: $out"; exit 1; }
echo "$out"
grep -q "The capital of France is.*Paris" <<<"$out" || { echo "FAIL: no Paris in the completion"; exit 1; }
echo PASS
