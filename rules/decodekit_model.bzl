"""decodekit_model: a model's standard decode chain, its verify, profile and generate in one call.

    load("@decodekit//rules:defs.bzl", "decodekit_model")   # "//rules:defs.bzl" inside decodekit

    decodekit_model(
        name = "smollm2",
        model = "@smollm2_135m//:model.gguf",
        goldens = "@decodekit//models/smollm2_135m/goldens:hf_bf16.json",
    )

writes, in the calling package, the shape read from the model file (model_shape), then
THE STANDARD CHAIN (STANDARD_CHAIN below), one visible rule per stage, each linked to
the one before it by `src`:

    decode          decode_elf(config = <the shape>)
    decode_aligned  layout_alignment
    decode_bo       buffer_object_reuse
    decode_opt      merge_multi_launch
    decode_fused    fuse_kernels(allow_noop = True)
    decode_x12      compress_weights
    decode_q8       quantize_weights(scheme = "q8_0")
    decode_gguf     quantize_weights(scheme = "gguf", weights = <the model file>)   (a .gguf model only)
    decode_spec     speculative_decode(max_draft = 4)

every other option at its pass's default; then verify_chain (`verify`: every stage's
verify_test), decode_profile (`profile`) and decode_generate (`generate`, through
decode_gguf for a GGUF, decode_x12 otherwise), and a filegroup `name` of every stage's
ELF (`bazel build :<name>` builds the chain). decodekit's in-process chain builder runs
the same list, so the ELFs are the same bytes.

Every stage stays a rule of its own (`bazel query 'kind(".*", :all)'` lists them,
`bazel build :decode_opt` builds one), and each is revertible from the call:

  skip = ["decode_bo"]                  the stage is left out; the next stage's src
                                        points past it (the two-line revert of a
                                        hand-written chain). The baseline cannot be skipped.
  options = {"decode_q8": {"keep": []}} further attributes of a stage's rule (its
                                        pass's options, rules/optimizations.bzl); the
                                        chain is then no longer the standard one.

Stages are always named by their standard names ("decode_x12", without `prefix`) in
skip, options, verify_stages, long_stages and generate. A chain beyond the standard
one (a side branch such as a decode_q4) is written after the call as plain rules with
`src = ":decode_q8"`; verify_chain and decode_profile can name it as their `final`.

Goldens are required: the verify tool takes its prompts and HF reference from them
(tools/hf_reference records them); a model without goldens writes its chain by hand.
"""

load(":decode_elf.bzl", "decode_elf", "model_shape")
load(":generate.bzl", "decode_generate")
load(
    ":optimizations.bzl",
    "buffer_object_reuse",
    "compress_weights",
    "fuse_kernels",
    "layout_alignment",
    "merge_multi_launch",
    "quantize_weights",
    "speculative_decode",
)
load(":profile.bzl", "decode_profile")
load(":verify.bzl", "verify_chain")

# The standard chain: (stage name, rule kind, options), in order. "gguf" marks the
# stage a .gguf model alone has; its `weights` is the model file. The C++ chain builder
# holds the same list (a test compares their ELFs byte for byte): change both or neither.
STANDARD_CHAIN = [
    ("decode", "decode_elf", {}),
    ("decode_aligned", "layout_alignment", {}),
    ("decode_bo", "buffer_object_reuse", {}),
    ("decode_opt", "merge_multi_launch", {}),
    ("decode_fused", "fuse_kernels", {"allow_noop": True}),
    ("decode_x12", "compress_weights", {}),
    ("decode_q8", "quantize_weights", {"scheme": "q8_0"}),
    ("decode_gguf", "quantize_weights", {"scheme": "gguf", "weights": "gguf"}),
    ("decode_spec", "speculative_decode", {"max_draft": 4}),
]

_RULES = {
    "layout_alignment": layout_alignment,
    "buffer_object_reuse": buffer_object_reuse,
    "merge_multi_launch": merge_multi_launch,
    "fuse_kernels": fuse_kernels,
    "compress_weights": compress_weights,
    "quantize_weights": quantize_weights,
    "speculative_decode": speculative_decode,
}

def _is_gguf(model):
    return str(model).endswith(".gguf")

def _ref(name, prefix, stages, stage, what):
    """The label of stage `stage` (a standard name) of the chain `stages`, for `what`."""
    if stage not in stages:
        fail("decodekit_model(%s): %s: %s is not a stage of this chain %s" % (name, what, stage, stages))
    return ":" + prefix + stage

def standard_stages(gguf):
    """The standard chain's stage names for a .gguf model (gguf = True) or another."""
    return [s for s, _, _ in STANDARD_CHAIN if gguf or s != "decode_gguf"]

def decodekit_model(
        name,
        model,
        goldens,
        prefix = "",
        max_context = 0,
        weights = None,
        tokenizer = None,
        skip = [],
        options = {},
        verify_stages = None,
        long_goldens = None,
        long_stages = None,
        full_prompts = 0,
        verify_kwargs = {},
        profile = {},
        generate = None,
        visibility = None):
    """The standard decode chain of one model file, with its verify, profile and generate targets.

    Args:
      name: the model's name: the shape's `name` (written into every ELF) and the
        chain's DecodeElfInfo.model; also a filegroup of every stage's ELF.
      model: the model file: a .gguf (a label ending in ".gguf": then the chain has
        decode_gguf, and the file is the default weights and tokenizer), or an HF
        checkpoint's config.json (synthetic weights unless `weights` is given).
      goldens: the HF goldens (tools/hf_reference) the verify tests and the profile's
        gate run on. Required: verify reads its prompts from them.
      prefix: prepended to every target's name (the shape, the stages, verify,
        profile, generate), for two models in one package; "" (default): one model, the
        stages named as in models/*.
      max_context: the most positions the ELFs hold (0: the file's own, capped at
        elfc's default 32768).
      weights: the weights verify, profile and generate run on (default: the model
        file for a .gguf, synthetic weights of the shape otherwise).
      tokenizer: a .gguf or tokenizer.json (default: the model file for a .gguf;
        required otherwise).
      skip: standard stage names left out of the chain (the next stage's src points
        past each).
      options: {stage name: {attribute: value}}: further attributes of a stage's rule.
      verify_stages: stage names that get a verify test (`verify_<stage>`; default
        None: every stage). A stage left out is still built, as its child's parent.
      long_goldens: goldens of one long prompt; with it `verify_long_<stage>` for each
        stage of long_stages (default: the final stage).
      long_stages: stage names for the long case.
      full_prompts: prompts of the `verify_full` suite (0: none).
      verify_kwargs: further arguments of verify_chain (size, tags, slow_tags,
        long_size), over the macro's own (e.g. tokenizer = None: reports without text).
      profile: further attributes of decode_profile (plans, new_tokens, warmup, ...),
        over the macro's own; None: no profile target.
      generate: {target name: stage name}: the decode_generate targets (default:
        {"<prefix>generate": "decode_gguf"} for a .gguf, "decode_x12" otherwise).
      visibility: of every target (default: the package's).
    """
    gguf = _is_gguf(model)
    if not gguf and tokenizer == None:
        fail("decodekit_model(%s): model %s is no .gguf: give `tokenizer` (its tokenizer.json)" % (name, model))
    if weights == None and gguf:
        weights = model
    if tokenizer == None:
        tokenizer = model
    standard = standard_stages(gguf)
    for stage in skip:
        if stage not in standard:
            fail("decodekit_model(%s): skip: %s is not a stage of the standard chain %s" % (name, stage, standard))
        if stage == "decode":
            fail("decodekit_model(%s): skip: the baseline (decode) starts the chain; it cannot be skipped" % name)
    for stage in options:
        if stage not in standard or stage in skip:
            fail("decodekit_model(%s): options: %s is not a stage of this chain" % (name, stage))
    stages = [s for s in standard if s not in skip]

    shape = prefix + "config.textproto"
    model_shape(
        name = shape,
        model = model,
        model_name = name,
        max_context = max_context,
        visibility = visibility,
    )

    # The chain: one rule per stage, each from the stage before it.
    kinds = {s: (kind, opts) for s, kind, opts in STANDARD_CHAIN}
    previous = None
    for stage in stages:
        kind, opts = kinds[stage]
        attrs = {k: (model if v == "gguf" and k == "weights" else v) for k, v in opts.items()}
        attrs.update(options.get(stage, {}))
        if kind == "decode_elf":
            decode_elf(name = prefix + stage, config = ":" + shape, model = name, visibility = visibility, **attrs)
        else:
            _RULES[kind](name = prefix + stage, src = ":" + prefix + previous, visibility = visibility, **attrs)
        previous = stage
    final = _ref(name, prefix, stages, stages[-1], "final")

    native.filegroup(
        name = name,
        srcs = [":" + prefix + s for s in stages],
        visibility = visibility,
    )

    verify = dict(
        name = prefix + "verify",
        final = final,
        goldens = goldens,
        weights = weights,
        tokenizer = tokenizer,
        only = [_ref(name, prefix, stages, s, "verify_stages") for s in verify_stages] if verify_stages != None else None,
        full_prompts = full_prompts,
        long_goldens = long_goldens,
        long_stages = [_ref(name, prefix, stages, s, "long_stages") for s in long_stages] if long_stages != None else None,
        visibility = visibility,
    )
    verify.update(verify_kwargs)
    verify_chain(**verify)

    if profile != None:
        attrs = dict(
            name = prefix + "profile",
            final = final,
            goldens = goldens,
            tokenizer = tokenizer,
            weights = weights,
            kld_text = Label("@english_text//:text.txt"),
            visibility = visibility,
        )
        attrs.update(profile)
        decode_profile(**attrs)

    if generate == None:
        best = "decode_gguf" if gguf else "decode_x12"
        if best not in stages:
            best = [s for s in standard[:standard.index(best) + 1] if s in stages][-1]
        generate = {prefix + "generate": best}
    for target, stage in generate.items():
        decode_generate(
            name = target,
            elf = _ref(name, prefix, stages, stage, "generate"),
            tokenizer = tokenizer,
            weights = weights,
            visibility = visibility,
        )
