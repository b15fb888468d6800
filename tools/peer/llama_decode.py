#!/usr/bin/env python3
"""llama.cpp decode timing and logits through llama-cpp-python's low-level API (the C API
one-to-one), so that only the engine is timed: one prebuilt one-token batch, then
llama_decode + llama_synchronize per token, timed with perf_counter.

  Timing (what ab.py runs; prints one JSON line):
    tools/peer/.venv/bin/python tools/peer/llama_decode.py time --gguf M.gguf \
        --threads 2 --warmup 8 --tokens 64
  (--depth 8192: after 8192 prompt tokens, as llama-bench -d 8192; the JSON also has the load
  time and the time to the first token)
  Prompt processing (llama-bench's pp: a new sequence's N prompt tokens in batches of
  --n_batch, logits for the last one only; tokens/s of the median run; prints one JSON line):
    tools/peer/.venv/bin/python tools/peer/llama_decode.py pp --gguf M.gguf \
        --threads 2 --prompt_tokens 512 --reps 5
  Greedy tokens and top-5 logits for given prompt ids (the same-model check):
    tools/peer/.venv/bin/python tools/peer/llama_decode.py logits --gguf M.gguf \
        --ids 0,417,281 --new_tokens 8
  Requantize a GGUF (e.g. the SmolLM2 Q4_1 file to BF16; or BF16 to Q8_0 layers with the
  embedding / tied LM head kept BF16, as decodekit's decode_q8 stage):
    tools/peer/.venv/bin/python tools/peer/llama_decode.py quantize --gguf IN.gguf \
        --out OUT.gguf --type bf16
    tools/peer/.venv/bin/python tools/peer/llama_decode.py quantize --gguf IN_bf16.gguf \
        --out OUT.gguf --type q8_0 --embedding_type bf16

Timing follows decode_bench: the first token is id 1 at position 0, each next token is
the greedy argmax of the last one (picked outside the timed window), `--warmup` tokens
at positions 0.. are discarded, the next `--tokens` are timed; ms/token is their median.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import gguf
import numpy as np
import llama_cpp as L


def quiet_logs(verbose):
    if verbose:
        return

    @L.llama_log_callback
    def _drop(level, text, user_data):  # noqa: ARG001
        pass

    quiet_logs.cb = _drop  # keep alive
    L.llama_log_set(_drop, ctypes.c_void_p())


LOAD_MODES = {"auto": L.LLAMA_LOAD_MODE_AUTO, "none": L.LLAMA_LOAD_MODE_NONE,
              "mmap": L.LLAMA_LOAD_MODE_MMAP}


def open_model(path, threads, n_ctx, load_mode, n_batch=1, n_seq_max=1):
    L.llama_backend_init()
    mp = L.llama_model_default_params()  # a ctypes struct: set only fields it has
    mp.n_gpu_layers = 0
    mp.load_mode = LOAD_MODES[load_mode]
    if os.environ.get("PEER_NO_EXTRA_BUFTS"):
        mp.use_extra_bufts = False  # no AMX / repacked weight buffers
    model = L.llama_model_load_from_file(path.encode(), mp)
    if not model:
        raise SystemExit(f"llama.cpp could not load {path}")
    cp = L.llama_context_default_params()
    cp.n_ctx = n_ctx
    cp.n_batch = n_batch
    cp.n_ubatch = n_batch
    cp.n_seq_max = n_seq_max
    if n_seq_max > 1:
        cp.kv_unified = False  # a KV cache per sequence (n_ctx / n_seq_max positions each), as decodekit's
    cp.n_threads = threads
    cp.n_threads_batch = threads
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise SystemExit("llama.cpp could not create a context")
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    return model, ctx, n_vocab


class OneTokenBatch:
    """A batch of one token with logits, rebuilt in place (no allocation per token)."""

    def __init__(self):
        self.batch = L.llama_batch_init(1, 0, 1)
        self.batch.n_tokens = 1
        self.batch.n_seq_id[0] = 1
        self.batch.seq_id[0][0] = 0
        self.batch.logits[0] = 1

    def set(self, token, pos):
        self.batch.token[0] = token
        self.batch.pos[0] = pos


def logits_of(ctx, n_vocab):
    ptr = L.llama_get_logits_ith(ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,))


def decode(ctx, batch):
    rc = L.llama_decode(ctx, batch.batch)
    if rc != 0:
        raise SystemExit(f"llama_decode returned {rc}")
    L.llama_synchronize(ctx)


def prefill(ctx, ids, n_batch, batch=None):
    """Feeds `ids` at positions 0.. in batches of n_batch (logits for the last one only),
    through `batch` (a llama_batch of n_batch tokens; None: a new one)."""
    if batch is None:
        batch = L.llama_batch_init(n_batch, 0, 1)
    for start in range(0, len(ids), n_batch):
        chunk = ids[start:start + n_batch]
        batch.n_tokens = len(chunk)
        for i, t in enumerate(chunk):
            batch.token[i] = t
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if start + i == len(ids) - 1 else 0
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            raise SystemExit(f"llama_decode returned {rc}")
    L.llama_synchronize(ctx)
    L.llama_batch_free(batch)


def cmd_time(a):
    """--depth D (llama-bench -d D): D prompt tokens ((1 + 7919 i) mod vocab, as pp) fed in
    batches of 512 first, untimed; the warmup and timed tokens follow at positions D.."""
    quiet_logs(a.verbose)
    t_start = time.perf_counter()
    n_ctx = max(a.n_ctx, a.depth + a.warmup + a.tokens + 16) if a.depth else a.n_ctx
    n_batch = min(a.depth_batch, a.depth) if a.depth else 1
    model, ctx, n_vocab = open_model(a.gguf, a.threads, n_ctx, a.load_mode, n_batch)
    load_ms = (time.perf_counter() - t_start) * 1e3
    prefill_ms = 0.0
    if a.depth:
        t0 = time.perf_counter()
        prefill(ctx, [(1 + 7919 * i) % n_vocab for i in range(a.depth)], n_batch)
        prefill_ms = (time.perf_counter() - t0) * 1e3
    batch = OneTokenBatch()
    token, ms = 1, []
    first_token_ms = None
    for pos in range(a.depth, a.depth + a.warmup + a.tokens):
        batch.set(token, pos)
        t0 = time.perf_counter()
        decode(ctx, batch)
        t1 = time.perf_counter()
        token = int(np.argmax(logits_of(ctx, n_vocab)))
        if first_token_ms is None:
            first_token_ms = (time.perf_counter() - t_start) * 1e3 - prefill_ms
        if pos >= a.depth + a.warmup:
            ms.append((t1 - t0) * 1e3)
    print(json.dumps({
        "engine": "llama.cpp", "gguf": os.path.basename(a.gguf), "threads": a.threads,
        "depth": a.depth, "warmup": a.warmup, "tokens": len(ms), "ms_per_token": statistics.median(ms),
        "ms_min": min(ms), "ms_max": max(ms),
        # load: llama_model_load_from_file + llama_init_from_model; first token: from the start of
        # the load to the first token's logits (the depth's prefill not counted)
        "load_ms": load_ms, "first_token_ms": first_token_ms, "prefill_ms": prefill_ms,
    }))
    L.llama_free(ctx)
    L.llama_model_free(model)


def cmd_pp(a):
    """Prompt processing: the ids decode_bench --prompt_tokens feeds ((1 + 7919 i) mod vocab),
    in batches of --n_batch, the KV cache cleared before each run; one untimed run first."""
    quiet_logs(a.verbose)
    n_batch = min(a.n_batch, a.prompt_tokens)
    model, ctx, n_vocab = open_model(a.gguf, a.threads, a.prompt_tokens + 16, a.load_mode, n_batch)
    ids = [(1 + 7919 * i) % n_vocab for i in range(a.prompt_tokens)]
    batch = L.llama_batch_init(n_batch, 0, 1)
    mem = L.llama_get_memory(ctx)

    def run_prompt():
        L.llama_memory_clear(mem, True)
        prefill(ctx, ids, n_batch, batch)

    run_prompt()
    ms = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        run_prompt()
        ms.append((time.perf_counter() - t0) * 1e3)
    median = statistics.median(ms)
    print(json.dumps({
        "engine": "llama.cpp", "gguf": os.path.basename(a.gguf), "threads": a.threads,
        "prompt_tokens": a.prompt_tokens, "n_batch": n_batch, "reps": len(ms), "ms": median,
        "tokens_per_s": a.prompt_tokens / (median * 1e-3),
    }))
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)


def cmd_logits(a):
    quiet_logs(a.verbose)
    model, ctx, n_vocab = open_model(a.gguf, a.threads, a.n_ctx, a.load_mode)
    ids = [int(x) for x in a.ids.split(",")]
    batch = OneTokenBatch()
    steps = []
    pos = 0
    for t in ids:  # prompt one token at a time, as decodekit feeds it
        batch.set(t, pos)
        decode(ctx, batch)
        pos += 1
    for _ in range(a.new_tokens):
        lg = logits_of(ctx, n_vocab).astype(np.float32)
        top = np.argsort(-lg, kind="stable")[:5]
        steps.append({"id": int(top[0]), "top5": [int(x) for x in top],
                      "top5_logits": [round(float(lg[x]), 4) for x in top]})
        batch.set(int(top[0]), pos)
        decode(ctx, batch)
        pos += 1
    print(json.dumps({"prompt_ids": ids, "steps": steps}))


def cmd_quantize(a):
    quiet_logs(a.verbose)
    L.llama_backend_init()
    types = {"bf16": L.LLAMA_FTYPE_MOSTLY_BF16, "q8_0": L.LLAMA_FTYPE_MOSTLY_Q8_0,
             "f16": L.LLAMA_FTYPE_MOSTLY_F16, "q4_k_m": L.LLAMA_FTYPE_MOSTLY_Q4_K_M}
    qp = L.llama_model_quantize_default_params()
    qp.ftype = types[a.type]
    if a.embedding_type:
        # The token embedding (the LM head too when tied) in this type, not the ftype's.
        # (ggml's type ids, from gguf-py: llama-cpp-python does not export GGML_TYPE_BF16)
        qp.token_embedding_type = int({"bf16": gguf.GGMLQuantizationType.BF16,
                                       "f16": gguf.GGMLQuantizationType.F16}[a.embedding_type])
    qp.allow_requantize = True
    qp.nthread = a.threads
    rc = L.llama_model_quantize(a.gguf.encode(), a.out.encode(), ctypes.byref(qp))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize returned {rc}")
    print(f"wrote {a.out} ({a.type})", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("time", "pp", "logits", "quantize"):
        s = sub.add_parser(name)
        s.add_argument("--gguf", required=True)
        s.add_argument("--threads", type=int, default=2)
        s.add_argument("--verbose", action="store_true", help="keep llama.cpp's log")
        if name != "quantize":
            s.add_argument("--n_ctx", type=int, default=256, help="KV cache positions")
            s.add_argument("--load_mode", default="auto", choices=sorted(LOAD_MODES),
                           help="llama.cpp's load mode (auto, its default, maps the file here)")
    t = sub.choices["time"]
    t.add_argument("--warmup", type=int, default=8)
    t.add_argument("--tokens", type=int, default=64)
    t.add_argument("--depth", type=int, default=0,
                   help="prompt tokens fed (batches of 512) before the warmup: decode at positions D.. "
                        "(llama-bench -d D)")
    t.add_argument("--depth_batch", type=int, default=512, help="tokens per llama_decode of the depth's prompt")
    pp = sub.choices["pp"]
    pp.add_argument("--prompt_tokens", type=int, default=512)
    pp.add_argument("--n_batch", type=int, default=512, help="tokens per llama_decode (llama-bench: 512)")
    pp.add_argument("--reps", type=int, default=5)
    g = sub.choices["logits"]
    g.add_argument("--ids", required=True, help="prompt token ids, comma-separated")
    g.add_argument("--new_tokens", type=int, default=8)
    q = sub.choices["quantize"]
    q.add_argument("--out", required=True)
    q.add_argument("--type", default="bf16", choices=["bf16", "q8_0", "f16", "q4_k_m"])
    q.add_argument("--embedding_type", choices=["bf16", "f16"],
                   help="keep token_embd (and a tied LM head) in this type")
    a = p.parse_args()
    {"time": cmd_time, "pp": cmd_pp, "logits": cmd_logits, "quantize": cmd_quantize}[a.cmd](a)


if __name__ == "__main__":
    main()
