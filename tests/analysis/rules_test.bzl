"""Analysis tests of decode_elf and the optimization rules (docs/architecture.md s.9).

Each test looks at one target of tests/analysis/BUILD as Bazel analyzed it: its
DecodeElfInfo (lineage, model, config), and its one action (mnemonic, argv).
"""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")
load("//rules:providers.bzl", "DecodeElfInfo")

# skylib's analysistest.make() declares the unittest toolchain type, which only
# bazel_skylib_workspace() registers, and WORKSPACE does not call it (Bazel then
# fails with "no matching toolchains found for types
# @bazel_skylib//toolchains/unittest:toolchain_type"). Analysis tests never use
# that toolchain (analysistest.end returns AnalysisTestResultInfo), so
# _analysis_test below is analysistest.make without it; the assertions,
# begin/end and target_under_test are skylib's. With the toolchains registered
# in WORKSPACE it can become analysistest.make again.
_ActionsInfo = provider(fields = {"actions": "list of Action: the target's actions"})

def _actions_aspect_impl(target, ctx):
    return [_ActionsInfo(actions = target.actions)]

_actions_aspect = aspect(implementation = _actions_aspect_impl)

_allow_analysis_failures = analysis_test_transition(
    settings = {"//command_line_option:allow_analysis_failures": "True"},
)

def _analysis_test(impl, expect_failure = False, attrs = {}):
    attrs = dict(attrs)
    attrs["_impl_name"] = attr.string(default = "%s" % impl)
    kwargs = {"cfg": _allow_analysis_failures} if expect_failure else {}
    attrs["target_under_test"] = attr.label(aspects = [_actions_aspect], mandatory = True, **kwargs)
    return rule(impl, attrs = attrs, test = True, analysis_test = True)

def _target_actions(env):
    return analysistest.target_under_test(env)[_ActionsInfo].actions

def _arg_after(env, argv, flag):
    """The argument following `flag` in argv, or None (and a failure)."""
    if flag not in argv:
        asserts.true(env, False, "argv %s has no %s" % (argv, flag))
        return None
    i = argv.index(flag)
    if i + 1 >= len(argv):
        asserts.true(env, False, "argv %s ends with %s" % (argv, flag))
        return None
    return argv[i + 1]

def _stage_test_impl(ctx):
    env = analysistest.begin(ctx)
    target = analysistest.target_under_test(env)
    asserts.true(env, DecodeElfInfo in target, "%s provides no DecodeElfInfo" % target.label)
    if DecodeElfInfo not in target:
        return analysistest.end(env)
    info = target[DecodeElfInfo]
    out = info.elf
    asserts.equals(env, target.label.name + ".elf", out.basename)
    asserts.equals(env, [out], target[DefaultInfo].files.to_list())
    asserts.equals(env, ctx.attr.model, info.model)
    asserts.equals(env, "tiny.textproto", info.config.basename)

    # Exactly one action, the pass (or elfc), writing the ELF.
    actions = [a for a in _target_actions(env) if a.mnemonic == ctx.attr.mnemonic]
    asserts.equals(env, 1, len(actions), "actions with mnemonic %s" % ctx.attr.mnemonic)
    asserts.equals(env, 1, len(_target_actions(env)), "actions in all")
    if len(actions) != 1:
        return analysistest.end(env)
    action = actions[0]
    argv = action.argv
    asserts.equals(env, [out], action.outputs.to_list())
    asserts.equals(env, out.path, _arg_after(env, argv, "--out"))

    if ctx.attr.src:
        src = ctx.attr.src[DecodeElfInfo]

        # The lineage grows by exactly this pass; model and config are carried.
        asserts.equals(env, src.lineage + [ctx.attr.pass_name], info.lineage)
        asserts.equals(env, src.model, info.model)
        asserts.equals(env, src.config, info.config)
        asserts.equals(env, src.elf.path, _arg_after(env, argv, "--in"))
        asserts.true(env, src.elf in action.inputs.to_list(), "the src ELF is no input of the action")
        asserts.true(env, "--pass=" + ctx.attr.pass_name in argv, "no --pass=%s in %s" % (ctx.attr.pass_name, argv))
        asserts.true(env, argv[0].endswith("elf_opt"), "the tool %s is not elf_opt" % argv[0])
    else:
        asserts.equals(env, ["baseline"], info.lineage)
        asserts.equals(env, info.config.path, _arg_after(env, argv, "--config"))
        asserts.true(env, argv[0].endswith("elfc"), "the tool %s is not elfc" % argv[0])
    # Only a stage that changes the arithmetic says so (verify_test then reports,
    # not gates, its agreement with the parent).
    asserts.equals(env, ctx.attr.changes_numerics, info.stages[-1].changes_numerics, "changes_numerics")
    for arg in ctx.attr.expected_args:
        asserts.true(env, arg in argv, "argv %s lacks %s" % (argv, arg))
    for arg in ctx.attr.unexpected_args:
        asserts.false(env, arg in argv, "argv %s has %s" % (argv, arg))
    return analysistest.end(env)

decode_elf_stage_test = _analysis_test(
    _stage_test_impl,
    attrs = {
        "src": attr.label(providers = [DecodeElfInfo], doc = "The stage's src (none: a decode_elf)."),
        "pass_name": attr.string(doc = "The pass the lineage gains and --pass names."),
        "mnemonic": attr.string(default = "DecodeElfOpt"),
        "changes_numerics": attr.bool(doc = "What the stage's DecodeElfInfo.stages entry must say."),
        "model": attr.string(default = "tiny"),
        "expected_args": attr.string_list(doc = "Arguments argv must contain."),
        "unexpected_args": attr.string_list(doc = "Arguments argv must not contain."),
    },
)

def _not_a_decode_elf_test_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.expect_failure(env, "does not have mandatory providers: 'DecodeElfInfo'")
    return analysistest.end(env)

# A `src` that is not a decode ELF fails analysis, naming the missing provider.
not_a_decode_elf_test = _analysis_test(_not_a_decode_elf_test_impl, expect_failure = True)
