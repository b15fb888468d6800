"""Providers of the decode toolkit."""

DecodeElfInfo = provider(
    doc = "A decode ELF: a model's decode program, baseline or transformed.",
    fields = {
        "elf": "File: the decode ELF (readelf-readable, program in .dk.program)",
        "model": "string: the model's name, e.g. \"llama32_1b\"",
        "config": "File: the model config (text proto of dk.elf.ModelShape)",
        "lineage": "list of string: the stages that produced it, baseline first " +
                   "(e.g. [\"baseline\", \"buffer_object_reuse\"])",
    },
)
