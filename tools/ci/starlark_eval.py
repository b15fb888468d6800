"""Loading-phase evaluation of this workspace's BUILD and .bzl files in Python.

Starlark's syntax is a subset of Python's, and a BUILD file's loading phase (macros
expanding into rules) needs no analysis, so running the files with stand-ins for
Bazel's builtins yields what `bazel query` would list, without a Bazel server (a test
cannot start one). Stand-ins:
  - rule(attrs = {...}) returns a Rule: calling it in a BUILD file records a target
    (name, kind, attributes); its attrs stay readable (attr.int(...) returns an Attr
    with its type name and keyword arguments).
  - native.<anything>(name = ...) and the rules loaded from other repositories
    (@rules_cc, @rules_proto, ...) record a target of that kind; genrule `outs`,
    `out` attributes and exports_files add their files.
  - select() takes its default branch; glob() lists files; provider(), struct(),
    depset(), Label() are plain stand-ins; everything else Bazel defines that the
    loading phase never calls (ctx, actions) is absent.
`type()` answers Starlark's names ("string", "list", ...), as the .bzl files expect.
"""
import ast
import builtins
import glob as globlib
import os
import types


class Attr:
    def __init__(self, type_name, kwargs):
        self.type = type_name
        self.kwargs = kwargs

    def __repr__(self):
        return f"attr.{self.type}({self.kwargs})"


class _AttrModule:
    def __getattr__(self, type_name):
        return lambda **kw: Attr(type_name, kw)


class Rule:
    def __init__(self, evaluator, kind=None, attrs=None, doc="", outputs=None, **_):
        self.evaluator, self.kind, self.attrs, self.doc = evaluator, kind, attrs or {}, doc
        self.outputs = outputs or {}

    def __call__(self, name=None, **kw):
        self.evaluator.record(self.kind or "rule", name, kw, self)
        return None


class Struct(types.SimpleNamespace):
    def to_json(self):
        return str(self.__dict__)


def _starlark_type(x):
    names = {str: "string", bool: "bool", int: "int", list: "list", tuple: "tuple", dict: "dict",
             type(None): "NoneType", float: "float"}
    for t, n in names.items():
        if type(x) is t:
            return n
    if callable(x):
        return "function"
    return "struct"


class Package:
    def __init__(self, name):
        self.name = name
        self.targets = {}  # name -> {"name", "kind", attributes...}, as native.existing_rule()
        self.rules = {}  # name -> the Rule (a Starlark rule() of this workspace) that made it
        self.files = set()  # declared output and exported files


class Evaluator:
    def __init__(self, root):
        self.root = root
        self.modules = {}  # .bzl path -> its globals
        self.packages = {}
        self.rules_by_kind = {}
        self._pkg = None

    # ----------------------------------------------------------------- builtins
    def record(self, kind, name, kw, rule=None):
        if self._pkg is None or name is None:
            return
        self._pkg.targets[name] = dict(kw, name=name, kind=kind)
        if rule is not None:
            self._pkg.rules[name] = rule
        for key in ("outs", "out"):
            v = kw.get(key)
            for o in ([v] if isinstance(v, str) else v if isinstance(v, (list, tuple)) else []):
                if isinstance(o, str):
                    self._pkg.files.add(o)
        if rule is not None:
            for tmpl in rule.outputs.values() if isinstance(rule.outputs, dict) else []:
                if isinstance(tmpl, str):
                    self._pkg.files.add(tmpl.replace("%{name}", name))

    def _glob(self, include=(), exclude=(), **_):
        base = os.path.join(self.root, self._pkg.name) if self._pkg else self.root
        out = set()
        for pat in include:
            for p in globlib.glob(os.path.join(base, pat), recursive=True):
                if os.path.isfile(p):
                    out.add(os.path.relpath(p, base))
        for pat in exclude:
            for p in globlib.glob(os.path.join(base, pat), recursive=True):
                out.discard(os.path.relpath(p, base))
        return sorted(out)

    def _native(self):
        ev = self

        class Native:
            def __getattr__(self, kind):
                if kind == "package_name":
                    return lambda: ev._pkg.name if ev._pkg else ""
                if kind == "repository_name":
                    return lambda: "@"
                if kind == "glob":
                    return ev._glob
                if kind == "existing_rule":
                    return lambda n: ev._pkg.targets.get(n) if ev._pkg else None
                if kind == "existing_rules":
                    return lambda: dict(ev._pkg.targets) if ev._pkg else {}
                if kind == "exports_files":
                    return ev._exports_files
                if kind in ("package", "licenses", "package_group"):
                    return lambda *a, **k: None
                return lambda name=None, **kw: ev.record(kind, name, kw)

        return Native()

    def _exports_files(self, srcs=(), **_):
        if self._pkg is not None:
            self._pkg.files.update(srcs)

    def _base_globals(self):
        native = self._native()
        g = {
            "__builtins__": builtins,
            "rule": lambda implementation=None, **kw: Rule(self, **kw),
            "aspect": lambda implementation=None, **kw: Struct(**kw),
            "attr": _AttrModule(),
            "provider": lambda *a, **kw: (lambda **fields: Struct(**fields)),
            "struct": lambda **kw: Struct(**kw),
            "depset": lambda direct=None, transitive=None, **_: list(direct or []),
            "select": lambda d, **_: d.get("//conditions:default", next(iter(d.values()))),
            "Label": lambda s: s,
            "fail": self._fail,
            "type": _starlark_type,
            "native": native,
            "True": True, "False": False, "None": None,
            "transition": lambda **kw: Struct(**kw),
            "analysis_test_transition": lambda **kw: Struct(**kw),
            "config": _AttrModule(),
            "config_common": Struct(toolchain_type=lambda *a, **k: None),
            "platform_common": Struct(ToolchainInfo=lambda **k: Struct(**k), TemplateVariableInfo=lambda *a: None),
            "DefaultInfo": lambda **kw: Struct(**kw),
            "OutputGroupInfo": lambda **kw: Struct(**kw),
            "CcInfo": Struct(), "ProtoInfo": Struct(), "PyInfo": Struct(),
        }
        return g

    @staticmethod
    def _fail(*args, **_):
        raise RuntimeError("fail(): " + " ".join(str(a) for a in args))

    # ---------------------------------------------------------------- loading
    def _resolve(self, label, from_dir):
        """A load() label to (path under root, or None for another repository)."""
        if label.startswith("@decodekit//"):
            label = label[len("@decodekit"):]
        if label.startswith("@"):
            return None
        if label.startswith("//"):
            pkg, _, name = label[2:].partition(":")
            return os.path.join(pkg, name)
        return os.path.join(from_dir, label.lstrip(":"))

    def _exec(self, path, g):
        src = open(os.path.join(self.root, path), encoding="utf-8").read()
        from_dir = os.path.dirname(path)

        def load(label, *names, **aliases):
            target = self._resolve(label, from_dir)
            mod = self.load_bzl(target) if target else None
            for local, remote in list(zip(names, names)) + list(aliases.items()):
                if mod is not None:
                    g[local] = mod[remote]
                else:  # another repository's symbol: a rule of that name (cc_library, ...)
                    g[local] = self._foreign(remote)

        g["load"] = load
        code = compile(ast.parse(src, filename=path), path, "exec")
        exec(code, g)  # pylint: disable=exec-used

    def _foreign(self, symbol):
        ev = self
        if symbol[:1].isupper() or symbol.endswith("Info"):
            return Struct()
        if symbol == "unittest":
            return Struct(make=lambda impl, **kw: Rule(ev, **kw), begin=None, end=None)
        if symbol in ("analysistest",):
            return Struct(make=lambda impl, **kw: Rule(ev, **kw))
        if symbol == "asserts":
            return Struct()
        return lambda name=None, **kw: ev.record(symbol, name, kw)

    def load_bzl(self, path):
        path = os.path.normpath(path)
        if path not in self.modules:
            g = self._base_globals()
            saved, self._pkg = self._pkg, None
            self.modules[path] = g
            self._exec(path, g)
            self._pkg = saved
            for name, v in g.items():
                if isinstance(v, Rule) and v.kind is None:
                    v.kind = name
                    self.rules_by_kind[name] = v
        return self.modules[path]

    def package(self, pkg):
        """The Package at directory pkg (its BUILD or BUILD.bazel file evaluated)."""
        if pkg not in self.packages:
            p = Package(pkg)
            self.packages[pkg] = p
            for name in ("BUILD", "BUILD.bazel"):
                rel = os.path.join(pkg, name)
                if os.path.isfile(os.path.join(self.root, rel)):
                    g = self._base_globals()
                    native = g["native"]
                    for builtin in ("cc_library", "cc_binary", "cc_test", "sh_test", "sh_binary", "sh_library",
                                    "genrule", "filegroup", "genquery", "test_suite", "py_binary", "py_test",
                                    "py_library", "proto_library", "cc_proto_library", "alias", "config_setting",
                                    "java_binary", "cc_import", "constraint_setting", "constraint_value",
                                    "platform", "toolchain", "toolchain_type", "package", "licenses",
                                    "package_group", "exports_files", "glob"):
                        g[builtin] = getattr(native, builtin)
                    self._pkg = p
                    try:
                        self._exec(rel, g)
                    finally:
                        self._pkg = None
                    break
        return self.packages[pkg]
