#!/usr/bin/env python3
"""Batched decode against llama.cpp's: aggregate generated tokens/s of N sequences stepped
together (one run of the model a step, a token row per sequence), decodekit's
//tools/bench:batch_bench against llama.cpp through its C API (llama-cpp-python's low-level
bindings, as llama_decode.py: N sequences, one llama_decode of N tokens a step, what
llama-batched-bench's TG phase times), on the same GGUF file, 2 threads.

  tools/peer/.venv/bin/python tools/peer/batched_ab.py \\
      --gguf /path/to/model.gguf --elf bazel-bin/models/smollm2_135m/decode_gguf.elf \\
      --batch_bench bazel-bin/tools/bench/batch_bench --read_bandwidth bazel-bin/tools/peer/read_bandwidth \\
      --pairs 6

Each pair runs both engines, each in a process of its own, one after the other (the order
reversed every other pair), after a read-bandwidth sample and with the load average
(/proc/loadavg, 1 minute) beside it: the host's bandwidth swings between modes minute to
minute and other work loads it. Each engine's run: every sequence is fed --prompt_tokens
tokens of its own, then for N = 1, 2, 4, 8 (--batches), --steps steps of N rows from there
(the KV entries past the prompt dropped between measurements). decodekit's rows feed each
sequence's greedy choice (its top-k runs inside the program, in the timed step); llama.cpp's
feed the argmax of each row's logits, taken outside the timed window (llama_decode +
llama_synchronize only, as llama-batched-bench). Prints each pair and, per N, the medians of
both engines' tokens/s and of the pairs' ratios (decodekit / llama.cpp).

  --peer_tool PATH: llama.cpp's side is its own `llama-batched-bench` (built by
  build_llama_tools.sh) instead: `-npp PROMPT -ntg STEPS -npl 1,2,4,8 -t THREADS`, one process
  a run, its TG rate (S_TG t/s: N rows a step, logits for every row) per N, read from its
  `--output-format jsonl` lines. Its rows are random ids (std::rand), not greedy choices; the
  cost of a step does not depend on which ids it feeds.

  `llama` subcommand: llama.cpp's side alone through the C API (one JSON line), what each
  pair runs without --peer_tool.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cmd_llama(a):
    sys.path.insert(0, HERE)
    import numpy as np
    import llama_cpp as L
    import llama_decode as D

    D.quiet_logs(False)
    most = max(a.batches)
    per_seq = a.prompt_tokens + a.steps + 16
    model, ctx, n_vocab = D.open_model(a.gguf, a.threads, per_seq * most, "auto",
                                       n_batch=max(most, 64), n_seq_max=most)
    mem = L.llama_get_memory(ctx)
    batch = L.llama_batch_init(max(most, 64), 0, 1)

    def run(rows):  # rows: (token, seq, pos, logits?)
        batch.n_tokens = len(rows)
        for i, (t, s, p, lg) in enumerate(rows):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.seq_id[i][0], batch.logits[i] = t, p, 1, s, lg
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            raise SystemExit(f"llama_decode returned {rc}")
        L.llama_synchronize(ctx)

    # Each sequence's prompt (the ids batch_bench feeds), 64 rows a run.
    for s in range(most):
        ids = [(i * 7919 + s * 104729 + 17) % n_vocab for i in range(a.prompt_tokens)]
        for start in range(0, len(ids), 64):
            run([(t, s, start + i, 1 if start + i == len(ids) - 1 else 0)
                 for i, t in enumerate(ids[start:start + 64])])

    def measure(n):
        for s in range(n):
            L.llama_memory_seq_rm(mem, s, a.prompt_tokens, -1)
        nxt = [1] * n
        spent = 0.0
        for step in range(a.steps):
            t0 = time.perf_counter()
            run([(nxt[s], s, a.prompt_tokens + step, 1) for s in range(n)])
            spent += time.perf_counter() - t0
            for s in range(n):
                logits = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, s), shape=(n_vocab,))
                nxt[s] = int(np.argmax(logits))
        return spent

    measure(most)  # warm
    out = {}
    for n in [1] + a.batches:
        out[str(n)] = n * a.steps / measure(n)
    print(json.dumps({"engine": "llama.cpp", "tok_s": out}))
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_dk(a):
    cmd = [a.batch_bench, "--elf", a.elf, "--weights", a.gguf, "--rounds", "1", "--steps", str(a.steps),
           "--prompt_tokens", str(a.prompt_tokens), "--batches", ",".join(map(str, a.batches)),
           "--threads", str(a.threads)]
    out = subprocess.run(cmd, text=True, capture_output=True, timeout=a.timeout)
    if out.returncode != 0:
        raise SystemExit(f"batch_bench failed: {out.stderr}")
    tok = {"1": float(re.search(r"median: 1 sequence ([\d.]+) tok/s", out.stdout).group(1))}
    for n in a.batches:
        tok[str(n)] = float(re.search(rf"median: {n} sequences ([\d.]+) tok/s", out.stdout).group(1))
    return tok


def run_llama_tool(a, env):
    ns = [1] + a.batches
    cmd = [a.peer_tool, "-m", a.gguf, "-c", str(max(ns) * (a.prompt_tokens + a.steps) + 64),
           "-npp", str(a.prompt_tokens), "-ntg", str(a.steps), "-npl", ",".join(map(str, ns)),
           "-t", str(a.threads), "--output-format", "jsonl",
           # No AMX / repacked weight buffers (use_extra_bufts off, as PEER_NO_EXTRA_BUFTS in the
           # C API runs): with them llama-batched-bench 0.3.36 dies of SIGSEGV on this Intel
           # host (family 6 model 167) at the first batch of rows, as llama-perplexity does.
           "-nr"]
    out = subprocess.run(cmd, text=True, capture_output=True, env=env, timeout=a.timeout)
    if out.returncode != 0:
        raise SystemExit(f"llama-batched-bench failed ({out.returncode}): {out.stderr[-2000:]}")
    tok = {}
    for line in (out.stdout + "\n" + out.stderr).splitlines():
        line = line.strip()
        if line.startswith("{") and '"speed_tg"' in line:
            row = json.loads(line)
            if row["pp"] != a.prompt_tokens or row["tg"] != a.steps or row["n_threads"] != a.threads:
                raise SystemExit(f"llama-batched-bench ran another setting than asked: {line}")
            tok[str(row["pl"])] = row["speed_tg"]
    missing = [n for n in ns if str(n) not in tok]
    if missing:
        raise SystemExit(f"llama-batched-bench printed no row for N={missing} (context too small?):\n"
                         f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return tok


def run_llama(a):
    env = dict(os.environ, PEER_NO_EXTRA_BUFTS="1", PYTHONDONTWRITEBYTECODE="1")
    if a.omp_passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    if a.peer_tool:
        return run_llama_tool(a, env)
    cmd = [sys.executable, os.path.abspath(__file__), "llama", "--gguf", a.gguf, "--steps", str(a.steps),
           "--prompt_tokens", str(a.prompt_tokens), "--batches", ",".join(map(str, a.batches)),
           "--threads", str(a.threads)]
    out = subprocess.run(cmd, text=True, capture_output=True, env=env, timeout=a.timeout)
    if out.returncode != 0:
        raise SystemExit(f"llama.cpp side failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["tok_s"]


def cmd_ab(a):
    ns = ["1"] + [str(n) for n in a.batches]
    rows = []
    print(f"batched_ab: {os.path.basename(a.gguf)}, {a.elf}; {a.threads} threads, {a.prompt_tokens} prompt tokens, "
          f"{a.steps} steps a measurement; llama.cpp by "
          f"{a.peer_tool or 'its C API (llama_decode, this script)'}, OMP_WAIT_POLICY="
          f"{'PASSIVE' if a.omp_passive else '(its default)'}", flush=True)
    print("pair  GB/s  load  first      " + "  ".join(f"N={n}: dk / llama tok/s (x)" for n in ns), flush=True)
    for p in range(a.pairs):
        gbs = float(re.search(r"read_bandwidth_GBps=([\d.]+)", subprocess.run([a.read_bandwidth], text=True, capture_output=True).stdout).group(1))
        load = loadavg()
        order = ["dk", "llama"] if p % 2 == 0 else ["llama", "dk"]
        got = {}
        for e in order:
            got[e] = run_dk(a) if e == "dk" else run_llama(a)
        rows.append((gbs, load, got))
        print(f"{p:4d}  {gbs:4.1f}  {load:4.1f}  {order[0]:5s}  " + "  ".join(
            f"{got['dk'][n]:7.1f} / {got['llama'][n]:7.1f} ({got['dk'][n] / got['llama'][n]:.2f}x)" for n in ns),
            flush=True)
    print("medians over the pairs:")
    one_dk = statistics.median(r[2]["dk"]["1"] for r in rows)
    one_ll = statistics.median(r[2]["llama"]["1"] for r in rows)
    for n in ns:
        dk = statistics.median(r[2]["dk"][n] for r in rows)
        ll = statistics.median(r[2]["llama"][n] for r in rows)
        ratio = statistics.median(r[2]["dk"][n] / r[2]["llama"][n] for r in rows)
        print(f"  N={n}: decodekit {dk:.1f} tok/s ({dk / one_dk:.2f}x its N=1), llama.cpp {ll:.1f} tok/s "
              f"({ll / one_ll:.2f}x its N=1); decodekit / llama.cpp {ratio:.2f}x (median of the pairs' ratios, "
              f"min {min(r[2]['dk'][n] / r[2]['llama'][n] for r in rows):.2f}, "
              f"max {max(r[2]['dk'][n] / r[2]['llama'][n] for r in rows):.2f})")
    print(f"  bandwidth {min(r[0] for r in rows):.1f}-{max(r[0] for r in rows):.1f} GB/s, "
          f"load average {min(r[1] for r in rows):.1f}-{max(r[1] for r in rows):.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="ab", choices=["ab", "llama"])
    p.add_argument("--gguf", required=True)
    p.add_argument("--elf", help="decodekit's decode_gguf ELF for the GGUF (ab)")
    p.add_argument("--batch_bench", help="//tools/bench:batch_bench's binary (ab)")
    p.add_argument("--read_bandwidth", help="//tools/peer:read_bandwidth's binary (ab)")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt_tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--omp_passive", action="store_true",
                   help="llama.cpp's OpenMP threads sleep at barriers instead of spinning (OMP_WAIT_POLICY=PASSIVE): "
                        "its spinning collapses when other processes hold the cores")
    p.add_argument("--peer_tool", help="llama.cpp's llama-batched-bench binary (build_llama_tools.sh): "
                                        "llama.cpp's side runs it instead of the C API")
    p.add_argument("--timeout", type=float, default=600, help="seconds one engine's run may take")
    p.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4, 8])
    a = p.parse_args()
    if a.command == "llama":
        return cmd_llama(a)
    for f in ("elf", "batch_bench", "read_bandwidth"):
        if not getattr(a, f):
            p.error(f"--{f} is required for ab")
    cmd_ab(a)


if __name__ == "__main__":
    main()
