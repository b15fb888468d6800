#!/usr/bin/env python3
"""skipped_tests.py TESTLOGS ALLOWED: the test cases that skipped, read from the
test.xml files under TESTLOGS (a bazel-testlogs directory), checked against ALLOWED.

Bazel counts a test target as PASSED when its test cases skip, so a check that stops
running (an instruction set not detected, a tool missing on PATH) goes unnoticed. Two
kinds of skip are read here:
  - GoogleTest's GTEST_SKIP: GoogleTest writes the target's test.xml itself, with
    result="skipped" and a <skipped message="..."/> child on that <testcase>;
  - a shell (or any other) test that writes no XML of its own and skips a check: by
    this project's convention it prints a line "[  SKIPPED ] NAME REASON..." (the
    marker GoogleTest prints for its own skips) and goes on or exits 0. Bazel copies
    such a test's whole log into the test.xml it generates for it (<system-out>), and
    the line is found there.

ALLOWED (.ci/allowed_skips.txt) lists the reviewed skips, one a line:
    //package:target TestSuite.TestName  # why this skip is acceptable
A skip that is not listed fails the check, as does an entry without its reason.

Prints one line per skip ("SKIPPED //target name: message", marked "(not allowed)"
where it fails), then a last line that .ci/run reads:
    "skipped: N, not allowed: M"
Exits 0 when M is 0, 1 when a skip is not allowed or a test.xml or ALLOWED cannot be
read (an unreadable report must not pass for one without skips), 2 on a usage error.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

MARKER = re.compile(r"^\[  SKIPPED \] (\S+)(?:[ \t]+(.*?))?[ \t]*$", re.M)
# Per-shard and per-run report directories: pkg/name/shard_1_of_4/test.xml.
SHARD_OR_RUN = re.compile(r"^(shard|run)_\d+_of_\d+(_(shard|run)_\d+_of_\d+)?$")


def target_of(testlogs, xml_path):
    parts = os.path.relpath(os.path.dirname(xml_path), testlogs).split(os.sep)
    while len(parts) > 1 and SHARD_OR_RUN.match(parts[-1]):
        parts.pop()
    return "//%s:%s" % ("/".join(parts[:-1]), parts[-1])


def skips_in(text):
    """(name, message) of each skipped test case in one test.xml's text."""
    root = ET.fromstring(text)
    out = []
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if case.get("result") == "skipped" or skipped is not None:
            name = case.get("name", "?")
            if case.get("classname"):
                name = case.get("classname") + "." + name
            message = skipped.get("message", "") if skipped is not None else ""
            # GoogleTest's message is "file:line" and the streamed text on lines below it.
            lines = [l.strip() for l in message.splitlines() if l.strip()]
            if len(lines) > 1 and re.match(r"^\S+:\d+$", lines[0]):
                lines = lines[1:]
            out.append((name, " ".join(lines)))
    for out_elem in root.iter("system-out"):
        for m in MARKER.finditer(out_elem.text or ""):
            out.append((m.group(1), (m.group(2) or "").strip()))
    return out


def find_skips(testlogs):
    """[(target, name, message)] over every test.xml under testlogs, sorted."""
    if not os.path.isdir(testlogs):
        raise ValueError(f"{testlogs}: no such directory")
    skips = []
    for dirpath, dirnames, filenames in os.walk(testlogs):
        dirnames.sort()
        if "test.xml" in filenames:
            path = os.path.join(dirpath, "test.xml")
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            try:
                found = skips_in(text)
            except ET.ParseError as e:
                raise ValueError(f"{path}: not readable as XML: {e}")
            target = target_of(testlogs, path)
            skips += [(target, name, message) for name, message in found]
    return sorted(set(skips))


def read_allowed(path):
    """{(target, name): reason} of the allow-list."""
    allowed = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            entry, _, reason = line.partition("#")
            words = entry.split()
            if not words:
                continue
            if len(words) != 2 or not words[0].startswith("//") or not reason.strip():
                raise ValueError(f"{path}:{n}: want '//package:target TestName  # reason', "
                                 f"got {line.rstrip()!r}")
            allowed[(words[0], words[1])] = reason.strip()
    return allowed


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().split("\n")[0], file=sys.stderr)
        return 2
    testlogs, allowed_path = argv[1], argv[2]
    try:
        allowed = read_allowed(allowed_path)
        skips = find_skips(testlogs)
    except (OSError, ValueError) as e:
        print(f"skipped_tests: {e}")
        print("skipped: 0, not allowed: 1")
        return 1
    bad = 0
    for target, name, message in skips:
        ok = (target, name) in allowed
        bad += not ok
        print(f"SKIPPED {target} {name}: {message or '(no message)'}"
              f"{'' if ok else '  (not allowed: not in ' + allowed_path + ')'}")
    print(f"skipped: {len(skips)}, not allowed: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
