#!/usr/bin/env bash
# A stand-in for bazel in review_test.sh: `build //models/<m>:<stage>...` "builds"
# by copying a prebuilt ELF to bazel-bin/models/<m>/<stage>.elf in the current
# directory (the tree review runs it in): $FAKE_OPT_ELF when that tree's BUILD
# still has the decode_bo rule, else $FAKE_ALIGNED_ELF. `shutdown` does nothing.
# Every call is logged as "<cwd> <args>" to $FAKE_BAZEL_LOG; FAKE_BAZEL_FAIL=1
# makes builds fail. A build leaves a "server" behind holding stdout and stderr, as
# bazel's client does: review must not wait for it. The server's pid is appended to
# $FAKE_BAZEL_SERVERS (when set), and it holds on until the file $FAKE_BAZEL_RELEASE
# exists (5 s when that is unset), so that the test can see it still holding the
# pipes after review has returned. Its 300 s guard, longer than the test may run,
# only ends servers that a killed test left behind. A build logs "<cwd> build-pid <pid>"
# when it starts and "<cwd> finished <pid>" when it runs to its end.
set -euo pipefail
echo "$PWD $*" >>"$FAKE_BAZEL_LOG"
cmd="${1:-}"
shift || true
case "$cmd" in
  shutdown) exit 0 ;;
  build) echo "$PWD build-pid $$" >>"$FAKE_BAZEL_LOG" ;;
  *) echo "fake_bazel: unknown command '$cmd'" >&2; exit 2 ;;
esac
if [[ "${FAKE_BAZEL_FAIL:-0}" == 1 ]]; then
  echo "ERROR: fake_bazel: build of $* failed (FAKE_BAZEL_FAIL=1)" >&2
  exit 1
fi
# FAKE_BAZEL_SLEEP=N: a long build (review_test interrupts it).
if [[ -n "${FAKE_BAZEL_SLEEP:-}" ]]; then sleep "$FAKE_BAZEL_SLEEP"; fi
# Like bazel's client, leave a "server" behind that holds on to stdout and stderr.
if [[ -n "${FAKE_BAZEL_RELEASE:-}" ]]; then
  (for _ in $(seq 3000); do [[ -e "$FAKE_BAZEL_RELEASE" ]] && break; sleep 0.1; done) &
else
  sleep 5 &
fi
if [[ -n "${FAKE_BAZEL_SERVERS:-}" ]]; then echo "$!" >>"$FAKE_BAZEL_SERVERS"; fi
for target in "$@"; do
  pkg="${target#//}"
  pkg="${pkg%%:*}"
  name="${target##*:}"
  if grep -q 'name = "decode_bo"' "$pkg/BUILD"; then elf="$FAKE_OPT_ELF"; else elf="$FAKE_ALIGNED_ELF"; fi
  mkdir -p "bazel-bin/$pkg"
  cp "$elf" "bazel-bin/$pkg/$name.elf"
done
echo "INFO: Build completed successfully" >&2
echo "$PWD finished $$" >>"$FAKE_BAZEL_LOG"
