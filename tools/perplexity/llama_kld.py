#!/usr/bin/env python3
"""llama.cpp's side of the KLD parity check (docs/perplexity.md): a quantized GGUF against
its BF16 requantization through llama.cpp (llama-cpp-python's C API, tools/peer), over the
very token windows decodekit's perplexity tool scored (its --ids_out), with the figures
`llama-perplexity --kl-divergence` reports: mean and 99th-percentile KL(base || quant),
top-1 agreement, both perplexities and their ratio. Logits at every scored position come
from one llama_decode per window (n_batch = the window), f64 maths here.

  tools/peer/.venv/bin/python tools/perplexity/llama_kld.py --base model_bf16.gguf \
      --quant model.gguf --ids ids.json --threads 2
Prints one JSON object.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peer"))
import llama_decode as D  # noqa: E402
L = D.L


def window_logits(ctx, n_vocab, ids, first):
    """Logits (f32, [len(ids) - 1 - first, n_vocab]) at positions first .. len(ids) - 2."""
    L.llama_memory_clear(L.llama_get_memory(ctx), True)
    n = len(ids)
    batch = L.llama_batch_init(n, 0, 1)
    batch.n_tokens = n
    for i, t in enumerate(ids):
        batch.token[i] = t
        batch.pos[i] = i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1 if first <= i < n - 1 else 0
    rc = L.llama_decode(ctx, batch)
    if rc != 0:
        raise SystemExit(f"llama_decode returned {rc}")
    L.llama_synchronize(ctx)
    out = np.empty((n - 1 - first, n_vocab), dtype=np.float32)
    for i in range(first, n - 1):
        out[i - first] = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,))
    L.llama_batch_free(batch)
    return out


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the BF16 GGUF (the reference)")
    p.add_argument("--quant", required=True, help="the quantized GGUF")
    p.add_argument("--ids", required=True, help="perplexity --ids_out's JSON")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    spec = json.load(open(a.ids))
    window, first, windows = spec["window"], spec["score_from"], spec["windows"]
    D.quiet_logs(False)
    _, base_ctx, n_vocab = D.open_model(a.base, a.threads, window, "auto", n_batch=window)
    _, quant_ctx, n_vocab_q = D.open_model(a.quant, a.threads, window, "auto", n_batch=window)
    if n_vocab != n_vocab_q:
        raise SystemExit(f"vocabularies differ: {n_vocab} vs {n_vocab_q}")
    kld, same, nll, base_nll = [], 0, 0.0, 0.0
    t0 = time.time()
    for w, ids in enumerate(windows):
        lb = log_softmax(window_logits(base_ctx, n_vocab, ids, first))
        lq = log_softmax(window_logits(quant_ctx, n_vocab, ids, first))
        kld.extend((np.exp(lb) * (lb - lq)).sum(axis=1).clip(min=0).tolist())
        same += int((lb.argmax(axis=1) == lq.argmax(axis=1)).sum())
        nxt = np.array(ids[first + 1:], dtype=np.int64)
        rows = np.arange(len(nxt))
        nll -= lq[rows, nxt].sum()
        base_nll -= lb[rows, nxt].sum()
        print(f"llama_kld: window {w + 1}/{len(windows)} ({time.time() - t0:.1f} s)", file=sys.stderr)
    n = len(kld)
    print(json.dumps({
        "base": a.base, "quant": a.quant, "window": window, "windows": len(windows), "positions": n,
        "mean_kld": float(np.mean(kld)), "p99_kld": float(np.quantile(kld, 0.99)),
        "top1": same / n, "ppl": float(np.exp(nll / n)), "base_ppl": float(np.exp(base_nll / n)),
        "ppl_ratio": float(np.exp((nll - base_nll) / n)), "seconds": time.time() - t0,
    }, indent=2))


if __name__ == "__main__":
    main()
