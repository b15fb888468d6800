"""The decode optimizations as Bazel rules.

Each rule takes a decode ELF target (`src`, which must provide DecodeElfInfo),
runs one pass of //tools/elf_opt over it in the exec configuration, and provides
a new decode ELF with the lineage and the stages extended (DecodeElfInfo.stages:
the chain, baseline first, which verify_chain and decode_profile read from the
final stage, so a chain is written once). Applying or reverting an
optimization is adding or deleting one rule line in a model's chain (and
pointing the next rule's `src` past it); what checks and times the chain names
only its final stage:

    load("//rules:defs.bzl", ...)

    decode_elf(name = "decode", config = "config.textproto")
    layout_alignment(name = "decode_aligned", src = ":decode")
    buffer_object_reuse(name = "decode_bo", src = ":decode_aligned")
    merge_multi_launch(name = "decode_opt", src = ":decode_bo")

    verify_chain(name = "verify", final = ":decode_opt", goldens = "goldens/hf_bf16.json")
    decode_profile(name = "profile", final = ":decode_opt", goldens = ..., tokenizer = ...)

Besides src, target and allow_noop, a rule's attributes are its pass's options
(named, typed and documented as in the pass table, optimizations/passes.cc, which
//tests/passes:options_match_rules_test holds them to), given to elf_opt as
`name=value` arguments by the one helper _option_args. The pass table owns every
option's default and allowed values, and elf_opt's flags own the target's: an
attribute left unset is not passed at all, so a default is stated once, where
elf_opt, `elf_opt --help` and the pass tests (which run without Bazel) read it.

A pass that changes nothing fails the build unless allow_noop = True, so an inert
stage cannot hide in a chain. `target` selects the constraints the pass respects
("cpu", or "npu2" for the reference NPU's limits).
"""

load("//rules:providers.bzl", "DecodeElfInfo", "derived_decode_elf_info")

_COMMON_ATTRS = {
    "src": attr.label(
        doc = "The decode ELF to transform (a decode_elf or another optimization).",
        mandatory = True,
        providers = [DecodeElfInfo],
    ),
    "target": attr.string(
        doc = "Whose constraints the pass respects: a target of the registry (cpu, npu2). " +
              "Unset: elf_opt's default.",
    ),
    "allow_noop": attr.bool(
        doc = "Succeed even when the pass changes nothing.",
        default = False,
    ),
    "_elf_opt": attr.label(
        default = Label("//tools/elf_opt"),
        executable = True,
        cfg = "exec",
    ),
}

# An int option attribute's default: unset (the pass table's default applies).
_UNSET_INT = -1

def _option_args(ctx, options):
    """elf_opt's pass options: `name=value` for each attribute in `options` that is set.

    The attributes carry the names of the pass's options in the pass table
    (optimizations/passes.cc). An int is written in decimal, a string as it is;
    a string list comma-joined. Unset (_UNSET_INT, "", []) is left out: the pass's
    default applies.
    """
    args = []
    for name in options:
        value = getattr(ctx.attr, name)
        if type(value) == "int":
            if value != _UNSET_INT:
                args.append("%s=%d" % (name, value))
        elif type(value) == "string":
            if value:
                args.append("%s=%s" % (name, value))
        elif type(value) == "list":
            if value:
                args.append("%s=%s" % (name, ",".join(value)))
        else:
            fail("option attribute %s: no key=value form for a %s" % (name, type(value)))
    return args

def _run_pass(ctx, pass_name, extra_args, changes_numerics = False, weights = None):
    """The one action every optimization rule runs; returns its providers.

    `weights`: a GGUF File whose header fills the pass's option `stored`.
    """
    src = ctx.attr.src[DecodeElfInfo]
    out = ctx.actions.declare_file(ctx.label.name + ".elf")
    args = ctx.actions.args()
    args.add("--pass=" + pass_name)
    if ctx.attr.target:
        args.add("--target=" + ctx.attr.target)
    args.add("--in", src.elf)
    args.add("--out", out)
    if ctx.attr.allow_noop:
        args.add("--allow_noop")
    if weights:
        args.add("--weights", weights)
    args.add_all(extra_args)
    ctx.actions.run(
        executable = ctx.executable._elf_opt,
        arguments = [args],
        inputs = [src.elf] + ([weights] if weights else []),
        outputs = [out],
        mnemonic = "DecodeElfOpt",
        progress_message = "Applying %s to %s (%s)" % (pass_name, ctx.attr.src.label, ctx.label),
    )
    return [
        DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out])),
        # Lineage and stages grow by this rule (its kind is its pass's name).
        derived_decode_elf_info(ctx, kind = pass_name, elf = out, changes_numerics = changes_numerics),
    ]

def _buffer_object_reuse_impl(ctx):
    return _run_pass(ctx, "buffer_object_reuse", _option_args(ctx, []))

buffer_object_reuse = rule(
    implementation = _buffer_object_reuse_impl,
    doc = "Weights become STATIC BOs written once at load; values produced and consumed " +
          "on the device become INTERMEDIATE; only host-produced activations are written " +
          "per run and only what the host needs is read back.",
    attrs = _COMMON_ATTRS,
)

def _merge_multi_launch_impl(ctx):
    return _run_pass(ctx, "merge_multi_launch", _option_args(ctx, ["groups"]))

merge_multi_launch = rule(
    implementation = _merge_multi_launch_impl,
    doc = "Consecutive launches no host step separates become one launch group per " +
          "layer (rms_gemv_rope, o_gemv_ffn) plus one for the LM head.",
    attrs = dict(_COMMON_ATTRS, groups = attr.string_list(
        doc = "The merges to make (rms_gemv_rope, o_gemv_ffn, lm_head); empty: all. Unset: the pass table's default.",
    )),
)

def _fuse_kernels_impl(ctx):
    return _run_pass(ctx, "fuse_kernels", _option_args(ctx, ["fusions"]))

fuse_kernels = rule(
    implementation = _fuse_kernels_impl,
    doc = "Inside each launch group a GEMV and the elementwise launches next to it " +
          "become one launch of a fused kernel: RMSNorm + q/k/v (rms_gemv3), RMSNorm + " +
          "gate/up + SiLU*mul (rms_gemv_silu_mul), GEMV + residual add (gemv_add). " +
          "Bit-identical to the parent stage.",
    attrs = dict(_COMMON_ATTRS, fusions = attr.string_list(
        doc = "The fusions to make (rms_gemv, rms_gemv_silu_mul, gemv_add); empty: all. Unset: the pass table's default.",
    )),
)

def _compress_weights_impl(ctx):
    return _run_pass(ctx, "compress_weights", _option_args(ctx, []))

compress_weights = rule(
    implementation = _compress_weights_impl,
    doc = "bf16 GEMV weights in the packed panel layout are stored in 12 bits each at " +
          "load (packed_panel_x12_v1: per 8 x 64 block a table of the exponents it uses; " +
          "a block that needs more stays bf16) and the launches switch to the x12 kernels, " +
          "which rebuild every weight bit for bit: decode streams 0.77x the weight bytes. " +
          "Bit-identical to the parent stage.",
    attrs = _COMMON_ATTRS,
)

def _layout_alignment_impl(ctx):
    return _run_pass(ctx, "layout_alignment", _option_args(ctx, ["lm_head_partition_rows"]))

layout_alignment = rule(
    implementation = _layout_alignment_impl,
    doc = "GEMV weights are packed once at load into the packed panel layout and the " +
          "launches switch to the packed kernel; the LM head is split into vocab partitions.",
    attrs = dict(_COMMON_ATTRS, lm_head_partition_rows = attr.int(
        doc = "Rows per LM-head partition (0: do not split); the target's GEMV row limit caps it. " +
              "Unset: the pass table's default.",
        default = _UNSET_INT,
    )),
)

def _quantize_weights_impl(ctx):
    gguf = ctx.attr.scheme == "gguf"
    if gguf != bool(ctx.file.weights):
        fail("scheme \"gguf\" reads the weights file's tensor types: give `weights` (the GGUF) with it, and only with it")

    # keep is given even when empty: an empty list means "keep nothing", not the
    # pass's default (the pass's keyword "default": lm_head, or nothing for gguf).
    args = _option_args(ctx, ["scheme"]) + ["keep=" + ",".join(ctx.attr.keep)]
    return _run_pass(ctx, "quantize_weights", args, changes_numerics = True, weights = ctx.file.weights)

quantize_weights = rule(
    implementation = _quantize_weights_impl,
    doc = "GEMV weights are held in GGUF 32-element blocks and their launches switch to " +
          "the quantized GEMV: quantized once at load (q8_0, q4_0), or (gguf) each in " +
          "the block format the GGUF stores it in, its blocks copied from the file, " +
          "never re-quantized. Changes numerics: verify_chain gates this stage against " +
          "the HF bf16 goldens and only reports its agreement with the parent's tokens.",
    attrs = dict(
        _COMMON_ATTRS,
        scheme = attr.string(
            doc = "The block format (q8_0, q4_0); or gguf: each weight in the block format " +
                  "the GGUF file (the rule's weights, elf_opt's --weights) stores it in, one " +
                  "stored as floats staying bf16. Unset: the pass table's default.",
        ),
        weights = attr.label(
            doc = "scheme gguf only: the GGUF whose tensor types the stage follows (only " +
                  "its header is read at build time); the ELF then runs on that file.",
            allow_single_file = [".gguf"],
        ),
        keep = attr.string_list(
            doc = "The GEMV weight classes that stay bf16 (q_proj, k_proj, v_proj, o_proj, " +
                  "gate_proj, up_proj, down_proj, lm_head); empty: none. default (the default): " +
                  "lm_head for q8_0 / q4_0, nothing for gguf. The embedding table and the norm " +
                  "weights are never quantized.",
            default = ["default"],
        ),
    ),
)

def _speculative_decode_impl(ctx):
    return _run_pass(ctx, "speculative_decode", _option_args(ctx, ["draft", "max_draft", "max_ngram"]))

speculative_decode = rule(
    implementation = _speculative_decode_impl,
    doc = "Greedy decode drafts up to max_draft tokens by prompt lookup (the continuation " +
          "of the longest recent n-gram found earlier in the sequence: no second model) " +
          "and checks them with the parent's program in one run of max_draft + 1 token " +
          "rows, keeping the drafts the model would have chosen and rolling the KV cache " +
          "back past the rest. The tokens are exactly the parent's (verify_chain checks " +
          "it); a check reads the weights once for several tokens.",
    attrs = dict(
        _COMMON_ATTRS,
        draft = attr.string(doc = "How drafts are made: prompt_lookup. Unset: the pass table's default."),
        max_draft = attr.int(doc = "Drafted tokens per check, 1..15. Unset: the pass table's default.",
                             default = _UNSET_INT),
        max_ngram = attr.int(doc = "The longest n-gram looked up, 2..8; a match of n tokens drafts at most 2^(n - 2), so max_draft needs 2^(max_ngram - 2) >= max_draft. Unset: the pass table's default.",
                             default = _UNSET_INT),
    ),
)
