#!/usr/bin/env python3
"""Records llama.cpp's greedy decode of a goldens file's prompts, in the goldens format.

  tools/peer/.venv/bin/python tools/peer/record_goldens.py \
      --gguf $(./bazelw info output_base)/external/smollm2_135m/model.gguf \
      --goldens models/smollm2_135m/goldens/hf_bf16.json \
      --out models/smollm2_135m/goldens/llamacpp.json

The HF goldens are the reference every verify test gates against; this is a second,
independent engine on the same GGUF (llama.cpp runs the file's own blocks, HF the
weights dequantized to bf16). //verify:smollm2_goldens_test gates the HF goldens against
this record: goldens recorded on other weights, prompts or tokens fail it.

Each prompt's ids are the HF goldens' own `prompt_ids`, fed one token at a time in a
fresh context; then `new_tokens` greedy steps, each recording the top-5 ids by
(-logit, id) and their float32 logits.
"""
import argparse
import ctypes
import importlib.metadata as md
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_decode  # noqa: E402  (the same loader and batch as the timing tool)
import llama_cpp as L  # noqa: E402


def detokenize(model, ids):
    vocab = L.llama_model_get_vocab(model)
    arr = (L.llama_token * len(ids))(*ids)
    size = 64 + 32 * len(ids)
    buf = ctypes.create_string_buffer(size)
    n = L.llama_detokenize(vocab, arr, len(ids), buf, size, False, False)
    if n < 0:
        raise SystemExit(f"llama_detokenize needs {-n} bytes")
    return buf.raw[:n].decode("utf-8", errors="replace")


def greedy(model, ctx, n_vocab, prompt_ids, new_tokens):
    batch = llama_decode.OneTokenBatch()
    pos = 0
    for t in prompt_ids:
        batch.set(t, pos)
        llama_decode.decode(ctx, batch)
        pos += 1
    steps = []
    for _ in range(new_tokens):
        lg = llama_decode.logits_of(ctx, n_vocab).astype(np.float32)
        top = np.argsort(-lg, kind="stable")[:5]  # ties: the smaller id first
        steps.append({"id": int(top[0]), "top5": [int(x) for x in top],
                      "top5_logits": [float(lg[x]) for x in top]})
        batch.set(int(top[0]), pos)
        llama_decode.decode(ctx, batch)
        pos += 1
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--goldens", required=True, help="the HF goldens whose prompts to decode")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    with open(a.goldens) as f:
        hf = json.load(f)
    llama_decode.quiet_logs(a.verbose)
    prompts = []
    n_ctx = max(len(p["prompt_ids"]) for p in hf["prompts"]) + hf["new_tokens"] + 8
    for i, p in enumerate(hf["prompts"]):
        model, ctx, n_vocab = llama_decode.open_model(a.gguf, a.threads, n_ctx, "auto")
        steps = greedy(model, ctx, n_vocab, p["prompt_ids"], hf["new_tokens"])
        text_out = detokenize(model, [s["id"] for s in steps])
        L.llama_free(ctx)
        L.llama_model_free(model)
        prompts.append({"text": p["text"], "prompt_ids": p["prompt_ids"], "steps": steps,
                        "text_out": text_out})
        agree = sum(1 for s, h in zip(steps, p["steps"]) if s["id"] == h["id"])
        print(f"[{i + 1}/{len(hf['prompts'])}] {p['text'][:40]!r}: {text_out[:48]!r} "
              f"({agree}/{len(steps)} steps choose HF's token)", file=sys.stderr)
    out = {
        "model": hf["model"],
        # The same file the HF goldens were recorded from (checked by the test through
        # //weights' digest of the GGUF it loads).
        "weights_digest": hf["weights_digest"],
        # Required by the goldens format; no transformers or torch took part here.
        "transformers_version": "none (llama.cpp record)",
        "torch_version": "none (llama.cpp record)",
        "generator": (f"tools/peer/record_goldens.py: llama.cpp (llama-cpp-python "
                      f"{md.version('llama-cpp-python')}) greedy on {os.path.basename(a.gguf)}, "
                      f"the file's own blocks, {a.threads} threads"),
        "new_tokens": hf["new_tokens"],
        "prompts": prompts,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
