#!/usr/bin/env python3
"""Prints the first 8 greedy tokens (ids and text) HF transformers bf16 produces for one
prompt; a quick cross-check for the C++ decode loop.

  .venv-ref/bin/python tools/hf_reference/first8.py \
      --gguf $OUTPUT_BASE/external/smollm2_135m/model.gguf
"""

import sys

import make_goldens


def main():
    argv = sys.argv[1:]
    prompt = "The capital of France is"
    if "--prompt" in argv:
        i = argv.index("--prompt")
        prompt = argv[i + 1]
        del argv[i:i + 2]
    args = make_goldens.parse_args(argv)
    tok, model = make_goldens.setup(args)
    prompt_ids = tok(prompt, add_special_tokens=True)["input_ids"]
    steps = make_goldens.greedy(model, prompt_ids, 8)
    ids = [s["id"] for s in steps]
    print(f"prompt: {prompt!r} ids={prompt_ids}")
    print(f"digest: {make_goldens.weights_digest(model)}")
    for n, s in enumerate(steps):
        print(f"{n}: {s['id']:6d} {make_goldens.safe_decode(tok, [s['id']])!r:16} "
              f"top5={s['top5']} logits={[round(v, 4) for v in s['top5_logits']]}")
    print(f"first8 ids: {ids}")
    print(f"first8 text: {make_goldens.safe_decode(tok, ids)!r}")
    # Cross-check the step-by-step loop against transformers' own greedy generate().
    import torch
    with torch.inference_mode():
        gen = model.generate(torch.tensor([prompt_ids]), max_new_tokens=8, do_sample=False,
                             use_cache=True)
    gen_ids = [int(i) for i in gen[0, len(prompt_ids):]]
    print(f"generate() ids: {gen_ids} ({'same' if gen_ids == ids else 'DIFFERENT'})")


if __name__ == "__main__":
    main()
