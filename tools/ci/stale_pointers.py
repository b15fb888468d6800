#!/usr/bin/env python3
"""Every Bazel label and repository path that a comment or a document names exists.

    stale_pointers.py ROOT     check the tree at ROOT (exit 1 listing each stale one)
    stale_pointers.py FILE     the tree FILE's real path lies in (//tools/ci:stale_pointers_test)

It first runs the rules on planted text (self_test: planted stale pointers found, the
well-formed and template ones not), then on every file.

Files read: every file under ROOT named *.h, *.cc, *.md, *.bzl, BUILD or BUILD.bazel,
outside bazel-* output links, hidden directories other than .ci, and repositories of
their own inside ROOT (a directory with a WORKSPACE: examples/workspace,
third_party/rules_cc), whose labels are theirs. The whole text of each is read,
comments and code alike: a label in a usage string misleads as much as one in a
comment.

What counts as a pointer (and nothing else does):
  - A Bazel label of this workspace: `//` not preceded by a word character, `@`, `:`,
    `/` or `>` (so not `@repo//x`, not `@<name>//x`, not `https://x`), then a package path of lower-case
    letters, digits, `_`, `-`, `.`, `/` (possibly empty), then optionally `:` and a
    target name (letters, digits, `_ - . + / =`). It holds when the package's
    directory has a BUILD file and the target is a file in that package, a target
    its BUILD file makes (the file evaluated with its macros, starlark_eval.py: what
    `bazel query //pkg:all` lists) or a file one declares (genrule outs, exports_files),
    or one of Bazel's wildcards (`:all`, `:*`, `:all-targets`); `//pkg/...` holds when
    pkg is a directory; visibility's `//visibility:public|private`, `//pkg:__pkg__`,
    `//pkg:__subpackages__` and transitions' `//command_line_option:x` are Bazel's.
  - A repository path: a token of `[A-Za-z0-9_.+-]` and `/` that starts with one of
    ROOT's top-level directories followed by `/`, not preceded by a word character,
    `/`, `.`, `-`, `@` or `:` (so not `../x`, `/tmp/x`, `bazel-bin/x`, `a.b/x`). A
    trailing `.`/`,`/`:`/`;` is punctuation, not part of it. It holds when the file or
    directory exists, or when a build makes it: `x.pb.h` / `x.pb.cc` beside an
    `x.proto`; a declared output of its package, or a file named after one of its
    targets plus an extension (the launcher a rule writes: tests/profile/profile.sh);
    a path through a directory .gitignore names (tools/peer/.venv, tools/peer/.build: a tool makes it).
  - A relative link of a Markdown file, `](target)` whose target has no scheme and does
    not start with `#`: it holds when the target (without its `#anchor`) exists
    relative to the Markdown file's directory.
  Skipped as templates: a label or path running into `<`, `{`, `*`, `$`, `%` or `...`
  (`//models/<m>:profile`, `phase5_decode.{md,html}`, `kernels/*/BUILD`,
  `"//models/%s:%s" % ...`), and a label whose package ends in `/` (a prefix that code
  completes: `StrCat("//models/", name)`).

The allow-list (ALLOWED) holds deliberate examples only, each with its reason; an entry
that no file needs any more fails the check too, so the list stays short.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import starlark_eval  # noqa: E402

SCANNED_NAMES = {"BUILD", "BUILD.bazel"}
SCANNED_EXTS = (".h", ".cc", ".md", ".bzl")
WILDCARD_TARGETS = {"all", "*", "all-targets"}

# (file relative to ROOT, or "*" for any file; the pointer as written): why it names
# something absent. Deliberate examples only.
ALLOWED = {
    ("*", "tools/cpp/runfiles/runfiles.h"):
        "@bazel_tools's runfiles library, #included by the path Bazel ships it under",
    ("docs/build-and-ci.md", "//package:target"): "the form of an entry of .ci/allowed_skips.txt",
    ("docs/peer-comparison.md", "weights/s"): "a unit (weights per second), not a path",
    ("tools/fuzz/fuzz.bzl", "//p"): "the end of a sed command, s/^Running: //p",
    ("tools/review/review.cc", "docs/development_progress/phase5_decode.md"):
        "the record's path inside a model's package, which the code prefixes with it",
    ("util/cli.h", "models/m"): "an example of an error message about a made-up path",
    ("tools/profile/record_test.cc", "//models/m"): "a made-up model package, the test's fixture",
    ("tools/profile/record_test.cc", "//models/m:profile"): "a made-up model package, the test's fixture",
    ("tools/profile/record_test.cc", "models/m"): "a made-up model package, the test's fixture",
    ("tools/profile/record_test.cc", "models/m/BUILD"): "a made-up model package, the test's fixture",
    ("tools/review/chain_test.cc", "//models/m:decode"): "a made-up model package, the test's fixture",
    ("tools/review/chain_test.cc", "//models/other:decode"): "a made-up model package, the test's fixture",
}

ALLOWED_USED = set()

LABEL_RE = re.compile(r"(?<![\w@:/>])//([a-z0-9_.\-/]*)(?::([A-Za-z0-9_\-.+/=]+))?")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
TEMPLATE_CHARS = ("<", "{", "*", "$", "%")


def is_template(text, end):
    rest = text[end:end + 3]
    return rest[:1] in TEMPLATE_CHARS or rest == "..."


class Tree:
    def __init__(self, root):
        self.root = root
        self.top = sorted(d for d in os.listdir(root)
                          if os.path.isdir(os.path.join(root, d)) and not d.startswith("bazel-")
                          and (not d.startswith(".") or d == ".ci"))
        tops = "|".join(re.escape(d) for d in self.top)
        self.path_re = re.compile(r"(?<![\w/.\-@:])((?:%s)/[A-Za-z0-9_.+\-/]*)" % tops)
        self._targets = {}
        self.evaluator = starlark_eval.Evaluator(root)
        # Other repositories inside this one (their own WORKSPACE): their labels are theirs.
        self.nested = set()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(("bazel-", ".git"))]
            if "WORKSPACE" in filenames and os.path.abspath(dirpath) != os.path.abspath(root):
                self.nested.add(os.path.relpath(dirpath, root))
                dirnames[:] = []
        # Directories .gitignore names (virtual environments, caches): made by tools, never tracked.
        # A name without "/" is ignored anywhere; a path (tools/peer/.build), under it.
        self.made = set()
        self.made_paths = set()
        gitignore = os.path.join(root, ".gitignore")
        if os.path.exists(gitignore):
            for line in open(gitignore):
                line = line.strip().strip("/")
                if line and not line.startswith("#") and "*" not in line:
                    (self.made_paths if "/" in line else self.made).add(line)

    def exists(self, rel):
        return os.path.exists(os.path.join(self.root, rel))

    def build_file(self, pkg):
        for name in ("BUILD", "BUILD.bazel"):
            path = os.path.join(self.root, pkg, name)
            if os.path.isfile(path):
                return path
        return None

    def targets(self, pkg):
        """The targets and declared output / exported files of pkg (its BUILD file evaluated)."""
        if pkg not in self._targets:
            p = self.evaluator.package(pkg)
            self._targets[pkg] = set(p.targets) | p.files
        return self._targets[pkg]

    def label_problem(self, pkg, target):
        """None when //pkg[:target] exists, else what is wrong."""
        pkg = pkg.rstrip("/")
        if pkg == "visibility" and target in ("public", "private"):
            return None
        if pkg == "command_line_option":  # Bazel's own settings, named by transitions
            return None
        if target in ("__pkg__", "__subpackages__"):  # visibility: a package, or a directory tree
            ok = self.build_file(pkg) if target == "__pkg__" else os.path.isdir(os.path.join(self.root, pkg))
            return None if ok else f"no package {pkg}"
        if pkg.endswith("/...") or pkg == "...":
            base = pkg[:-3].rstrip("/")
            return None if not base or os.path.isdir(os.path.join(self.root, base)) else f"no directory {base}"
        if self.build_file(pkg) is None:
            return f"no package {pkg or '(root)'} (no BUILD file)"
        if target is None or target in WILDCARD_TARGETS:
            return None
        if target in self.targets(pkg) or os.path.isfile(os.path.join(self.root, pkg, target)):
            return None
        return f"package {pkg or '(root)'} has no target or file {target}"

    def path_holds(self, path):
        if self.exists(path):
            return True
        parts = path.split("/")
        if any(p in self.made for p in parts) or any(path == m or path.startswith(m + "/") for m in self.made_paths):
            return True  # a tool's virtual environment, cache or build folder
        d, f = os.path.dirname(path), os.path.basename(path)
        for ext in (".pb.h", ".pb.cc"):  # protoc's outputs of a .proto beside them
            if f.endswith(ext) and self.exists(os.path.join(d, f[:-len(ext)] + ".proto")):
                return True
        # A file a target of its package makes: a declared output, or the target's name
        # plus an extension (the launcher script a rule writes, e.g. tests/profile/profile.sh).
        if self.build_file(d) is not None:
            targets = self.targets(d)
            if f in targets or f.split(".")[0] in targets:
                return True
        return False

    def scanned_files(self):
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("bazel-")
                                 and (not d.startswith(".") or (rel_dir == "." and d == ".ci"))
                                 and os.path.normpath(os.path.join(rel_dir, d)) not in self.nested)
            for f in sorted(filenames):
                if f in SCANNED_NAMES or f.endswith(SCANNED_EXTS):
                    yield os.path.normpath(os.path.join(rel_dir, f))


def problems_in(tree, rel, text):
    """[(line, pointer, problem)] for one file's text."""
    out = []

    def line_of(pos):
        return text.count("\n", 0, pos) + 1

    for m in LABEL_RE.finditer(text):
        if is_template(text, m.end()):
            continue
        pkg, target = m.group(1), m.group(2)
        if pkg.endswith("/") and target is None:
            continue  # a prefix the code completes
        if target is not None:
            target = target.rstrip(".,;")
        elif pkg.endswith(".") and not pkg.endswith("..."):
            pkg = pkg.rstrip(".")
        problem = tree.label_problem(pkg, target)
        if problem:
            out.append((line_of(m.start()), m.group(0).rstrip(".,;"), problem))
    for m in tree.path_re.finditer(text):
        if is_template(text, m.end()):
            continue
        path = m.group(1).rstrip(".,;:")
        if not tree.path_holds(path):
            out.append((line_of(m.start()), path, "no such file or directory"))
    if rel.endswith(".md"):
        for m in LINK_RE.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            target = target.split("#")[0]
            if not os.path.exists(os.path.join(tree.root, os.path.dirname(rel), target)):
                out.append((line_of(m.start()), target, f"link target missing (relative to {os.path.dirname(rel) or '.'})"))
    kept = []
    for p in out:
        key = (rel, p[1]) if (rel, p[1]) in ALLOWED else ("*", p[1])
        if key in ALLOWED:
            ALLOWED_USED.add(key)
        else:
            kept.append(p)
    return kept


def check(root):
    tree = Tree(root)
    found, files = [], 0
    for rel in tree.scanned_files():
        files += 1
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        for line, pointer, problem in problems_in(tree, rel, text):
            found.append(f"{rel}:{line}: {pointer}: {problem}")
    print(f"stale_pointers: {files} files read under {root}")
    for key in sorted(set(ALLOWED) - ALLOWED_USED):
        found.append(f"{key[0]}: {key[1]}: allowed in ALLOWED but named nowhere; drop the entry")
    for f in found:
        print(f"STALE {f}")
    if found:
        print(f"stale_pointers: {len(found)} stale pointers; fix them or, for a deliberate example, "
              "add it to ALLOWED in tools/ci/stale_pointers.py with its reason", file=sys.stderr)
        return 1
    print("stale_pointers: none stale")
    return 0


def self_test(root):
    """The rules on planted text, against the real tree: each planted stale pointer is
    found, and none of the well-formed or template ones is."""
    tree = Tree(root)
    planted = "\n".join([
        "see //tools/ci:no_such_target and //no/such/package",       # 1, 2
        "and runtime/cpu/no_such_file.h, docs/no_such_doc.md.",       # 3, 4
        "[a link](no_such_page.md#part)",                              # 5
        "fine: //tools/ci:ci_tools_test //tools/ci //tools/... //tools/ci:all",
        "fine: tools/ci/stale_pointers.py, tools/ci/, elf/program.pb.h, //:bazelw",
        "fine: //models/smollm2_135m:verify_long_decode_x12 (made by decodekit_model)",
        "fine: //models/<m>:profile models/<m>/BUILD kernels/*/BUILD //models/%s:%s",
        "fine: https://example.com//x @rules_cc//cc:defs.bzl ../shared/x /tmp/tools/x",
        "fine: [up](../README.md) [web](https://x.org/a.md) [here](#anchor)",
    ])
    got = [p[1] for p in problems_in(tree, "docs/planted.md", planted)]
    want = ["//tools/ci:no_such_target", "//no/such/package", "runtime/cpu/no_such_file.h",
            "docs/no_such_doc.md", "no_such_page.md"]
    if sorted(got) != sorted(want):
        print(f"stale_pointers: self-test found {got}, expected {want}", file=sys.stderr)
        return 1
    return 0


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    if os.path.isfile(root):  # a file of the tree (Bazel passes //:bazelw): its real directory
        root = os.path.dirname(os.path.realpath(root))
    return self_test(root) or check(root)


if __name__ == "__main__":
    sys.exit(main())
