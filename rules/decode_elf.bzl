"""decode_elf: the baseline decode ELF of a model; model_shape: its shape, from the model file."""

load("//rules:providers.bzl", "DecodeElfInfo", "decode_elf_stage")

def _decode_elf_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".elf")
    args = ctx.actions.args()
    args.add("--config", ctx.file.config)
    args.add("--out", out)
    ctx.actions.run(
        executable = ctx.executable._elfc,
        arguments = [args],
        inputs = [ctx.file.config],
        outputs = [out],
        mnemonic = "DecodeElf",
        progress_message = "Building baseline decode ELF %s" % ctx.label,
    )
    return [
        DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out])),
        DecodeElfInfo(
            elf = out,
            model = ctx.attr.model or ctx.label.package.split("/")[-1],
            config = ctx.file.config,
            lineage = ["baseline"],
            stages = [decode_elf_stage(ctx, "decode_elf", out, ["baseline"])],
        ),
    ]

decode_elf = rule(
    implementation = _decode_elf_impl,
    doc = "Builds the baseline ('phase 4') decode ELF of a Llama-architecture model: " +
          "every launch its own group, every BO written before and read after every run.",
    attrs = {
        "config": attr.label(
            doc = "The model config: a text proto of dk.elf.ModelShape.",
            allow_single_file = [".textproto"],
            mandatory = True,
        ),
        "model": attr.string(doc = "Model name (default: the package's last component)."),
        "_elfc": attr.label(
            default = Label("//tools/elfc"),
            executable = True,
            cfg = "exec",
        ),
    },
)

def _model_shape_impl(ctx):
    name = ctx.label.name
    out = ctx.actions.declare_file(name if name.endswith(".textproto") else name + ".textproto")
    args = ctx.actions.args()
    args.add("--model", ctx.file.model)
    if ctx.attr.model_name:
        args.add("--name", ctx.attr.model_name)
    if ctx.attr.max_context:
        args.add("--max_context", str(ctx.attr.max_context))
    args.add("--shape_out", out)
    ctx.actions.run(
        executable = ctx.executable._elfc,
        arguments = [args],
        inputs = [ctx.file.model],
        outputs = [out],
        mnemonic = "ModelShape",
        progress_message = "Reading the model shape of %s" % ctx.file.model.short_path,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

model_shape = rule(
    implementation = _model_shape_impl,
    doc = "The model's shape (a text proto of dk.elf.ModelShape, decode_elf's `config`), read " +
          "from the model file by `elfc --model` (weights/model_file.h): a GGUF's metadata or " +
          "an HF config.json. No hand-written shape can disagree with the file. The output is " +
          "the target's name (plus .textproto unless it ends so).",
    attrs = {
        "model": attr.label(
            doc = "The model file: a .gguf, or an HF checkpoint's config.json.",
            allow_single_file = True,
            mandatory = True,
        ),
        "model_name": attr.string(doc = "The shape's name (default: the file's own)."),
        "max_context": attr.int(
            doc = "The most positions the ELF holds: caps the model's own maximum " +
                  "(0: elfc's default cap, 32768).",
            default = 0,
        ),
        "_elfc": attr.label(
            default = Label("//tools/elfc"),
            executable = True,
            cfg = "exec",
        ),
    },
)
