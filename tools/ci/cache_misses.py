#!/usr/bin/env python3
"""cache_misses.py EXEC_LOG [SKIP_MNEMONIC_REGEX]: the actions of a Bazel run that did
not come from the remote cache, from its --execution_log_json_file (a stream of
SpawnExec JSON objects). Prints a count per mnemonic and up to 40 of the actions
(mnemonic, first output, the runner that ran it, and why it could not hit when the
log says so). Used by .ci/run to name run 2's misses; exits 0 unless the log cannot be
read.

A test that writes no XML report of its own (a shell test, the verify and mutation
tests) gets its test.xml from a second TestRunner spawn that Bazel runs locally after
the test result itself came from the cache; that spawn is never uploaded, so it misses
on every run. Those are counted apart, and the last line, which .ci/run reads, gives the
rate over the spawns a cache could serve: "cacheable hits: H of C" (C: the spawns less
the skipped mnemonics and those reports; H: the remote cache hits among them)."""
import collections
import json
import re
import sys


def spawns(text):
    decoder, i, n = json.JSONDecoder(), 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return
        obj, i = decoder.raw_decode(text, i)
        yield obj


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    skip = re.compile(argv[2]) if len(argv) == 3 else None
    try:
        with open(argv[1]) as f:
            log = list(spawns(f.read()))
    except (OSError, ValueError) as e:
        print(f"cache_misses: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 1
    misses = []
    xml_reports = skipped = hits = 0
    for s in log:
        mnemonic = s.get("mnemonic", "?")
        if skip and skip.fullmatch(mnemonic):
            skipped += 1
            continue
        if s.get("remoteCacheHit"):
            hits += 1
            continue
        outputs = s.get("listedOutputs") or ["(no outputs)"]
        if mnemonic == "TestRunner" and len(outputs) == 1 and outputs[0].endswith("/test.xml"):
            xml_reports += 1
            continue
        why = []
        if not s.get("remotable", True) or not s.get("remoteCacheable", True):
            why.append("not remote-cacheable (tag or execution info)")
        if not s.get("cacheable", True):
            why.append("not cacheable")
        if s.get("exitCode", 0) != 0:
            why.append(f"exit {s['exitCode']}")
        why.append(f"runner {s.get('runner') or '(none)'}")
        misses.append((mnemonic, outputs[0], ", ".join(why)))
    counts = collections.Counter(m for m, _, _ in misses)
    print(f"cache misses: {len(misses)} of {len(log)} spawns"
          + (f" (mnemonics matching {argv[2]} left out)" if skip else ""))
    for mnemonic, count in counts.most_common():
        print(f"  {count:5d} {mnemonic}")
    for mnemonic, output, why in sorted(misses)[:40]:
        print(f"  miss: {mnemonic} {output} [{why}]")
    if len(misses) > 40:
        print(f"  ... and {len(misses) - 40} more")
    print(f"xml report spawns (written locally, never cached): {xml_reports}")
    print(f"cacheable hits: {hits} of {len(log) - skipped - xml_reports}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
