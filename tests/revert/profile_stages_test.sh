#!/usr/bin/env bash
# Runs the reverted chain's profile (as `bazel run //tests/revert:profile` would, with
# a temporary --out_dir and few tokens) and checks that the record holds exactly the
# stages given in $1 (comma-separated, in order), every one passing the gate.
set -euo pipefail
expected="$1"
out="$TEST_TMPDIR/profile_out"
rc=0
tests/revert/profile.sh --out_dir="$out" --json_out="$out/record.json" --bandwidth_mib=16 --nopng \
  > "$TEST_TMPDIR/profile.log" 2>&1 || rc=$?
# 0: all passed; 4: the final stage is not faster than the baseline, which two tokens
# of a tiny model cannot promise. Anything else (3: a stage reverted) is a failure.
if [[ "$rc" != 0 && "$rc" != 4 ]]; then
  cat "$TEST_TMPDIR/profile.log" >&2
  echo "FAIL: the profile exited with $rc" >&2
  exit 1
fi
python3 - "$out/record.json" "$expected" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
names = [s["name"] for s in record["stages"]]
expected = sys.argv[2].split(",")
if names != expected:
    sys.exit("FAIL: the record's stages are %s, expected %s" % (names, expected))
for s in record["stages"]:
    # "applied, slower than its parent" depends on timing (tests share 2 cores).
    if s["status"] not in ("baseline", "applied", "applied, slower than its parent") or not s["gate"]["passed"]:
        sys.exit("FAIL: stage %s: status %s, gate passed %s" % (s["name"], s["status"], s["gate"]["passed"]))
srcs = [s["src"] for s in record["stages"]]
if srcs != [""] + [":" + n for n in names[:-1]]:
    sys.exit("FAIL: the stages' src are %s" % srcs)
print("PASS: stages %s" % " -> ".join(names))
PY
