"""verify_test and verify_chain: the verify gate under `bazel test`; verify_tokens: a stage's greedy run, once."""

load("//rules:providers.bzl", "DecodeElfInfo")
load("//rules:shell.bzl", "shell_exec", "shell_flag", "shell_quote", "shell_runfile_flag")

VerifyTokensInfo = provider(
    doc = "A stage's greedy run over the first `prompts` golden prompts, written by verify_tokens.",
    fields = {
        "tokens": "File: the run (verify/greedy_tokens.h)",
        "elf": "File: the decode ELF that ran",
        "prompts": "int: how many golden prompts",
        "validate": "bool: whether the run checked the BO protocol",
    },
)

def _verify_tokens_impl(ctx):
    info = ctx.attr.elf[DecodeElfInfo]
    out = ctx.actions.declare_file(ctx.label.name + ".json")
    args = ctx.actions.args()
    args.add("--elf", info.elf)
    args.add("--goldens", ctx.file.goldens)
    args.add("--prompts", str(ctx.attr.prompts))
    args.add("--weights", ctx.file.weights if ctx.file.weights else "synthetic")
    args.add("--gemv_tune=false")  # as verify_test: no choice by wall time
    if not ctx.attr.validate:
        args.add("--novalidate")
    args.add("--write_tokens", out)
    inputs = [info.elf, ctx.file.goldens] + ([ctx.file.weights] if ctx.file.weights else [])
    ctx.actions.run(
        # The verify binary of the target configuration, the one the tests run: no
        # second build of the runtime for the exec configuration, and a sanitizer
        # build (--config=asan) decodes under its sanitizer here too.
        executable = ctx.executable._verify,
        arguments = [args],
        inputs = inputs,
        outputs = [out],
        mnemonic = "VerifyTokens",
        progress_message = "Greedy decode of %s over %d golden prompts" % (ctx.attr.elf.label, ctx.attr.prompts),
    )
    return [
        DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out])),
        VerifyTokensInfo(tokens = out, elf = info.elf, prompts = ctx.attr.prompts, validate = ctx.attr.validate),
    ]

verify_tokens = rule(
    implementation = _verify_tokens_impl,
    doc = "Runs `elf`'s greedy decode on the CPU backend over the first `prompts` golden " +
          "prompts (verify --write_tokens) and writes the run, with the SHA-256 of the ELF, " +
          "the weights digest and the prompts, to `<name>.json`: a verify_test reads it as " +
          "`tokens` (its stage's run, for the top-5 gate) or `parent_tokens` (its parent's, " +
          "for the exact comparison) instead of decoding again, and verify refuses a file " +
          "made from other bytes. verify_chain makes one per stage and suite.",
    attrs = {
        "elf": attr.label(mandatory = True, providers = [DecodeElfInfo]),
        "goldens": attr.label(mandatory = True, allow_single_file = [".json"]),
        "prompts": attr.int(default = 2, values = [1, 2, 3, 4, 5, 6, 7, 8]),
        "weights": attr.label(allow_single_file = True, doc = "Weights file; none: synthetic."),
        "validate": attr.bool(default = True, doc = "Check the BO protocol while running."),
        "_verify": attr.label(default = Label("//tools/verify"), executable = True, cfg = "target"),
    },
)

def _check_tokens(ctx, attr, elf_target):
    """The VerifyTokensInfo of ctx.attr.<attr>, after checking it is elf_target's run of this test's prompts."""
    tokens = getattr(ctx.attr, attr)[VerifyTokensInfo]
    elf = elf_target[DecodeElfInfo].elf
    if tokens.elf != elf or tokens.prompts != ctx.attr.prompts or (ctx.attr.validate and not tokens.validate):
        fail("verify_test %s: %s %s is the run of %s over %d prompts%s, not of %s over %d" % (
            ctx.label,
            attr,
            getattr(ctx.attr, attr).label,
            tokens.elf.short_path,
            tokens.prompts,
            "" if tokens.validate else " (unvalidated)",
            elf.short_path,
            ctx.attr.prompts,
        ))
    return tokens

def _verify_test_impl(ctx):
    info = ctx.attr.elf[DecodeElfInfo]
    tool = ctx.executable._verify
    # The stage ELFs stay runfiles-relative (the verify tool reads --elf and
    # --parent_elf as given, and names them in its report); the defaults a user may
    # override are absolute (see shell.bzl).
    args = [
        shell_flag("elf", info.elf.short_path),
        shell_runfile_flag("goldens", ctx.file.goldens),
        shell_flag("prompts", "%d" % ctx.attr.prompts),
        shell_runfile_flag("weights", ctx.file.weights) if ctx.file.weights else shell_flag("weights", "synthetic"),
        # Tests do not choose kernel variants by wall time (every variant gives the
        # same bits; the tuner has its own tests with a fake clock).
        shell_flag("gemv_tune", "false"),
    ]
    files = [info.elf, ctx.file.goldens]
    if ctx.file.weights:
        files.append(ctx.file.weights)
    if ctx.file.tokenizer:
        args.append(shell_runfile_flag("tokenizer", ctx.file.tokenizer))
        files.append(ctx.file.tokenizer)
    if ctx.attr.parent:
        # The parent must be the stage `elf` was made from, as its provider records it:
        # verify_chain finds parents by walking `src` in the BUILD file, and this keeps
        # that walk and the providers from ever disagreeing.
        stages = info.stages
        expected = stages[-2].label if len(stages) > 1 else None
        if str(ctx.attr.parent.label) != expected:
            fail(("verify_test %s: parent %s is not the stage before elf %s (its chain: %s); " +
                  "set parent = \"%s\"") % (
                ctx.label,
                ctx.attr.parent.label,
                ctx.attr.elf.label,
                " -> ".join([s.label for s in stages]),
                expected or "(none: %s is a baseline, drop parent)" % ctx.attr.elf.label,
            ))
        parent = ctx.attr.parent[DecodeElfInfo]
        args.append(shell_flag("parent_elf", parent.elf.short_path))
        files.append(parent.elf)
        if ctx.attr.parent_tokens:
            parent_tokens = _check_tokens(ctx, "parent_tokens", ctx.attr.parent)
            args.append(shell_runfile_flag("parent_tokens", parent_tokens.tokens))
            files.append(parent_tokens.tokens)
    elif ctx.attr.parent_tokens:
        fail("verify_test %s: parent_tokens without parent" % ctx.label)
    if ctx.attr.tokens:
        if ctx.attr.mutation or not ctx.attr.greedy:
            # The file holds the unbroken ELF's greedy run.
            fail("verify_test %s: tokens does not go with mutation or greedy = False" % ctx.label)
        tokens = _check_tokens(ctx, "tokens", ctx.attr.elf)
        args.append(shell_runfile_flag("tokens", tokens.tokens))
        files.append(tokens.tokens)
    if info.stages[-1].changes_numerics:
        # A stage that changes the arithmetic (quantize_weights) cannot generate exactly
        # its parent's tokens, nor stay within the bf16-rounding tolerance of the numeric
        # check: the top-5 gate decides, the other two are reported.
        args.append(shell_quote("--parent_report_only"))
    elif [s for s in info.stages[:-1] if s.changes_numerics]:
        # A stage after one that changes the arithmetic (speculative_decode after
        # quantize_weights): its logits are that stage's, which the numeric check's bf16
        # tolerance does not describe (its own test reports them, not gated); the gate and
        # "same tokens as the parent" decide, the numeric check is reported.
        args.append(shell_quote("--numeric_report_only"))
    if not ctx.attr.validate:
        args.append(shell_quote("--novalidate"))
    if not ctx.attr.greedy:
        if ctx.attr.parent:
            fail("verify_test %s: greedy = False has no parent comparison (drop parent)" % ctx.label)
        args.append(shell_quote("--nogreedy"))
    if ctx.attr.kld_scheme:
        # The KLD gate: against the bf16 ancestor, the last stage before the chain's first
        # that changes numerics.
        first = [i for i, s in enumerate(info.stages) if s.changes_numerics]
        if not first or first[0] == 0:
            fail("verify_test %s: kld_scheme is for a stage at or after one that changes numerics (%s has none)" % (
                ctx.label,
                ctx.attr.elf.label,
            ))
        if not ctx.file.tokenizer:
            fail("verify_test %s: kld_scheme needs `tokenizer` (it encodes kld_text)" % ctx.label)
        ancestor = info.stages[first[0] - 1]
        args += [
            shell_flag("kld_reference_elf", ancestor.elf.short_path),
            shell_runfile_flag("kld_text", ctx.file.kld_text),
            shell_flag("kld_scheme", ctx.attr.kld_scheme),
        ]
        files += [ancestor.elf, ctx.file.kld_text]
    if ctx.attr.mutation:
        args.append(shell_flag("test_mutation", ctx.attr.mutation))
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    if ctx.attr.mutation:
        # A mutation test passes only when verify FAILS on a check (exit 1 and the
        # "verify: FAIL" line, not an input error), and each check in caught_by failed.
        if not ctx.attr.caught_by:
            fail("verify_test %s: a mutation needs caught_by (the checks that must fail)" % ctx.label)
        checks = " ".join([shell_quote(c) for c in ctx.attr.caught_by])
        body = """out="$(%s 2>&1)"; rc=$?
printf '%%s\\n' "$out"
mutation=%s
if [[ $rc -ne 1 ]] || ! grep -qx 'verify: FAIL' <<<"$out"; then
  echo "MUTATION NOT CAUGHT: $mutation: verify exited $rc (want 1 with 'verify: FAIL')"; exit 1
fi
for check in %s; do
  if ! grep -q "^$check: FAIL" <<<"$out"; then
    echo "MUTATION CAUGHT FOR THE WRONG REASON: $mutation: '$check' did not fail"; exit 1
  fi
done
echo "mutation $mutation caught by: $(grep -oE '^(gate|numeric|same tokens as parent|kld): FAIL' <<<"$out" | sed 's/: FAIL//' | paste -sd, -)"
""" % (shell_exec(tool, args).replace("exec ", "", 1), shell_quote(ctx.attr.mutation), checks)
    else:
        body = shell_exec(tool, args) + "\n"
    ctx.actions.write(
        output = script,
        is_executable = True,
        content = "#!/usr/bin/env bash\n# verify_test(%s): stage lineage %s\n%s" % (
            ctx.label,
            " -> ".join(info.lineage),
            body,
        ),
    )
    runfiles = ctx.runfiles(files = files).merge(ctx.attr._verify[DefaultInfo].default_runfiles)
    return [DefaultInfo(executable = script, runfiles = runfiles)]

verify_test = rule(
    implementation = _verify_test_impl,
    doc = "Runs `elf` on the CPU backend over the first `prompts` golden prompts and fails " +
          "unless the top-5 gate and the numeric check (teacher-forced logits at HF's top-5 " +
          "ids, verify/numeric.h) pass (and, with `parent`, unless it generates exactly " +
          "the parent stage's tokens, unless `elf`'s stage changes numerics (its " +
          "DecodeElfInfo.stages entry says so, e.g. quantize_weights): then that agreement " +
          "is reported, not gated; after such a stage, the numeric check is reported, not " +
          "gated). The goldens' weights digest must match the weights. " +
          "`parent` must be the stage before `elf` in its DecodeElfInfo.stages (checked at " +
          "analysis). With `tokens` / `parent_tokens` (verify_tokens of `elf` / `parent` over " +
          "the same prompts, checked at analysis), the greedy runs are read from the build's " +
          "files instead of decoded. Flags after `--` override the defaults (--weights, --goldens, ...).",
    test = True,
    attrs = {
        "elf": attr.label(mandatory = True, providers = [DecodeElfInfo]),
        "parent": attr.label(providers = [DecodeElfInfo], doc = "The stage `elf` was derived from (its src)."),
        "goldens": attr.label(mandatory = True, allow_single_file = [".json"]),
        "prompts": attr.int(default = 2, values = [1, 2, 3, 4, 5, 6, 7, 8]),
        "weights": attr.label(allow_single_file = True, doc = "Weights file; none: synthetic."),
        "tokens": attr.label(
            providers = [VerifyTokensInfo],
            doc = "verify_tokens of `elf` over these prompts: the gate reads `elf`'s greedy run " +
                  "from it (checked at analysis and by verify) instead of running it. None: the " +
                  "test runs it.",
        ),
        "parent_tokens": attr.label(
            providers = [VerifyTokensInfo],
            doc = "verify_tokens of `parent` over these prompts: the parent comparison reads " +
                  "the parent's greedy run from it instead of running `parent`. None: the test runs it.",
        ),
        "tokenizer": attr.label(allow_single_file = True, doc = "For readable reports."),
        "validate": attr.bool(default = True, doc = "Check the BO protocol while running."),
        "greedy": attr.bool(
            default = True,
            doc = "False: one teacher-forced run gives both the gate and the numeric check " +
                  "(the gate's verdict is the same; no parent comparison). For long prompts.",
        ),
        "mutation": attr.string(
            doc = "Test only (tests/mutations): verify --test_mutation; the test then passes " +
                  "only when verify fails, with every check in caught_by failing.",
        ),
        "caught_by": attr.string_list(doc = "With mutation: checks that must fail (gate, numeric, kld)."),
        "kld_scheme": attr.string(
            doc = "The KLD gate (verify/kld_bounds.h): the weight scheme of the chain's quantize_weights " +
                  "stage (q8_0, q4_0, gguf); `elf`'s mean KL divergence from its bf16 ancestor (the stage " +
                  "before the chain's first that changes numerics) over kld_text must stay within that " +
                  "scheme's bound. Needs `tokenizer`. Empty: no KLD gate.",
        ),
        "kld_text": attr.label(allow_single_file = True, default = Label("@english_text//:text.txt")),
        "_verify": attr.label(default = Label("//tools/verify"), executable = True, cfg = "target"),
    },
)

def _local_name(src):
    """The target name of `src` (a label string) if it is in this package, else None."""
    src = str(src)
    package = native.package_name()
    for prefix in [":", "//%s:" % package, "@//%s:" % package]:
        if src.startswith(prefix):
            return src[len(prefix):]
    if ":" not in src and "/" not in src and not src.startswith("@"):
        return src  # "decode": a bare name is a target of this package
    return None

def _chain(final):
    """The stage names from the baseline to `final`, found by walking `src` back.

    A macro cannot read providers, so the walk reads the rules already defined in
    this package (native.existing_rule): the chain must be defined above the
    verify_chain call, and within this package. A rule without `src` is the baseline.
    """
    name = _local_name(final)
    if name == None:
        fail("verify_chain(final = %r): the final stage must be a target of this package (:name)" % final)
    chain = []
    for _ in range(1000):
        rule = native.existing_rule(name)
        if rule == None:
            fail(("verify_chain(final = %r): no rule :%s above this verify_chain call in %s " +
                  "(a macro sees only the rules defined before it: define the chain first)") % (
                final,
                name,
                native.package_name(),
            ))
        if name in chain:
            fail("verify_chain(final = %r): the chain loops at :%s" % (final, name))
        chain.insert(0, name)
        src = rule.get("src")
        if not src:
            return chain  # the baseline (decode_elf has no src)
        parent = _local_name(src)
        if parent == None:
            fail(("verify_chain(final = %r): stage :%s's src %s is in another package; the " +
                  "chain (baseline included) must be defined in this package, e.g. " +
                  "decode_elf(name = \"decode\", config = \":config.textproto\")") % (
                final,
                name,
                src,
            ))
        name = parent
    fail("verify_chain(final = %r): the chain is longer than 1000 stages" % final)

def _kld_scheme(stage):
    """quantize_weights' scheme for a stage of that rule (":decode_q8"), else ""."""
    rule = native.existing_rule(stage.lstrip(":"))
    if rule == None or rule.get("kind") != "quantize_weights":
        return ""
    return rule.get("scheme") or "q8_0"

def verify_chain(name, final, goldens, weights = None, tokenizer = None, full_prompts = 0,
                 long_goldens = None, long_stages = None, long_size = "large", slow_tags = [],
                 only = None, full_stages = None, kld = False, **kwargs):
    """Verify tests for every stage of a decode chain, written once as `src` links.

    The stages are found by walking `src` back from `final` to the baseline (a rule
    without `src`) through the rules defined above this call in the same package.
    For each stage S: `<name>_<S>` runs the gate on 2 prompts and, for every stage
    after the first, checks that S generates exactly the tokens of the stage before
    it (its `src`; verify_test checks at analysis that this is the stage before S in
    S's DecodeElfInfo.stages) -- except a stage that changes numerics (its provider
    says so: quantize_weights), for which that agreement is only reported. `<name>` is a test_suite of them all. With
    full_prompts > 0, `<name>_full_<S>` and the suite `<name>_full` do the same on
    that many prompts. Each stage is its own test, so a change to the last stage
    re-runs only that stage's tests. Each stage's greedy decode runs once per suite, in
    a build action `<suite>_tokens_<S>` (verify_tokens, also for a stage left out by
    `only` that is a tested stage's parent): `<suite>_<S>` reads it for the gate, and
    the next stage's test for the parent comparison; each test decodes only its
    teacher-forced run (verify/README.md). The long tests decode as before.

    Args:
      name: the suite's name, e.g. "verify".
      final: the chain's last stage, e.g. ":decode_opt".
      goldens: the HF goldens file.
      weights: the weights file (None: synthetic weights).
      tokenizer: for readable reports.
      full_prompts: prompts of the full suite (0: no full suite).
      long_goldens: goldens of one long prompt (positions past 1024); with it,
        `<name>_long_<S>` runs the gate and the numeric check on it (one
        teacher-forced run, no parent comparison) for each stage S in long_stages,
        and is part of the suite `<name>`.
      long_stages: the stage names (":decode_opt") that run the long case; None: the
        final stage only (the prompt is fed one token at a time: a slow baseline
        would cost minutes).
      long_size: the long tests' size.
      slow_tags: tags added to the full-suite and long tests only (e.g.
        "sanitizer_slow", which --config=asan / --config=ubsan skip).
      only: the stage names (":decode_x12") that get `<name>_<S>` and `<name>_full_<S>`
        tests; None (the default): every stage. A stage left out is still built as
        the parent of the next one; use it to keep a costly suite to a few stages.
      kld: a stage of quantize_weights (which changes numerics) also passes the KLD gate in
        `<name>_<S>` (verify/kld_bounds.h: its mean KL divergence from its bf16 ancestor over
        a 256-token slice of @english_text; it needs `tokenizer`). On for the trained
        models; synthetic weights' near-uniform logits score ~30x under the bound whatever
        the stage does, at ~a minute per 0.5B model (docs/perplexity.md).
      full_stages: the stage names that get `<name>_full_<S>` (None: those of `only`).
        The baseline-speed stages (decode, decode_aligned, decode_bo) cost minutes on
        8 prompts and are checked on 2 by `<name>_<S>`; their full suite is left out
        where CI time matters.
      **kwargs: passed to every test (e.g. tags, size); tags and visibility also to the
        verify_tokens targets.
    """
    stages = [":" + s for s in _chain(final)]
    for arg, names in [("only", only), ("full_stages", full_stages)]:
        for stage in names or []:
            if stage not in stages:
                fail("verify_chain(%s): %s is not a stage of the chain %s" % (arg, stage, stages))
    suites = {name: 2}
    if full_prompts:
        suites[name + "_full"] = full_prompts
    slow_kwargs = dict(kwargs, tags = kwargs.get("tags", []) + slow_tags)
    for suite, prompts in suites.items():
        tests = []
        suite_kwargs = kwargs if suite == name else slow_kwargs
        tested = [
            i
            for i, stage in enumerate(stages)
            if (only == None or stage in only) and (suite == name or full_stages == None or stage in full_stages)
        ]

        # Each stage's greedy run once, in a build action: read by its own test (the
        # gate) and by its child's (the parent comparison), which no longer decode it.
        needed = {}
        for i in tested:
            needed[i] = True
            if i > 0:
                needed[i - 1] = True  # a stage left out by `only` is still a parent
        tokens = {}
        for i in sorted(needed.keys()):
            tokens[i] = ":%s_tokens_%s" % (suite, stages[i].lstrip(":").replace("/", "_"))
            verify_tokens(
                name = tokens[i][1:],
                elf = stages[i],
                goldens = goldens,
                prompts = prompts,
                weights = weights,
                # The tests' tags (manual, sanitizer_slow, ...) select these as well.
                tags = suite_kwargs.get("tags", []),
                visibility = kwargs.get("visibility"),
            )
        for i in tested:
            stage = stages[i]
            test = "%s_%s" % (suite, stage.lstrip(":").replace("/", "_"))
            verify_test(
                name = test,
                elf = stage,
                parent = stages[i - 1] if i > 0 else None,
                tokens = tokens[i],
                parent_tokens = tokens[i - 1] if i > 0 else None,
                goldens = goldens,
                prompts = prompts,
                weights = weights,
                tokenizer = tokenizer,
                kld_scheme = _kld_scheme(stage) if kld and suite == name and tokenizer else "",
                **suite_kwargs
            )
            tests.append(":" + test)
        if long_goldens and suite == name:
            for stage in (long_stages if long_stages != None else [final]):
                if stage not in stages:
                    fail("verify_chain(long_stages): %s is not a stage of the chain %s" % (stage, stages))
                test = "%s_long_%s" % (suite, stage.lstrip(":").replace("/", "_"))
                verify_test(
                    name = test,
                    elf = stage,
                    goldens = long_goldens,
                    prompts = 1,
                    greedy = False,
                    weights = weights,
                    tokenizer = tokenizer,
                    **dict(slow_kwargs, size = long_size)
                )
                tests.append(":" + test)
        if not tests:
            # (an empty test_suite would mean every test of the package)
            fail("verify_chain %s: `only` leaves suite %s no test" % (name, suite))
        native.test_suite(name = suite, tests = tests)
