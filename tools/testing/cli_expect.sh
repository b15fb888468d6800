# Sourced by the tools' command-line tests (bad flags, bad paths):
#   tool=/path/to/binary
#   expect_exit NAME CODE MESSAGE ARGS...   # "$tool" ARGS exits CODE and prints MESSAGE
#   finish                                  # exit 1 if any expectation failed, else PASS
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_exit() {
  local name="$1" code="$2" message="$3"
  shift 3
  local out rc
  out="$("$tool" "$@" 2>&1)"
  rc=$?
  [[ $rc == "$code" ]] || fail "$name: exit $rc, expected $code; output:"$'\n'"$out"
  grep -qF -- "$message" <<<"$out" || fail "$name: no '$message' in:"$'\n'"$out"
}
finish() {
  if ((failures)); then
    echo "$failures failure(s)" >&2
    exit 1
  fi
  echo PASS
}
