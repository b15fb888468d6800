"""decode_plan_test: the device runs of decode ELFs, checked against the BUILD's numbers."""

def decode_plan_test(name, plans, **kwargs):
    """A test that each ELF of `plans` runs as many device runs as expected.

    Args:
      name: the test's name.
      plans: a list of (elf label, target, runs per layer, model-wide runs, prefill
        runs per layer): every layer of the ELF must have `runs per layer` launch
        groups, the model-wide steps (the LM head) `model-wide runs`, its prefill plan
        at the default chunk `prefill runs per layer` runs per layer (and the same
        model-wide runs), and its merge_multi_launch must have been applied for
        `target` ("cpu", "npu2").
      **kwargs: passed to the sh_test (tags, size, ...).
    """
    # The toolkit's own targets as Labels (resolved in this .bzl's repository), so the
    # macro works from a workspace that loads it as @decodekit.
    elf_dump = str(Label("//tools/elf_dump"))
    args = ["$(rootpath %s)" % elf_dump]
    data = [elf_dump]
    for elf, target, per_layer, model_wide, prefill_per_layer in plans:
        args += ["$(rootpath %s)" % elf, target, str(per_layer), str(model_wide), str(prefill_per_layer)]
        data.append(elf)
    native.sh_test(
        name = name,
        srcs = [str(Label("//rules:plan_test.sh"))],
        args = args,
        data = data,
        size = kwargs.pop("size", "small"),
        **kwargs
    )
