#!/usr/bin/env python3
"""Every command the CI scripts call comes from a package that ./bazelw installs.

    ci_tools_check.py BAZELW SCRIPT...

CI starts on a machine that has only Debian's essential and required packages plus
what `./bazelw --install-only` adds. A script under .ci/ that calls a tool from any
other package passes on every machine where someone happened to install it and fails
on the first fresh one (nginx once did exactly that). This check reads the scripts'
command words, resolves each on PATH, asks dpkg which package owns it, and fails unless
that package is in `BAZELW --print-packages` or is essential / required.

Shell builtins, keywords, the scripts' own functions and paths inside the repository
are not packages and are skipped. A word the parser takes for a command but PATH does
not know fails the check as well, so a parsing slip shows up instead of passing.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

SEPARATORS = {";", ";;", "&", "&&", "||", "|", "(", "((", "{", "!", "`", "$(", "\n",
              "then", "do", "else", "elif", "if", "while", "until", "time"}
# Words after which the next word is the command that runs.
WRAPPERS = {"exec", "command", "nice", "nohup", "timeout", "env", "xargs", "sudo"}
# Where Debian's packages put commands; a tool found only elsewhere (/usr/local, a
# pyenv shim) is one no package of this list brings.
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
BASH_WORDS = set(subprocess.run(["bash", "-c", "compgen -b; compgen -k"], check=True,
                                capture_output=True, text=True).stdout.split())


def strip_heredocs_and_comments(text):
    lines, out, tag = text.split("\n"), [], None
    for line in lines:
        if tag is not None:
            if line.strip() == tag:
                tag = None
            out.append("")
            continue
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if m:
            tag = m.group(1)
        if line.lstrip().startswith("#"):
            out.append("")
            continue
        out.append(re.sub(r"(^|\s)#(\s.*|$)", "", line))
    return "\n".join(out).replace("\\\n", " ")


def tokens(text):
    lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace = " \t\r"  # newlines end commands: keep them as tokens
    lex.commenters = ""
    lex.wordchars += "$@{}[]:=,.-/+*%~^!?#"
    out = []
    for tok in lex:
        out.append(tok)
    return out


def substitutions(word):
    """The texts of the $( ... ) command substitutions in one word."""
    out, start = [], word.find("$(")
    while start >= 0:
        depth, j = 0, start + 1
        while j < len(word):
            depth += word[j] == "("
            depth -= word[j] == ")"
            if depth == 0:
                break
            j += 1
        if not word[start + 2:].startswith("("):  # $(( ... )) is arithmetic
            out.append(word[start + 2:j])
        start = word.find("$(", j)
    return out


def command_words(text):
    """(functions defined, command words) of one script."""
    toks = tokens(strip_heredocs_and_comments(text))
    functions, commands = set(), []
    at_start, skip_until = True, None
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if skip_until:
            if t == skip_until:
                skip_until = None
            i += 1
            continue
        if t in ("[[",):
            skip_until = "]]"
        elif t == "((" or (t == "(" and nxt == "("):
            skip_until = "))" if t == "((" else None
            if t == "(":  # "((" split in two: skip to the closing pair
                depth = 0
                while i < len(toks):
                    depth += toks[i] == "("
                    depth -= toks[i] == ")"
                    i += 1
                    if depth <= 0:
                        break
                at_start = False
                continue
        elif t in ("for", "case", "select"):
            skip_until = "do" if t != "case" else "in"
            at_start = t == "case"
        elif t == "(" and not at_start:
            pass  # an escaped "\(" argument (find), not a subshell
        elif t in SEPARATORS:
            at_start = True
        elif "$(" in t:
            # a command substitution inside a word ("$(cmd ...)"): parse its text too
            for inner in substitutions(t):
                f, c = command_words(inner)
                functions |= f
                commands += c
            at_start = False
        elif at_start:
            if nxt == "()" or (nxt == "(" and toks[i + 2:i + 3] == [")"]):
                functions.add(t)  # name() { ... }
                i += 2 if nxt == "()" else 3
                continue
            if t.startswith("-"):  # an option after an escaped "\(" (find)
                i += 1
                continue
            if nxt == ")" or t.endswith(")"):  # a case pattern
                i += 1
                continue
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", t):
                i += 1  # VAR=value before the command
                continue
            if t in WRAPPERS:
                commands.append(t)
                i += 1
                while i < len(toks) and toks[i].startswith("-"):
                    i += 1
                if t in ("nice",) and i < len(toks) and re.match(r"^-?\d+$", toks[i]):
                    i += 1
                continue
            commands.append(t)
            at_start = False
        i += 1
    return functions, commands


def owner(path):
    real = os.path.realpath(path)
    for p in dict.fromkeys([path, real]):
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].split(",")[0].strip()
    # usrmerge: /usr/bin/x is recorded as /bin/x and the reverse
    for p in (real, path):
        alt = p[4:] if p.startswith("/usr/") else "/usr" + p
        r = subprocess.run(["dpkg-query", "-S", alt], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].split(",")[0].strip()
    return None


def dependency_closure(packages):
    """The packages that installing PACKAGES brings: their Depends and Pre-Depends,
    recursively, as the installed package database records them."""
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Depends}, ${Pre-Depends}\n"],
                         check=True, capture_output=True, text=True).stdout
    deps = {}
    for line in out.splitlines():
        name, _, rest = line.partition("\t")
        # "a (>= 1) | b, c:any" -> the first alternative of each: a, c
        deps[name] = [re.split(r"[ :(]", d.split("|")[0].strip())[0]
                      for d in rest.split(",") if d.strip()]
    seen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo += deps.get(p, [])
    return seen


def base_package(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Essential} ${Priority}", pkg],
                       capture_output=True, text=True)
    return r.returncode == 0 and (r.stdout.startswith("yes") or "required" in r.stdout)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().split("\n")[2].strip(), file=sys.stderr)
        return 2
    bazelw, scripts = argv[1], argv[2:]
    installed = set(subprocess.run([bazelw, "--print-packages"], check=True,
                                   capture_output=True, text=True).stdout.split())
    if not installed:
        print(f"ci_tools_check: {bazelw} --print-packages printed no packages")
        return 1
    listed, installed = installed, dependency_closure(installed)
    bad, seen = [], {}
    for script in scripts:
        with open(script) as f:
            functions, commands = command_words(f.read())
        for cmd in commands:
            if cmd in BASH_WORDS or cmd in functions or cmd in seen:
                continue
            if "/" in cmd or cmd.startswith("$"):
                continue  # a script of the repository, or one named by a variable
            path = shutil.which(cmd, path=DEBIAN_PATH)
            if path is None:
                bad.append(f"{script}: '{cmd}' is not in {DEBIAN_PATH}")
                seen[cmd] = None
                continue
            pkg = owner(path)
            seen[cmd] = pkg
            if pkg is None:
                bad.append(f"{script}: '{cmd}' ({path}) belongs to no Debian package")
            elif pkg not in installed and not base_package(pkg):
                bad.append(f"{script}: '{cmd}' comes from Debian package '{pkg}', which "
                           f"./bazelw does not install (add it to PACKAGES in bazelw)")
    for cmd, pkg in sorted(seen.items()):
        src = ("bazelw" if pkg in listed else
               "bazelw (dependency)" if pkg in installed else
               "base system" if pkg and base_package(pkg) else "MISSING")
        print(f"  {cmd:<14} {pkg or '-':<22} {src}")
    if bad:
        print("ci_tools_check: FAIL")
        for b in bad:
            print("  " + b)
        return 1
    print(f"ci_tools_check: {len(seen)} commands, each from a package ./bazelw installs "
          f"or from the base system")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
