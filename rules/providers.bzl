"""Providers of the decode toolkit."""

DecodeElfInfo = provider(
    doc = "A decode ELF: a model's decode program, baseline or transformed.",
    fields = {
        "elf": "File: the decode ELF (readelf-readable, program in .dk.program)",
        "model": "string: the model's name, e.g. \"llama32_1b\"",
        "config": "File: the model config (text proto of dk.elf.ModelShape)",
        "lineage": "list of string: the stages that produced it, baseline first " +
                   "(e.g. [\"baseline\", \"buffer_object_reuse\"])",
        "stages": "list of struct: the chain that produced it, baseline first, this " +
                  "target last; each made by decode_elf_stage() (label, name, kind, src, " +
                  "src_label, elf, lineage, changes_numerics). decode_elf starts it and every rule that " +
                  "transforms a decode ELF appends itself (derived_decode_elf_info), so " +
                  "decode_profile and verify_test read the chain from the final stage.",
    },
)

def _spell(label, package_label):
    """How a BUILD file in package_label's package spells `label`."""
    if label.workspace_name == package_label.workspace_name and label.package == package_label.package:
        return ":" + label.name
    return str(label)

def decode_elf_stage(ctx, kind, elf, lineage, changes_numerics = False):
    """One entry of DecodeElfInfo.stages: the target `ctx` is analyzing.

    Args:
      ctx: the rule context of the stage.
      kind: the rule's kind, e.g. "layout_alignment" (Starlark cannot ask a rule
        its own kind; each optimization rule is named after its pass).
      elf: File, the stage's decode ELF.
      lineage: the stage's lineage (DecodeElfInfo.lineage).
      changes_numerics: bool, whether the stage changes the arithmetic (e.g.
        quantize_weights), so it cannot generate exactly its parent's tokens.

    Returns:
      struct(label, name, kind, src, src_label, elf, lineage, changes_numerics): `src` is how the
      stage's BUILD file spells its `src` attribute ("" for a baseline) and
      `src_label` that Label (None for a baseline).
    """
    src = getattr(ctx.attr, "src", None)
    return struct(
        label = str(ctx.label),
        name = ctx.label.name,
        kind = kind,
        src = _spell(src.label, ctx.label) if src else "",
        src_label = src.label if src else None,
        elf = elf,
        lineage = lineage,
        changes_numerics = changes_numerics,
    )

def derived_decode_elf_info(ctx, kind, elf, lineage_entry = None, changes_numerics = False):
    """The DecodeElfInfo of a rule that transforms ctx.attr.src into `elf`.

    Model and config are carried over, the lineage grows by lineage_entry
    (default: kind) and the stages by this target (changes_numerics: see
    decode_elf_stage).
    """
    src = ctx.attr.src[DecodeElfInfo]
    lineage = src.lineage + [lineage_entry or kind]
    return DecodeElfInfo(
        elf = elf,
        model = src.model,
        config = src.config,
        lineage = lineage,
        stages = src.stages + [decode_elf_stage(ctx, kind, elf, lineage, changes_numerics)],
    )
