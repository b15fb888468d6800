#!/usr/bin/env python3
"""labels_test.py FILE.bzl...: no plain-string label of a workspace target in code.

A .bzl that another workspace loads as @decodekit//rules:defs.bzl runs there: a label
written as a plain string ("//tools/verify") in a macro or an attribute default
resolves in the CALLER's repository, where no //tools/verify exists. The toolkit's
own targets are therefore written Label("//tools/verify") (resolved in the .bzl's own
repository); examples/workspace builds from another workspace to prove it, and this
test finds the mistake in seconds. Flags every string literal that is a whole label
("//pkg", "//pkg:name", "@repo//pkg:name") or names one in a make variable
("$(rootpath //pkg)") outside docstrings, comments, load()
statements and the direct argument of Label(); "//visibility:..." is not a target.
Prints each and exits 1.
"""
import io
import re
import sys
import tokenize

LABEL = re.compile(r"^(@[A-Za-z0-9_.-]*)?//[A-Za-z0-9_/.+-]*(:[A-Za-z0-9_/.+-]+)?$")
# "$(rootpath //tools/elf_dump)": a label inside a make variable, as plain as the above.
MAKE_VARIABLE = re.compile(r"\$\((location|locations|rootpath|rootpaths|execpath|execpaths) (@[A-Za-z0-9_.-]*)?//")


def violations(path):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    found = []
    in_load = 0  # parenthesis depth inside load(...)
    for i, t in enumerate(tokens):
        if t.type == tokenize.NAME and t.string == "load" and i + 1 < len(tokens) and tokens[i + 1].string == "(":
            in_load = -1
            continue
        if in_load:
            if t.string == "(":
                in_load = abs(in_load) + 1 if in_load > 0 else 1
            elif t.string == ")":
                in_load -= 1
            continue
        if t.type != tokenize.STRING or t.string.startswith(('"""', "'''")):
            continue
        value = t.string[1:-1]
        if not (LABEL.match(value) or MAKE_VARIABLE.search(value)) or value.startswith("//visibility:"):
            continue
        if i >= 2 and tokens[i - 1].string == "(" and tokens[i - 2].string == "Label":
            continue
        found.append("%s:%d: plain-string label in %s: build it from Label(\"//...\") (resolved in "
                     "this .bzl's repository, not the caller's)" % (path, t.start[0], t.string))
    return found


def main(paths):
    if not paths:
        print("usage: labels_test.py FILE.bzl...")
        return 2
    bad = [v for p in paths for v in violations(p)]
    for v in bad:
        print(v)
    if bad:
        return 1
    print("labels_test: %d .bzl files, no plain-string label in code" % len(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
