"""Analysis tests of DecodeElfInfo.stages and of the checks that rely on it."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")
load("//rules:providers.bzl", "DecodeElfInfo")

# As in ../rules_test.bzl: analysistest.make without the unittest toolchain, which
# WORKSPACE does not register.
_allow_analysis_failures = analysis_test_transition(
    settings = {"//command_line_option:allow_analysis_failures": "True"},
)

def _analysis_test(impl, expect_failure = False, attrs = {}):
    attrs = dict(attrs)
    attrs["_impl_name"] = attr.string(default = "%s" % impl)
    kwargs = {"cfg": _allow_analysis_failures} if expect_failure else {}
    attrs["target_under_test"] = attr.label(mandatory = True, **kwargs)
    return rule(impl, attrs = attrs, test = True, analysis_test = True)

def _stages_test_impl(ctx):
    env = analysistest.begin(ctx)
    target = analysistest.target_under_test(env)
    info = target[DecodeElfInfo]
    stages = info.stages
    asserts.equals(env, ctx.attr.names, [s.name for s in stages])
    asserts.equals(env, ctx.attr.kinds, [s.kind for s in stages])
    asserts.equals(env, [""] + [":" + n for n in ctx.attr.names[:-1]], [s.src for s in stages])
    asserts.equals(env, [str(t.label) for t in ctx.attr.chain], [s.label for s in stages])
    for t, s in zip(ctx.attr.chain, stages):
        asserts.equals(env, t[DecodeElfInfo].elf, s.elf)
        asserts.equals(env, t[DecodeElfInfo].lineage, s.lineage)
        asserts.equals(env, t[DecodeElfInfo].stages, stages[:len(t[DecodeElfInfo].stages)])
    asserts.equals(env, None, stages[0].src_label)
    asserts.equals(env, info.elf, stages[-1].elf)
    asserts.equals(env, info.lineage, stages[-1].lineage)
    return analysistest.end(env)

# The chain of target_under_test, baseline first: names, kinds, src spelling and
# the ELF and lineage of each stage equal those of `chain`'s targets.
stages_test = _analysis_test(_stages_test_impl, attrs = {
    "names": attr.string_list(),
    "kinds": attr.string_list(),
    "chain": attr.label_list(providers = [DecodeElfInfo]),
})

def _fails_with_test_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.expect_failure(env, ctx.attr.message)
    return analysistest.end(env)

# target_under_test fails analysis with a message containing `message`.
fails_with_test = _analysis_test(_fails_with_test_impl, expect_failure = True, attrs = {
    "message": attr.string(mandatory = True),
})

def _no_stage_impl(ctx):
    src = ctx.attr.src[DecodeElfInfo]
    return [DecodeElfInfo(elf = src.elf, model = src.model, config = src.config, lineage = src.lineage, stages = src.stages)]

# A decode-ELF rule that forgets to append its stage (decode_profile must refuse it).
no_stage = rule(_no_stage_impl, attrs = {"src": attr.label(providers = [DecodeElfInfo])})
