#!/usr/bin/env bash
# An inert stage must not hide in a chain: elf_opt exits 1 when its pass changes
# nothing, naming the pass and allow_noop; with --allow_noop it succeeds.
#   inert_stage_test.sh path/to/elf_opt path/to/decode.elf
set -uo pipefail
elf_opt="$1"
decode="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

for pass in layout_alignment buffer_object_reuse merge_multi_launch; do
  once="$tmp/$pass.once.elf"
  twice="$tmp/$pass.twice.elf"
  if ! "$elf_opt" --pass="$pass" --in "$decode" --out "$once" 2>"$tmp/log1"; then
    fail "$pass on the baseline should apply: $(cat "$tmp/log1")"
    continue
  fi
  "$elf_opt" --pass="$pass" --in "$once" --out "$twice" 2>"$tmp/log2"
  rc=$?
  [[ $rc == 1 ]] || fail "$pass twice: exit status $rc, want 1"
  grep -q "elf_opt: $pass on $once: changed nothing (" "$tmp/log2" ||
    fail "$pass twice: no 'changed nothing' message in: $(cat "$tmp/log2")"
  grep -q "or set allow_noop = True" "$tmp/log2" ||
    fail "$pass twice: the message does not mention allow_noop: $(cat "$tmp/log2")"
  [[ ! -e "$twice" ]] || fail "$pass twice: wrote $twice although it failed"

  "$elf_opt" --pass="$pass" --allow_noop --in "$once" --out "$twice" 2>"$tmp/log3"
  rc=$?
  [[ $rc == 0 ]] || fail "$pass twice with --allow_noop: exit status $rc, want 0: $(cat "$tmp/log3")"
  [[ -s "$twice" ]] || fail "$pass twice with --allow_noop: no output ELF"
  grep -q "$pass \[cpu\] skipped" "$tmp/log3" ||
    fail "$pass twice with --allow_noop: lineage not reported as skipped: $(cat "$tmp/log3")"
done

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
