#!/usr/bin/env bash
# Renders the profile's HTML report in headless Chromium (Debian's package, which
# ./bazelw installs) and checks that the three SVG charts are in the rendered DOM and
# that a screenshot is a non-trivial PNG. ./bazelw installs Chromium on every machine
# it builds on, so a missing Chromium is a failure here, never a skip.
set -euo pipefail

CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$CHROMIUM" ]]; then
  echo "FAIL: chromium is not on PATH ($PATH); ./bazelw installs the Debian package 'chromium'" >&2
  exit 1
fi

out="$TEST_TMPDIR/profile_out"
tests/profile/profile.sh --out_dir="$out" --build_file=tests/profile/BUILD --bandwidth_mib=64 --noscreenshot \
  > "$TEST_TMPDIR/profile.log" 2>&1 || rc=$?
if [[ "${rc:-0}" != 3 ]]; then  # 3: the forced stage was reverted, as intended
  cat "$TEST_TMPDIR/profile.log" >&2
  echo "FAIL: the profile exited with ${rc:-0}, expected 3" >&2
  exit 1
fi
html="$out/phase5_decode.html"

export HOME="$TEST_TMPDIR/home"
mkdir -p "$HOME"
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run
       --hide-scrollbars --user-data-dir="$TEST_TMPDIR/chromium-profile")
dom="$TEST_TMPDIR/dom.html"
timeout 120 "$CHROMIUM" "${flags[@]}" --dump-dom "file://$html" > "$dom" 2> "$TEST_TMPDIR/chromium.log" || {
  cat "$TEST_TMPDIR/chromium.log" >&2
  echo "FAIL: chromium --dump-dom failed" >&2
  exit 1
}
for id in waterfall breakdown trend; do
  if ! grep -q "<svg id=\"$id\"" "$dom"; then
    echo "FAIL: chart <svg id=\"$id\"> missing from the rendered DOM" >&2
    exit 1
  fi
done
bars="$(grep -o 'class="bar ' "$dom" | wc -l)"
segs="$(grep -o 'class="seg"' "$dom" | wc -l)"
lines="$(grep -o 'class="series"' "$dom" | wc -l)"
echo "rendered: $bars waterfall bars, $segs breakdown segments, $lines trend series"
(( bars == 6 )) || { echo "FAIL: expected 6 waterfall bars (5 stages + final), got $bars" >&2; exit 1; }
(( segs >= 6 )) || { echo "FAIL: expected >= 6 breakdown segments, got $segs" >&2; exit 1; }
(( lines == 5 )) || { echo "FAIL: expected 5 trend series, got $lines" >&2; exit 1; }

png="${TEST_UNDECLARED_OUTPUTS_DIR:-$TEST_TMPDIR}/phase5_decode.png"
timeout 120 "$CHROMIUM" "${flags[@]}" --screenshot="$png" --window-size=1200,2200 "file://$html" \
  >> "$TEST_TMPDIR/chromium.log" 2>&1 || {
  cat "$TEST_TMPDIR/chromium.log" >&2
  echo "FAIL: chromium --screenshot failed" >&2
  exit 1
}
[[ -f "$png" ]] || { echo "FAIL: no screenshot written" >&2; exit 1; }
size="$(stat -c %s "$png")"
magic="$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')"
[[ "$magic" == 89504e470d0a1a0a ]] || { echo "FAIL: $png is not a PNG" >&2; exit 1; }
(( size > 30000 )) || { echo "FAIL: screenshot is only $size bytes (blank page?)" >&2; exit 1; }
echo "PASS: screenshot $png ($size bytes)"
