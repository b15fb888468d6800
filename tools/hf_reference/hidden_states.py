#!/usr/bin/env python3
"""Records HuggingFace transformers' per-layer hidden states for one prompt (bf16).

A diagnosis aid, never a gate (docs/architecture.md s.6): //tools/diagnose compares the decode
ELF's per-layer outputs ("L<i>.h_out") against this file and prints cosine / max-abs /
relative-L2 per layer.

One forward over the prompt tokens (bf16, the model loaded exactly as make_goldens.py
loads it), then, at the LAST prompt position:
  - "embedding": the input of layer 0 (hidden_states[0], the token embedding);
  - "layers[i]", i = 0..n_layers-1: the raw residual stream after decoder layer i,
    BEFORE the final norm, captured by a forward hook on model.model.layers[i];
  - "final_norm": model.model.norm applied to the last layer's output (what the LM head
    reads; transformers 5.x overwrites hidden_states[-1] with this post-norm tensor, so
    hidden_states[n_layers] is NOT the last layer's raw output; hidden_states[i+1] equals
    layers[i] only for i < n_layers-1 -- checked below);
  - "logits_top5": ids sorted by (-logit, id) and their logits.
Every float is a bf16 value written exactly.

  OUTPUT_BASE="$(./bazelw info output_base)"
  .venv-ref/bin/python tools/hf_reference/hidden_states.py \
      --gguf "$OUTPUT_BASE/external/smollm2_135m/model.gguf" \
      --tokenizer tokenizer/testdata/smollm2_tokenizer.json --model-name smollm2_135m \
      --prompt "The capital of France is" --out /tmp/smollm2_hidden.json
"""

import argparse
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens  # noqa: E402  (load_model, load_tokenizer, weights_digest, top_k)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model-dir", help="HF checkpoint directory (config.json + safetensors)")
    src.add_argument("--gguf", help="GGUF file")
    p.add_argument("--tokenizer", help="tokenizer.json to use instead of the model's own")
    p.add_argument("--model-name", help="value of the JSON 'model' field")
    p.add_argument("--prompt", default="The capital of France is")
    p.add_argument("--ids", help="comma-separated prompt token ids (instead of --prompt)")
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip-tokenizer-check", action="store_true",
                   help="do not compare the GGUF tokenizer with tokenizer/testdata goldens")
    return p.parse_args()


def as_floats(t):
    """A 1-D bf16 tensor -> list of Python floats (bf16 -> f32 -> f64 is exact)."""
    return [float(x) for x in t.detach().float().cpu().numpy()]


@torch.inference_mode()
def run(model, prompt_ids):
    layers = model.model.layers
    captured = [None] * len(layers)

    def hook(i):
        def fn(_module, _inputs, output):
            out = output[0] if isinstance(output, (tuple, list)) else output
            captured[i] = out[0, -1].clone()
        return fn

    handles = [layer.register_forward_hook(hook(i)) for i, layer in enumerate(layers)]
    try:
        out = model(input_ids=torch.tensor([prompt_ids], dtype=torch.long),
                    output_hidden_states=True, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    n = len(layers)
    hs = out.hidden_states
    if any(c is None for c in captured):
        sys.exit("error: a decoder-layer hook did not fire")
    if len(hs) != n + 1:
        sys.exit(f"error: expected {n + 1} hidden_states, got {len(hs)}")
    for i in range(n - 1):
        if not torch.equal(hs[i + 1][0, -1], captured[i]):
            sys.exit(f"error: hidden_states[{i + 1}] differs from the output of layer {i}")
    final_norm = model.model.norm(captured[n - 1].unsqueeze(0))[0]
    last = hs[n][0, -1]
    if torch.equal(last, final_norm):
        last_entry = "post-norm (equals model.norm(layers[-1]))"
    elif torch.equal(last, captured[n - 1]):
        last_entry = "raw residual of the last layer (no final norm)"
    else:
        last_entry = "neither the last layer's output nor its final norm"
    logits = out.logits[0, -1].float().numpy()
    ids, vals = make_goldens.top_k(logits)
    return {
        "embedding": as_floats(hs[0][0, -1]),
        "layers": [as_floats(c) for c in captured],
        "final_norm": as_floats(final_norm),
        "hidden_states_last_entry": last_entry,
        "logits_top5": {"ids": ids, "logits": vals},
    }


def format_json(doc):
    """One line per layer vector, so the file stays readable."""
    inline = {}

    def compact(value):
        key = f"@@inline{len(inline)}@@"
        inline[json.dumps(key)] = json.dumps(value, separators=(",", ":"))
        return key

    d = dict(doc)
    d["prompt_ids"] = compact(doc["prompt_ids"])
    d["embedding"] = compact(doc["embedding"])
    d["layers"] = [compact(v) for v in doc["layers"]]
    d["final_norm"] = compact(doc["final_norm"])
    text = json.dumps(d, indent=1, ensure_ascii=False)
    for key, value in inline.items():
        text = text.replace(key, value, 1)
    return text + "\n"


def main():
    args = parse_args()
    # make_goldens.setup checks a GGUF tokenizer against the SmolLM2 goldens; with --ids
    # no tokenizer is needed, so only load the model then.
    if args.ids:
        torch.set_num_threads(args.threads)
        model = make_goldens.load_model(args)
        prompt_ids = [int(s) for s in args.ids.split(",") if s.strip()]
        prompt = None
    else:
        tok, model = make_goldens.setup(args)
        prompt = args.prompt
        prompt_ids = tok(prompt, add_special_tokens=True)["input_ids"]
    if not prompt_ids:
        sys.exit("error: no prompt tokens")
    result = run(model, prompt_ids)
    doc = {
        "model": args.model_name or os.path.basename(args.gguf or args.model_dir),
        "weights_digest": make_goldens.weights_digest(model),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "dtype": "bfloat16",
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "generator": "tools/hf_reference/hidden_states.py",
        "prompt": prompt,
        "prompt_ids": prompt_ids,
        "position": len(prompt_ids) - 1,
        **result,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(format_json(doc))
    print(f"wrote {args.out}: {len(doc['layers'])} layers x {len(doc['layers'][0])}, "
          f"prompt_ids {prompt_ids}, top5 {doc['logits_top5']['ids']}, "
          f"hidden_states[-1] is {result['hidden_states_last_entry']}, "
          f"digest {doc['weights_digest']}", file=sys.stderr)


if __name__ == "__main__":
    main()
