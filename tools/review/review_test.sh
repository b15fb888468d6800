#!/usr/bin/env bash
# review on a fixture git repository: a four-stage chain (multi-line rules, the
# older `stages = [...]` form) committed, then in the working tree one stage
# reverted (its rule deleted, the next src re-pointed past it), the BUILD rewritten
# with one-line rules and `final = ...`, and the phase-5 record edited. The report
# must name exactly that removed stage and that re-pointed src, show the two ELFs'
# diff (built by a fake bazel, testdata/fake_bazel.sh) and the figures side by side.
# Then the errors: missing / bad --base, not a git repository, a BUILD that does not
# parse, a failed build.
#   review_test.sh REVIEW FAKE_BAZEL TINY_OPT_ELF TINY_ALIGNED_ELF
set -uo pipefail
abs() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }
review="$(abs "$1")"
export FAKE_BAZEL="$(abs "$2")"
export FAKE_OPT_ELF="$(abs "$3")" FAKE_ALIGNED_ELF="$(abs "$4")"
export FAKE_BAZEL_LOG="$TEST_TMPDIR/fake_bazel.log"
# The fake's "servers" hold review's pipes until the test lets them go (step 1).
export FAKE_BAZEL_SERVERS="$TEST_TMPDIR/fake_bazel.servers" FAKE_BAZEL_RELEASE="$TEST_TMPDIR/fake_bazel.release"
rm -f "$FAKE_BAZEL_SERVERS" "$FAKE_BAZEL_RELEASE"
trap 'touch "$FAKE_BAZEL_RELEASE"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect() {  # expect NAME OUTPUT LINE: OUTPUT contains LINE (a fixed string)
  grep -qF -- "$3" <<<"$2" || fail "$1: no '$3' in:"$'\n'"$2"
}
expect_not() {
  if grep -qF -- "$3" <<<"$2"; then fail "$1: unexpected '$3' in:"$'\n'"$2"; fi
}

repo="$TEST_TMPDIR/repo"
rm -rf "$repo" "$TEST_TMPDIR/base_wt"
mkdir -p "$repo/models/tiny/docs/development_progress" "$repo/models/other"
cd "$repo" || exit 1
git init -q . && git config user.email test@example.com && git config user.name test

cat >models/tiny/BUILD <<'EOF'
load("//rules:defs.bzl", "buffer_object_reuse", "layout_alignment", "merge_multi_launch")

# The chain (a comment with a stray ")" and "src = :x" in it).
decode_elf(
    name = "decode",
    config = "config.textproto",
)

layout_alignment(
    name = "decode_aligned",
    src = ":decode",
    lm_head_partition_rows = 128,
)

buffer_object_reuse(
    name = "decode_bo",
    src = ":decode_aligned",
)

merge_multi_launch(
    name = "decode_opt",
    src = ":decode_bo",
)

verify_chain(
    name = "verify",
    stages = [
        ":decode",
        ":decode_aligned",
        ":decode_bo",
        ":decode_opt",
    ],
)

decode_profile(
    name = "profile",
    stages = [
        ":decode",
        ":decode_aligned",
        ":decode_bo",
        ":decode_opt",
    ],
)
EOF
cat >models/other/BUILD <<'EOF'
decode_elf(name = "decode", config = "config.textproto")
layout_alignment(name = "decode_opt", src = ":decode")
decode_profile(name = "profile", final = ":decode_opt")
EOF
record() {  # record BO_ROW OPT_MS OPT_RUNS FINAL_MS
  cat <<EOF
# Phase 5: decode optimization record, tiny

## Final

**$4 ms/token** at \`:decode_opt\`, **2.00x** the baseline's 20.00 ms/token. Final stage strictly faster than the baseline (the hard gate): **yes**.

## All stages

| stage | status | ms/token median (min-max) | drift | delta vs parent | delta vs baseline | runs/token | BO bytes written/token | x floor | gate |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| :decode | baseline | 20.00 (19.00-21.00) | +1.0% | - | - | 18 | 1.00 MiB | 5.00x | PASS |
| :decode_aligned | applied | 18.00 (17.00-19.00) | +1.0% | - | - | 20 | 1.00 MiB | 4.50x | PASS |
$1| :decode_opt | applied | $2 (7.00-9.00) | +1.0% | - | - | $3 | 4.00 KiB | 2.00x | PASS |

## Where one token's time goes, per stage

| component | where | steps/token |
| --- | --- | --- |
| host: embedding | model | 1 |
EOF
}
record "| :decode_bo | applied | 9.00 (8.00-10.00) | +1.0% | - | - | 20 | 4.00 KiB | 2.25x | PASS |
" 7.70 3 7.70 >models/tiny/docs/development_progress/phase5_decode.md
git add -A && git commit -qm fixture || exit 1

# The working tree: decode_bo reverted, one-line rules, `final = ...`, a new record.
cat >models/tiny/BUILD <<'EOF'
load("//rules:defs.bzl", "layout_alignment", "merge_multi_launch")

decode_elf(name = "decode", config = "config.textproto")
layout_alignment(name = "decode_aligned", src = ":decode", lm_head_partition_rows = 128)
merge_multi_launch(name = "decode_opt", src = ":decode_aligned")

verify_chain(name = "verify", final = ":decode_opt")
decode_profile(name = "profile", final = ":decode_opt")
EOF
record "" 15.25 5 15.25 >models/tiny/docs/development_progress/phase5_decode.md

# 1. The report.
: >"$FAKE_BAZEL_LOG"
out="$("$review" --base=HEAD --bazel="$FAKE_BAZEL" --worktree="$TEST_TMPDIR/base_wt" 2>"$TEST_TMPDIR/err")"
rc=$?
# Each of the fake's builds left a "server" holding review's pipes, which lets go only
# once the test says so: review returned without waiting for them if both still run.
servers="$(cat "$FAKE_BAZEL_SERVERS" 2>/dev/null)"
[[ "$(wc -w <<<"$servers")" == 2 ]] || fail "expected 2 fake bazel servers, got: $servers"
for pid in $servers; do
  kill -0 "$pid" 2>/dev/null || fail "review returned only after the fake bazel's server $pid let go of its pipes"
done
touch "$FAKE_BAZEL_RELEASE"
err="$(cat "$TEST_TMPDIR/err")"
[[ $rc == 0 ]] || fail "review exited $rc: $err"
printf '%s\n' "--- the report:" "$out" "--- stderr:" "$err" "---"
# (a) exactly the removed stage and the re-pointed src
expect chain "$out" "## tiny"
expect chain "$out" '- removed: :decode_bo = buffer_object_reuse(src = ":decode_aligned")'
expect chain "$out" '~ re-pointed: :decode_opt src ":decode_bo" -> ":decode_aligned"'
changes="$(grep -E '^(- |\+ |~ )' <<<"$out")"
[[ "$(wc -l <<<"$changes")" == 2 ]] || fail "expected exactly 2 change lines, got:"$'\n'"$changes"
expect chain "$out" "base:         :decode -> :decode_aligned -> :decode_bo -> :decode_opt   (final :decode_opt, from last of decode_profile stages"
expect chain "$out" "working tree: :decode -> :decode_aligned -> :decode_opt   (final :decode_opt, from decode_profile final"
expect unchanged "$out" "Unchanged: other"
expect_not unchanged "$out" "## other"
# (b) the ELF diff, built by the fake bazel in both trees
expect diff "$out" "### (b) final stage ELF: base :decode_opt -> working tree :decode_opt"
expect diff "$out" "--- base :decode_opt (baseline -> layout_alignment -> buffer_object_reuse -> merge_multi_launch)"
expect diff "$out" "+++ working tree :decode_opt (baseline -> layout_alignment)"
expect diff "$out" "runs per token: 3 -> "
log="$(cat "$FAKE_BAZEL_LOG")"
expect bazel "$log" "$TEST_TMPDIR/base_wt build //models/tiny:decode_opt"
expect bazel "$log" "$repo build //models/tiny:decode_opt"
expect bazel "$log" "$TEST_TMPDIR/base_wt shutdown"
[[ "$(grep -c " build " <<<"$log")" == 2 ]] || fail "expected 2 builds, got:"$'\n'"$log"
[[ "$(grep -c " finished " <<<"$log")" == 2 ]] || fail "expected 2 finished builds, got:"$'\n'"$log"
expect progress "$err" "review: running \`$FAKE_BAZEL build //models/tiny:decode_opt\` in the base worktree"
[[ ! -e "$TEST_TMPDIR/base_wt" ]] || fail "the base worktree was not removed"
[[ "$(git worktree list | wc -l)" == 1 ]] || fail "worktrees left: $(git worktree list)"
# (c) the figures side by side
expect record "$out" "| :decode | baseline -> baseline | 20.00 -> 20.00 | 18 -> 18 | 5.00x -> 5.00x | PASS -> PASS |"
expect record "$out" "| :decode_bo (base only) | applied -> - | 9.00 -> - | 20 -> - | 2.25x -> - | PASS -> - |"
expect record "$out" "| :decode_opt | applied -> applied | 7.70 -> 15.25 | 3 -> 5 | 2.00x -> 2.00x | PASS -> PASS |"
expect record "$out" "Final, base:         7.70 ms/token at \`:decode_opt\`"
expect record "$out" "Final, working tree: 15.25 ms/token at \`:decode_opt\`"
expect_not record "$out" "note:"

# 2. --no_build: no bazel at all.
: >"$FAKE_BAZEL_LOG"
out="$("$review" --base=HEAD --no_build --bazel="$FAKE_BAZEL" 2>&1)" || fail "--no_build exited $?"
expect no_build "$out" "skipped (--no_build)"
expect no_build "$out" '~ re-pointed: :decode_opt src ":decode_bo" -> ":decode_aligned"'
[[ ! -s "$FAKE_BAZEL_LOG" ]] || fail "--no_build ran bazel: $(cat "$FAKE_BAZEL_LOG")"

# 3. Errors.
out="$("$review" 2>&1)"
[[ $? == 2 ]] || fail "a missing --base should exit 2"
expect "missing --base" "$out" "--base is required"
out="$("$review" --base=HEAD stray 2>&1)"
[[ $? == 2 ]] || fail "a stray argument should exit 2"
expect "stray argument" "$out" "review: unexpected argument 'stray'"
mkdir -p "$TEST_TMPDIR/busy_wt"
out="$("$review" --base=HEAD --bazel="$FAKE_BAZEL" --worktree="$TEST_TMPDIR/busy_wt" 2>&1)"
[[ $? == 1 ]] || fail "an existing --worktree should exit 1"
expect "existing --worktree" "$out" "$TEST_TMPDIR/busy_wt already exists"
[[ -d "$TEST_TMPDIR/busy_wt" ]] || fail "an existing --worktree was removed"
out="$("$review" --base=HEAD --bazel=/nonexistent/bazel --worktree="$TEST_TMPDIR/base_wt" 2>&1)"
[[ $? == 1 ]] || fail "a --bazel that does not exist should exit 1"
expect "missing --bazel" "$out" "cannot run /nonexistent/bazel"
[[ ! -e "$TEST_TMPDIR/base_wt" ]] || fail "the base worktree was not removed after --bazel failed to start"
out="$("$review" --base=no_such_rev --no_build 2>&1)"
[[ $? == 1 ]] || fail "a bad --base should exit 1"
expect "bad --base" "$out" "review: unknown revision 'no_such_rev'"
out="$(cd "$TEST_TMPDIR" && mkdir -p not_a_repo && cd not_a_repo && GIT_CEILING_DIRECTORIES="$TEST_TMPDIR" "$review" --base=HEAD 2>&1)"
[[ $? == 1 ]] || fail "outside a git repository should exit 1"
expect "not a repo" "$out" "is not inside a git repository"
out="$(FAKE_BAZEL_FAIL=1 "$review" --base=HEAD --bazel="$FAKE_BAZEL" --worktree="$TEST_TMPDIR/base_wt" 2>&1)"
[[ $? == 1 ]] || fail "a failed build should exit 1"
expect "failed build" "$out" "failed in the base worktree"
expect "failed build" "$out" "ERROR: fake_bazel: build of //models/tiny:decode_opt failed"
[[ ! -e "$TEST_TMPDIR/base_wt" ]] || fail "the base worktree was not removed after a failed build"
cp models/tiny/BUILD "$TEST_TMPDIR/BUILD.good"
printf 'decode_elf(name = "decode"\nlayout_alignment(name = "x", src = ":decode")\n' >models/tiny/BUILD
out="$("$review" --base=HEAD --no_build 2>&1)"
[[ $? == 1 ]] || fail "an unparsable BUILD should exit 1"
expect "bad BUILD" "$out" "cannot parse models/tiny/BUILD in the working tree: line 1"
printf 'merge_multi_launch(name = "decode_opt", src = ":decode" + SUFFIX)\n' >models/tiny/BUILD
out="$("$review" --base=HEAD --no_build 2>&1)"
[[ $? == 1 ]] || fail "a non-string src should exit 1"
expect "bad src" "$out" "the src of :decode_opt is not a string label"
cp "$TEST_TMPDIR/BUILD.good" models/tiny/BUILD

# 4. An interrupt during a build: the build is cancelled (its 60 s sleep cut short, so
# it never finishes), the worktree removed. The build is the fake's, not review's: the
# fake logs its pid when the build starts, and it must be gone once review returns.
: >"$FAKE_BAZEL_LOG"
FAKE_BAZEL_SLEEP=60 "$review" --base=HEAD --bazel="$FAKE_BAZEL" --worktree="$TEST_TMPDIR/base_wt" \
  >/dev/null 2>"$TEST_TMPDIR/err" &
pid=$!
# A guard, not a measure: how long the host takes to start the build does not matter.
for _ in $(seq 600); do grep -q " build-pid " "$FAKE_BAZEL_LOG" && break; sleep 0.1; done
grep -q " build-pid " "$FAKE_BAZEL_LOG" || fail "the build to interrupt never started"
kill -TERM "$pid"
wait "$pid"
rc=$?
err="$(cat "$TEST_TMPDIR/err")"
[[ $rc == 1 ]] || fail "an interrupted review should exit 1, got $rc: $err"
expect interrupt "$err" "review: interrupted during"
expect_not interrupt "$(cat "$FAKE_BAZEL_LOG")" " finished "
build_pid="$(sed -n 's/.* build-pid \([0-9]*\)$/\1/p' "$FAKE_BAZEL_LOG")"
[[ -n "$build_pid" ]] || fail "the fake bazel logged no build pid: $(cat "$FAKE_BAZEL_LOG")"
if [[ -n "$build_pid" ]] && kill -0 "$build_pid" 2>/dev/null; then
  fail "the interrupted build $build_pid still runs after review returned"
fi
[[ ! -e "$TEST_TMPDIR/base_wt" ]] || fail "the base worktree was not removed after an interrupt"
[[ "$(git worktree list | wc -l)" == 1 ]] || fail "worktrees left after an interrupt: $(git worktree list)"

# 5. A workspace below the repository's top (repo/ws/models/...).
outer="$TEST_TMPDIR/outer"
rm -rf "$outer"
mkdir -p "$outer/ws/models/tiny"
cd "$outer" || exit 1
git init -q . && git config user.email test@example.com && git config user.name test
printf '%s\n' 'decode_elf(name = "decode", config = "c")' 'layout_alignment(name = "decode_aligned", src = ":decode")' \
  'buffer_object_reuse(name = "decode_bo", src = ":decode_aligned")' >ws/models/tiny/BUILD
git add -A && git commit -qm outer || exit 1
printf '%s\n' 'decode_elf(name = "decode", config = "c")' 'layout_alignment(name = "decode_aligned", src = ":decode")' \
  >ws/models/tiny/BUILD
: >"$FAKE_BAZEL_LOG"
out="$(cd ws && "$review" --base=HEAD --bazel="$FAKE_BAZEL" --worktree="$TEST_TMPDIR/outer_wt" 2>&1)"
[[ $? == 0 ]] || fail "review in a subdirectory workspace exited non-zero: $out"
expect subdir "$out" '- removed: :decode_bo = buffer_object_reuse(src = ":decode_aligned")'
expect subdir "$out" '~ final stage: :decode_bo -> :decode_aligned'
expect subdir "$out" "no record in the base"
log="$(cat "$FAKE_BAZEL_LOG")"
expect subdir "$log" "$TEST_TMPDIR/outer_wt/ws build //models/tiny:decode_bo"
expect subdir "$log" "$outer/ws build //models/tiny:decode_aligned"
[[ ! -e "$TEST_TMPDIR/outer_wt" ]] || fail "the subdirectory case left its worktree"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo PASS
