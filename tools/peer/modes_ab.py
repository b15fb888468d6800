#!/usr/bin/env python3
"""decode_bench's paired x floor for several binaries or settings, alternated run by run,
per bandwidth mode of the host.

  ./bazelw build --config=opt //tools/bench:decode_bench_smollm2_135m_x12
  cp bazel-bin/tools/bench/decode_bench_smollm2_135m_x12 /tmp/before     # then change, rebuild
  tools/peer/modes_ab.py --model smollm2_135m before=/tmp/before after=bazel-bin/tools/bench/decode_bench_smollm2_135m_x12
  tools/peer/modes_ab.py --model smollm2_135m on=BIN off=BIN:team_runs=false --rounds 16

Each candidate is NAME=BINARY[:FLAG=VALUE,...] (a decode_bench binary, and runtime
flags such as team_runs=false or gemv_prefetch=on passed to its runs as --FLAG=VALUE). A round runs every candidate once, in order: decode_bench
--paired_floor on --threads threads, --warmup untimed then --tokens timed tokens, each
timed token bracketed by plain reads of as many bytes as it streams (decode_bench.cc). The
host's read bandwidth is bimodal and switches every few minutes; where its modes lie
differs between machines (about 33 and 58 GB/s on one, 48 and 83 on another), so the
split comes from the runs themselves: sorted by their median paired bandwidth, the
largest ratio between neighbours, when above 1.3, separates the slow mode from the fast
one (one mode otherwise). Prints each run, then per candidate and mode the median x floor,
the runs' range and count, and per mode the median ratio of each candidate to the first
over the rounds whose two runs read in that mode (interleaved pairs).
The binaries run in the runfiles of --stage's decode_bench target (bazel-bin; build it
first), where the ELF and the weights are. Needs no venv: plain python3.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_candidate(text):
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise SystemExit(f"candidate '{text}': expected NAME=BINARY[:FLAG=VALUE,...]")
    binary, _, flags_text = rest.partition(":")
    flags = []
    for kv in filter(None, flags_text.split(",")):
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise SystemExit(f"candidate '{text}': '{kv}' is not FLAG=VALUE")
        flags.append(f"--{k}={v}")
    binary = os.path.abspath(binary)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"candidate '{name}': {binary} is not an executable file")
    return name, binary, flags


def mode_split(gbs):
    """The bandwidth between the slow and the fast mode of these runs, or None (one mode)."""
    v = sorted(gbs)
    gaps = [(v[i + 1] / v[i], i) for i in range(len(v) - 1) if v[i] > 0]
    if not gaps:
        return None
    ratio, i = max(gaps)
    return (v[i] * v[i + 1]) ** 0.5 if ratio > 1.3 else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("candidates", nargs="+", help="NAME=BINARY[:FLAG=VALUE,...]")
    p.add_argument("--model", default="smollm2_135m", choices=("smollm2_135m", "gemma3_270m", "llama32_1b"))
    p.add_argument("--stage", default="x12", help="decode_bench_<model>_<stage> (the runfiles used)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--tokens", type=int, default=0, help="timed tokens (default 64, llama32_1b 24)")
    p.add_argument("--warmup", type=int, default=4)
    a = p.parse_args()
    tokens = a.tokens or (64 if a.model == "smollm2_135m" else 24)
    if a.rounds < 1 or tokens < 1 or a.threads < 1 or a.warmup < 0:
        raise SystemExit("--rounds, --tokens, --threads must be >= 1, --warmup >= 0")
    target = f"decode_bench_{a.model}_{a.stage}"
    runfiles = os.path.join(ROOT, "bazel-bin", "tools", "bench", target + ".runfiles", "decodekit")
    elf = f"models/{a.model}/decode_{a.stage}.elf"
    if not os.path.exists(os.path.join(runfiles, elf)):
        raise SystemExit(f"{runfiles}/{elf} is missing: ./bazelw build --config=opt //tools/bench:{target}")
    weights = f"external/{a.model}/model.gguf" if a.model in ("smollm2_135m", "gemma3_270m") else "synthetic"
    cands = [parse_candidate(c) for c in a.candidates]
    if len({c[0] for c in cands}) != len(cands):
        raise SystemExit("candidate names must differ")
    runs = []  # (round, name, x_floor_paired, ms/token, paired GB/s)
    for r in range(a.rounds):
        for name, binary, flags in cands:
            out = subprocess.run(
                [binary, f"--elf={elf}", f"--weights={weights}", f"--benchmark_filter=BM_Decode/threads:{a.threads}/",
                 f"--tokens={tokens}", f"--warmup={a.warmup}", f"--context={a.warmup + tokens}",
                 f"--bandwidth_every={tokens}", "--paired_floor", "--benchmark_format=json"] + flags,
                cwd=runfiles, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if out.returncode != 0:
                raise SystemExit(f"{name} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
            b = json.loads(out.stdout)["benchmarks"][0]
            if b.get("error_occurred"):
                raise SystemExit(f"{name}: {b.get('error_message')}")
            runs.append((r, name, b["x_floor_paired"], b["ms_per_token"], b["paired_bw_GB/s"]))
            print(f"round {r + 1} {name:12s} x_floor_paired {b['x_floor_paired']:.3f}  ms/token {b['ms_per_token']:.3f}  "
                  f"paired bw {b['paired_bw_GB/s']:.1f} GB/s", flush=True)
    split = mode_split([g for *_, g in runs])
    mode = lambda gbs: "one" if split is None else "fast" if gbs >= split else "slow"
    where = "one mode" if split is None else f"modes split at {split:.1f} GB/s"
    print(f"\n{a.model} decode_{a.stage}, {a.threads} threads, {a.rounds} rounds, {where}; "
          "x floor (paired), median [range] (runs)")
    for name, _, _ in cands:
        for m in ("fast", "slow", "one"):
            v = [x for _, n, x, _, g in runs if n == name and mode(g) == m]
            if v:
                print(f"  {name:12s} {m}: {statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}] ({len(v)})")
    base = cands[0][0]
    for name, _, _ in cands[1:]:
        for m in ("fast", "slow", "one"):
            ratios = []
            for r in range(a.rounds):
                x = {n: (xf, g) for rr, n, xf, _, g in runs if rr == r}
                if mode(x[base][1]) == m and mode(x[name][1]) == m:
                    ratios.append(x[name][0] / x[base][0])
            if ratios:
                print(f"  {name}/{base} {m}: median {statistics.median(ratios):.3f} "
                      f"[{min(ratios):.3f}-{max(ratios):.3f}] over {len(ratios)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
