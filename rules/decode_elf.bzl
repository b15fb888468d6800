"""decode_elf: the baseline decode ELF of a model, built from its config."""

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
            default = "//tools/elfc",
            executable = True,
            cfg = "exec",
        ),
    },
)
