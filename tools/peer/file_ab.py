#!/usr/bin/env python3
"""decodekit against llama.cpp on one GGUF file that no model package names (the 3B / 8B
of make_big_gguf.py, a wheel's GGUF at a long context): interleaved pairs, as ab.py.

  tools/peer/.venv/bin/python tools/peer/file_ab.py --elf /tmp/scale/l8b/decode_gguf.elf \
      --gguf /tmp/scale/llama31_8b_q4_k_m.gguf --threads 1,2 --pairs 6 [--depth 8120]

Each pair: A = decode_bench (the opt build in bazel-bin; --depth D prompt tokens first,
then --warmup untimed and --tokens timed decode tokens, one bandwidth sample before them),
then the bandwidth probe (read_bandwidth --threads=2; mode ~58 >= 45 GB/s, ~33 >= 25, else
low), then B = llama_decode.py time with the same depth / warmup / tokens. Printed per pair:
ms/token of both, the ratio (decodekit / llama.cpp; < 1 = decodekit faster), the probe and
its mode, x_floor, the 1-minute load average; then medians per thread count and mode.
--no_extra_bufts: llama.cpp without its extra weight buffer types (AMX / repacked), which
this machine's build needs for any batch of more than one token (a crash in llama_decode
otherwise), i.e. for --depth.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = os.path.join(HERE, ".venv", "bin", "python")


def decodekit(a, threads):
    cmd = [os.path.join(ROOT, "bazel-bin/tools/bench/decode_bench"), f"--elf={a.elf}", f"--weights={a.gguf}",
           f"--benchmark_filter=BM_Decode/threads:{threads}/", "--benchmark_format=json",
           f"--tokens={a.tokens}", f"--warmup={a.warmup}", f"--depth={a.depth}",
           f"--context={a.depth + a.warmup + a.tokens}", f"--bandwidth_every={a.tokens}"]
    out = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if out.returncode != 0:
        raise SystemExit(f"decode_bench failed:\n{out.stderr[-3000:]}")
    b = json.loads(out.stdout)["benchmarks"][0]
    if b.get("error_occurred"):
        raise SystemExit(f"decode_bench: {b.get('error_message')}")
    return b


def llamacpp(a, threads):
    env = dict(os.environ)
    if a.no_extra_bufts:
        env["PEER_NO_EXTRA_BUFTS"] = "1"
    cmd = [PY, os.path.join(HERE, "llama_decode.py"), "time", "--gguf", a.gguf, f"--threads={threads}",
           f"--warmup={a.warmup}", f"--tokens={a.tokens}", f"--depth={a.depth}", f"--n_ctx={a.n_ctx}"]
    out = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if out.returncode != 0:
        raise SystemExit(f"llama_decode.py failed (rc {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def probe():
    out = subprocess.run([os.path.join(ROOT, "bazel-bin/tools/peer/read_bandwidth"), "--threads=2"], text=True,
                         stdout=subprocess.PIPE, check=True)
    return float(out.stdout.split()[0].split("=")[1])


def mode(gbs):
    return "~58" if gbs >= 45 else "~33" if gbs >= 25 else "low"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elf", required=True)
    p.add_argument("--gguf", required=True)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--depth", type=int, default=0)
    p.add_argument("--n_ctx", type=int, default=256, help="llama.cpp's KV positions without --depth")
    p.add_argument("--no_extra_bufts", action="store_true")
    p.add_argument("--results", default=None, help="JSON of every pair, rewritten after each")
    a = p.parse_args()
    rows = []
    for threads in [int(t) for t in a.threads.split(",")]:
        for i in range(a.pairs):
            A = decodekit(a, threads)
            gbs = probe()
            B = llamacpp(a, threads)
            r = {"threads": threads, "pair": i, "dk_ms": A["ms_per_token"], "lc_ms": B["ms_per_token"],
                 "ratio": A["ms_per_token"] / B["ms_per_token"], "probe_GBs": gbs, "mode": mode(gbs),
                 "x_floor": A["x_floor"], "load1": os.getloadavg()[0], "depth": a.depth,
                 "dk_load_first_token_ms": A.get("load_first_token_ms"), "lc_first_token_ms": B.get("first_token_ms"),
                 "dk_depth_prefill_ms": A.get("depth_prefill_ms"), "lc_prefill_ms": B.get("prefill_ms")}
            rows.append(r)
            print(f"T={threads} pair {i}: decodekit {r['dk_ms']:.2f} ms  llama.cpp {r['lc_ms']:.2f} ms  "
                  f"ratio {r['ratio']:.3f}  probe {gbs:.1f} GB/s ({r['mode']})  x_floor {r['x_floor']:.2f}  "
                  f"load {r['load1']:.2f}", flush=True)
            if a.results:
                with open(a.results, "w") as f:
                    json.dump({"args": vars(a), "pairs": rows}, f, indent=1)
    print("\nmedians:")
    for threads in sorted({r["threads"] for r in rows}):
        for m in [None] + sorted({r["mode"] for r in rows if r["threads"] == threads}):
            sel = [r for r in rows if r["threads"] == threads and (m is None or r["mode"] == m)]
            if m is not None and len(sel) == len([r for r in rows if r["threads"] == threads]):
                continue
            med = lambda k: statistics.median(r[k] for r in sel)  # noqa: E731
            print(f"  T={threads} {'all' if m is None else m} ({len(sel)} pairs): decodekit {med('dk_ms'):.2f} ms, "
                  f"llama.cpp {med('lc_ms'):.2f} ms, ratio {med('ratio'):.3f}, x_floor {med('x_floor'):.2f}")


if __name__ == "__main__":
    main()
