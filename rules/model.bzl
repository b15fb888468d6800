"""model_targets(): what every models/<model>/BUILD has besides its chain.

A model's BUILD states its decode chain line by line (decode_elf, then one
optimization rule per stage: the lines a reviewer reads and a revert deletes), then
verify_chain and decode_profile naming the final stage. The rest is the same in every
model and written here once: the chain planned for the reference NPU, the generate
targets, and the test of each plan's device runs.
"""

load(":generate.bzl", "decode_generate")
load(":optimizations.bzl", "buffer_object_reuse", "fuse_kernels", "layout_alignment", "merge_multi_launch")
load(":plan_test.bzl", "decode_plan_test")

def model_targets(tokenizer, generate, plan_runs, weights = None, npu2_src = ":decode", npu2_fused = True):
    """The npu2 plan, the generate targets and :plan_test of the calling model.

    Args:
      tokenizer: the model's tokenizer (tokenizer.json or a GGUF), for every generate target.
      generate: {target name: decode ELF} (e.g. {"generate": ":decode_x12"}): one
        decode_generate each, `./bazelw run //models/<model>:<name> -- --prompt ...`.
      plan_runs: {plan: (target, device runs per layer, model-wide runs[, prefill runs
        per layer])}, checked by :plan_test against elf_dump --summary (":decode_opt",
        ":npu2_opt", ...); the prefill runs default to the decode runs (a cpu plan
        runs a prompt chunk through its decode groups).
      weights: the weights generate reads by default (None: the tool's default,
        synthetic weights of the model's shape).
      npu2_src: the stage the npu2 plan starts from (the baseline).
      npu2_fused: whether the npu2 plan ends with fuse_kernels (:npu2_fused).
    """

    # The same graph planned for the reference NPU (target npu2: its GEMV K and L2
    # limits, the K-split GEMV for K in chunks of 512, 8 launch bodies per run;
    # docs/architecture.md s.5). Built and checked for its device runs; the CPU device
    # can run it too, as //tests/passes does on tiny models.
    layout_alignment(name = "npu2_aligned", src = npu2_src, target = "npu2")
    buffer_object_reuse(name = "npu2_bo", src = ":npu2_aligned", target = "npu2")
    merge_multi_launch(name = "npu2_opt", src = ":npu2_bo", target = "npu2")
    if npu2_fused:
        fuse_kernels(name = "npu2_fused", src = ":npu2_opt", target = "npu2")

    for name, elf in generate.items():
        if weights:
            decode_generate(name = name, elf = elf, tokenizer = tokenizer, weights = weights)
        else:
            decode_generate(name = name, elf = elf, tokenizer = tokenizer)

    # Device runs per layer and model-wide (elf_dump --summary) of the cpu and npu2 plans.
    decode_plan_test(
        name = "plan_test",
        plans = [(plan, runs[0], runs[1], runs[2], runs[3] if len(runs) > 3 else runs[1]) for plan, runs in plan_runs.items()],
    )
