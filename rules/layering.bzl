"""layering_test: the dependency arrows of README's "Layout", checked by bazel test.

Each library package calls `layering_test()` at the end of its BUILD file. The macro
collects every rule defined above it in that package, queries their transitive
dependencies (`genquery`, so the check is part of `bazel test //...`), and fails
when one of them reaches a package its layer may not use. `visibility` states the
same arrows for direct dependencies; this test also catches indirect ones.

The same test reads the package's BUILD file and .bzl files: each load() of a
.bzl of this workspace must come from a package the layer may use, or from
rules/, the root of the load graph (every .bzl of the build lives there, and its
own .bzl files load only from rules/).
"""

# Layer -> the layers it may use directly (README "Layout"; docs/architecture.md s.2). A
# package belongs to the layer with the longest matching prefix; `tools/`,
# `tests/` and `models/` are leaves that no layer may use. `formats` (the weight
# formats' names and byte geometry) is the lowest layer: every layer reaches it.
LAYERS = {
    "formats": [],
    "util": ["formats"],
    "registry": ["formats", "util"],
    "elf": ["formats", "registry", "util"],
    "graph": ["elf", "registry", "util"],
    "optimizations": ["elf", "formats", "graph", "registry", "util"],
    "kernels": ["formats", "util"],
    "weights": ["elf", "formats", "util"],
    "tokenizer": ["weights", "util"],
    "chain": ["elf", "formats", "graph", "optimizations", "registry", "weights", "util"],
    "runtime": ["elf", "registry", "weights", "util"],
    "runtime/cpu": ["runtime", "kernels"],
    "verify": ["runtime", "runtime/cpu", "tokenizer"],
    # The public C++ API (api/decodekit.h) over the CPU backend and the tokenizer.
    "api": ["chain", "elf", "runtime", "runtime/cpu", "tokenizer", "util"],
    # Starlark only (the public rules, their providers, this file): loaded by
    # every package, loading none.
    "rules": [],
}

# What any package may load .bzl files from, besides its layer's packages.
_LOAD_ROOT = "rules"

def _closure(layer):
    """Every layer `layer` may reach, itself included (transitive closure)."""
    seen = {layer: True}
    frontier = [layer]
    for _ in range(len(LAYERS)):
        next_frontier = []
        for l in frontier:
            for d in LAYERS.get(l, []):
                if d not in seen:
                    seen[d] = True
                    next_frontier.append(d)
        frontier = next_frontier
    return sorted(seen.keys())

def layer_of(package):
    """The layer a package belongs to ("" for leaves: tools, tests, models)."""
    best = ""
    for layer in LAYERS:
        if (package == layer or package.startswith(layer + "/")) and len(layer) > len(best):
            best = layer
    return best

def layering_test(name = "layering_test", allow = []):
    """Fails if a rule of this package depends, even indirectly, on a layer it may not use.

    Args:
      name: the test's name.
      allow: further package prefixes this package may reach, each with a reason in
        the BUILD file (e.g. a test reading a model's committed goldens as data).
    """
    package = native.package_name()
    layer = layer_of(package)
    if not layer:
        fail("layering_test() in //%s: this package is in no layer of LAYERS (rules/layering.bzl)" % package)
    targets = sorted([":" + r["name"] for r in native.existing_rules().values()])

    # The files whose load()s are checked: this BUILD file and the package's .bzl.
    starlark = [":BUILD"] + [":" + f for f in native.glob(["*.bzl"])]
    if not targets:
        fail("layering_test() in //%s must come after the package's rules" % package)
    native.genquery(
        name = name + "_deps",
        testonly = True,
        expression = "deps(set(%s))" % " ".join(["//%s%s" % (package, t) for t in targets]),
        scope = targets,
        visibility = ["//visibility:private"],
    )

    # Layers a dependency may belong to: everything this layer reaches, and for a
    # sub-layer (runtime/cpu) whatever lies below its own prefix.
    native.sh_test(
        name = name,
        size = "small",
        srcs = ["//tests/layering:check_layers.sh"],
        args = [
            package,
            layer,
            ",".join(_closure(layer) + allow),
            ",".join(sorted(LAYERS.keys())),
            "$(location :%s_deps)" % name,
            ",".join(_closure(layer) + allow + ([] if layer == _LOAD_ROOT else [_LOAD_ROOT])),
        ] + ["$(location %s)" % f for f in starlark],
        data = [":%s_deps" % name] + starlark,
    )
