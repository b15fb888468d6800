"""verify_test and verify_chain: the verify gate under `bazel test`."""

load("//tools/build_defs:providers.bzl", "DecodeElfInfo")

def _verify_test_impl(ctx):
    info = ctx.attr.elf[DecodeElfInfo]
    tool = ctx.executable._verify
    args = [
        "--elf=" + info.elf.short_path,
        "--goldens=" + ctx.file.goldens.short_path,
        "--prompts=%d" % ctx.attr.prompts,
        "--weights=" + (ctx.file.weights.short_path if ctx.file.weights else "synthetic"),
    ]
    files = [info.elf, ctx.file.goldens]
    if ctx.file.weights:
        files.append(ctx.file.weights)
    if ctx.file.tokenizer:
        args.append("--tokenizer=" + ctx.file.tokenizer.short_path)
        files.append(ctx.file.tokenizer)
    if ctx.attr.parent:
        parent = ctx.attr.parent[DecodeElfInfo]
        args.append("--parent_elf=" + parent.elf.short_path)
        files.append(parent.elf)
    if not ctx.attr.validate:
        args.append("--novalidate")
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.write(
        output = script,
        is_executable = True,
        content = "#!/usr/bin/env bash\n# verify_test(%s): stage lineage %s\nexec ./%s %s \"$@\"\n" % (
            ctx.label,
            " -> ".join(info.lineage),
            tool.short_path,
            " ".join(args),
        ),
    )
    runfiles = ctx.runfiles(files = files).merge(ctx.attr._verify[DefaultInfo].default_runfiles)
    return [DefaultInfo(executable = script, runfiles = runfiles)]

verify_test = rule(
    implementation = _verify_test_impl,
    doc = "Runs `elf` on the CPU backend over the first `prompts` golden prompts and fails " +
          "unless the verify gate passes (and, with `parent`, unless it generates exactly " +
          "the parent stage's tokens). The goldens' weights digest must match the weights.",
    test = True,
    attrs = {
        "elf": attr.label(mandatory = True, providers = [DecodeElfInfo]),
        "parent": attr.label(providers = [DecodeElfInfo], doc = "The stage `elf` was derived from."),
        "goldens": attr.label(mandatory = True, allow_single_file = [".json"]),
        "prompts": attr.int(default = 2, values = [1, 2, 3, 4, 5, 6, 7, 8]),
        "weights": attr.label(allow_single_file = True, doc = "Weights file; none: synthetic."),
        "tokenizer": attr.label(allow_single_file = True, doc = "For readable reports."),
        "validate": attr.bool(default = True, doc = "Check the BO protocol while running."),
        "_verify": attr.label(default = "//tools/verify", executable = True, cfg = "target"),
    },
)

def verify_chain(name, stages, goldens, weights = None, tokenizer = None, full_prompts = 0, **kwargs):
    """Verify tests for every stage of a decode chain.

    For each stage S (a label like ":decode_bo"): `<name>_<S>` runs the gate on 2
    prompts and, for every stage after the first, checks that S generates exactly
    the tokens of the stage before it. `<name>` is a test_suite of them all. With
    full_prompts > 0, `<name>_full_<S>` and the suite `<name>_full` do the same on
    that many prompts.

    Args:
      name: the suite's name, e.g. "verify".
      stages: the chain, baseline first.
      goldens: the HF goldens file.
      weights: the weights file (None: synthetic weights).
      tokenizer: for readable reports.
      full_prompts: prompts of the full suite (0: no full suite).
      **kwargs: passed to every test (e.g. tags, size).
    """
    suites = {name: 2}
    if full_prompts:
        suites[name + "_full"] = full_prompts
    for suite, prompts in suites.items():
        tests = []
        for i, stage in enumerate(stages):
            test = "%s_%s" % (suite, stage.lstrip(":").replace("/", "_"))
            verify_test(
                name = test,
                elf = stage,
                parent = stages[i - 1] if i > 0 else None,
                goldens = goldens,
                prompts = prompts,
                weights = weights,
                tokenizer = tokenizer,
                **kwargs
            )
            tests.append(":" + test)
        native.test_suite(name = suite, tests = tests)
