"""decode_profile: `bazel run` the phase-5 profile of a decode chain (docs/architecture.md s.7)."""

load("//rules:providers.bzl", "DecodeElfInfo")
load("//rules:shell.bzl", "shell_exec", "shell_flag", "shell_runfile_flag")

def _ref(label, package_label):
    """How a BUILD file in package_label's package spells `label`."""
    if label.workspace_name == package_label.workspace_name and label.package == package_label.package:
        return ":" + label.name
    return str(label)

def _chain_stages(ctx):
    """The final stage's DecodeElfInfo.stages, checked to be one chain."""
    final = ctx.attr.final
    stages = getattr(final[DecodeElfInfo], "stages", None)
    if not stages:
        fail(("decode_profile %s: %s provides DecodeElfInfo without `stages`; the rule that " +
              "made it must append its stage (derived_decode_elf_info or decode_elf_stage in " +
              "//rules:providers.bzl)") % (ctx.label, final.label))
    if stages[-1].label != str(final.label):
        fail(("decode_profile %s: the stages of %s end at %s, not at itself; its rule must " +
              "append its own stage (derived_decode_elf_info in //rules:providers.bzl)") % (
            ctx.label,
            final.label,
            stages[-1].label,
        ))
    names = {}
    for i, s in enumerate(stages):
        if i == 0 and s.src_label != None:
            fail(("decode_profile %s: the chain of %s starts at %s, which has a src (%s); the " +
                  "first stage must be a baseline (decode_elf), whose rule starts the stages") % (
                ctx.label,
                final.label,
                s.label,
                s.src_label,
            ))
        if i > 0 and (s.src_label == None or str(s.src_label) != stages[i - 1].label):
            fail(("decode_profile %s: in the chain of %s, %s's src is %s but the stage before " +
                  "it is %s; the rule that made %s must append its stage to its src's " +
                  "DecodeElfInfo.stages (derived_decode_elf_info)") % (
                ctx.label,
                final.label,
                s.label,
                s.src_label,
                stages[i - 1].label,
                s.label,
            ))
        if s.name in names:
            fail(("decode_profile %s: two stages of %s are named %s (%s and %s); the profile " +
                  "names stages by name: rename one") % (ctx.label, final.label, s.name, names[s.name], s.label))
        names[s.name] = s.label
    return stages

def _decode_profile_impl(ctx):
    stages = []
    files = []
    for stage in _chain_stages(ctx):
        stages.append({
            "name": stage.name,
            "label": stage.label,
            "kind": stage.kind,
            "src": _ref(stage.src_label, ctx.label) if stage.src_label else "",
            "elf": stage.elf.short_path,
            "lineage": stage.lineage,
            "changes_numerics": stage.changes_numerics,
        })
        files.append(stage.elf)
    model = ctx.attr.model or ctx.attr.final[DecodeElfInfo].model
    plans = []
    for plan in ctx.attr.plans:
        info = plan[DecodeElfInfo]
        if info.model != ctx.attr.final[DecodeElfInfo].model:
            fail("decode_profile %s: plan %s is of model %s, the chain of %s" % (
                ctx.label,
                plan.label,
                info.model,
                ctx.attr.final[DecodeElfInfo].model,
            ))
        plans.append({"name": plan.label.name, "label": str(plan.label), "elf": info.elf.short_path})
        files.append(info.elf)
    manifest = ctx.actions.declare_file(ctx.label.name + ".manifest.json")
    ctx.actions.write(manifest, json.encode({
        "model": model,
        "package": ctx.label.package,
        "label": str(ctx.label),
        "stages": stages,
        "plans": plans,
    }))
    files += [manifest, ctx.file.goldens, ctx.file.tokenizer]

    # Defaults under the flags a user types, before "$@" (the last occurrence wins).
    args = [
        shell_runfile_flag("manifest", manifest),
        shell_runfile_flag("goldens", ctx.file.goldens),
        shell_runfile_flag("tokenizer", ctx.file.tokenizer),
        shell_runfile_flag("weights", ctx.file.weights) if ctx.file.weights else shell_flag("weights", "synthetic"),
        shell_flag("prompt", ctx.attr.prompt),
        shell_flag("new_tokens", "%d" % ctx.attr.new_tokens),
        shell_flag("warmup", "%d" % ctx.attr.warmup),
        shell_flag("gate_prompts", "%d" % ctx.attr.gate_prompts),
    ]
    if ctx.file.weights:
        files.append(ctx.file.weights)
    if ctx.file.kld_text:
        args.append(shell_runfile_flag("kld_text", ctx.file.kld_text))
        files.append(ctx.file.kld_text)
        if ctx.attr.kld_max_windows:
            args.append(shell_flag("kld_max_windows", "%d" % ctx.attr.kld_max_windows))
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.write(
        output = script,
        is_executable = True,
        content = "\n".join([
            "#!/usr/bin/env bash",
            "# Generated by decode_profile(%s): %s" % (ctx.label, " -> ".join([s["name"] for s in stages])),
            shell_exec(ctx.executable._profile, args),
            "",
        ]),
    )
    runfiles = ctx.runfiles(files = files).merge(ctx.attr._profile[DefaultInfo].default_runfiles)
    return [DefaultInfo(executable = script, runfiles = runfiles)]

decode_profile = rule(
    implementation = _decode_profile_impl,
    doc = "The phase-5 profile of a decode chain: `bazel run :profile [-- --json]` measures " +
          "every stage (ms/token, per-layer split, BO traffic, runs per token, bandwidth floor), " +
          "runs the verify gate on each, and writes docs/development_progress/phase5_decode.{md,html} " +
          "into the package. The stages come from `final`'s DecodeElfInfo.stages (the chain as " +
          "its `src` links write it). Flags after `--` override the attributes (--new_tokens, " +
          "--warmup, --prompt, --weights, --tokenizer, --goldens, --out_dir, --json_out).",
    executable = True,
    attrs = {
        "final": attr.label(
            doc = "The chain's last stage; the profile covers every stage of its " +
                  "DecodeElfInfo.stages, baseline first.",
            default = ":decode_opt",
            providers = [DecodeElfInfo],
        ),
        "model": attr.string(doc = "The model's name (default: the baseline's)."),
        "plans": attr.label_list(
            doc = "Decode ELFs of the same model whose device runs and merge reason the record " +
                  "lists, per target (e.g. the chain planned for npu2); read, not timed.",
            providers = [DecodeElfInfo],
        ),
        "goldens": attr.label(
            doc = "The verify gate's goldens (HF reference, or for tests the scalar reference decoder's).",
            mandatory = True,
            allow_single_file = [".json"],
        ),
        "weights": attr.label(allow_single_file = True, doc = "Weights file; none: synthetic weights."),
        "tokenizer": attr.label(
            doc = "Encodes the prompt (a .gguf or tokenizer.json).",
            mandatory = True,
            allow_single_file = True,
        ),
        "prompt": attr.string(default = "What is the capital of France?", doc = "The canonical prompt."),
        "new_tokens": attr.int(default = 32, doc = "Measured decode tokens per stage."),
        "warmup": attr.int(default = 4, doc = "Decode tokens run before measuring."),
        "gate_prompts": attr.int(default = 2, doc = "Verify-gate prompts per stage (0: no gate)."),
        "kld_text": attr.label(
            allow_single_file = True,
            doc = "A text: every stage's KL divergence, top-1 agreement and perplexity against the " +
                  "baseline over it (tools/perplexity; decodekit_model passes @english_text//:text.txt). " +
                  "None: not measured.",
        ),
        "kld_max_windows": attr.int(
            default = 0,
            doc = "Windows of kld_text the KLD run scores (0: the whole text). For synthetic " +
                  "weights, whose near-uniform logits score about the same KLD whatever a stage " +
                  "does (docs/perplexity.md), a few windows say as much as the whole text.",
        ),
        "_profile": attr.label(default = Label("//tools/profile"), executable = True, cfg = "target"),
    },
)
