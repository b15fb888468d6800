"""corrupt_lm_head: a test-only chain stage that must fail the verify gate."""

load("//rules:providers.bzl", "DecodeElfInfo", "derived_decode_elf_info")

def _corrupt_lm_head_impl(ctx):
    src = ctx.attr.src[DecodeElfInfo]
    out = ctx.actions.declare_file(ctx.label.name + ".elf")
    ctx.actions.run(
        executable = ctx.executable._tool,
        arguments = ["--in=" + src.elf.path, "--out=" + out.path],
        inputs = [src.elf],
        outputs = [out],
        mnemonic = "DecodeElfCorrupt",
        progress_message = "Corrupting %s for a test (%s)" % (ctx.attr.src.label, ctx.label),
    )
    return [
        DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out])),
        derived_decode_elf_info(ctx, kind = "corrupt_lm_head", elf = out),
    ]

corrupt_lm_head = rule(
    implementation = _corrupt_lm_head_impl,
    doc = "Test only: `src` with its first two LM-head partitions bound to each other's rows.",
    attrs = {
        "src": attr.label(mandatory = True, providers = [DecodeElfInfo]),
        "_tool": attr.label(default = "//tests/profile:corrupt_elf", executable = True, cfg = "exec"),
    },
)
