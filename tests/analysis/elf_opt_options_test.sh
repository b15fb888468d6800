#!/usr/bin/env bash
# elf_opt knows passes and their options only through the pass table: options are
# key=value arguments; an unknown pass or option, or a bad value, is an error that
# names what is known or which option is wrong.
#   elf_opt_options_test.sh path/to/elf_opt path/to/decode.elf
set -uo pipefail
elf_opt="$1"
decode="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_error WANT_TEXT ARGS...: elf_opt exits 2 (a usage error: util/exit_codes.h), says
# WANT_TEXT, writes nothing.
expect_error() {
  local want="$1"
  shift
  rm -f "$tmp/out.elf"
  "$elf_opt" "$@" --in "$decode" --out "$tmp/out.elf" 2>"$tmp/log"
  local rc=$?
  [[ $rc == 2 ]] || fail "$*: exit status $rc, want 2"
  grep -qF -- "$want" "$tmp/log" || fail "$*: no '$want' in: $(cat "$tmp/log")"
  [[ ! -e "$tmp/out.elf" ]] || fail "$*: wrote an ELF although it failed"
}

expect_error "unknown pass 'fuse_everything' (known: " \
  --pass=fuse_everything
for pass in layout_alignment buffer_object_reuse merge_multi_launch; do
  grep -q "(known: .*$pass" "$tmp/log" || fail "the unknown-pass error does not name $pass: $(cat "$tmp/log")"
done
expect_error "layout_alignment has no option 'rows' (its options: lm_head_partition_rows)" \
  --pass=layout_alignment rows=128
expect_error "buffer_object_reuse has no option 'groups' (it takes none)" \
  --pass=buffer_object_reuse groups=lm_head
expect_error "layout_alignment option lm_head_partition_rows: 'many' is not an integer" \
  --pass=layout_alignment lm_head_partition_rows=many
expect_error "merge_multi_launch option groups: 'everything' is not one of rms_gemv_rope, o_gemv_ffn, lm_head" \
  --pass=merge_multi_launch groups=lm_head,everything

# Options reach the pass: 300 vocab rows in partitions of 128 -> 3 partitions.
"$elf_opt" --pass=layout_alignment --in "$decode" --out "$tmp/aligned.elf" lm_head_partition_rows=128 \
  2>"$tmp/log" || fail "layout_alignment lm_head_partition_rows=128: $(cat "$tmp/log")"
grep -q "LM head split into 3 vocab partitions" "$tmp/log" ||
  fail "lm_head_partition_rows=128 did not reach the pass: $(cat "$tmp/log")"
"$elf_opt" --pass=merge_multi_launch --in "$decode" --out "$tmp/merged.elf" groups=lm_head \
  2>"$tmp/log" || fail "merge_multi_launch groups=lm_head: $(cat "$tmp/log")"
grep -q "rms_gemv_rope not selected by \`groups\`" "$tmp/log" ||
  fail "groups=lm_head did not reach the pass: $(cat "$tmp/log")"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
