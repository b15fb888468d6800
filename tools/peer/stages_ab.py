#!/usr/bin/env python3
"""Each stage of a decode chain against its parent, interleaved, optionally under load.

  tools/peer/stages_ab.py --model llama32_1b                      # decode .. decode_x12, 6 rounds
  tools/peer/stages_ab.py --model llama32_1b --load nice19        # the same with a nice -n 19 load
  tools/peer/stages_ab.py --model smollm2_135m --stages decode_bo,decode_opt --rounds 8

Builds (--config=opt) //tools/bench:decode_bench and //models/<model>:<stage> for every
stage, then runs --rounds rounds; each round runs every stage once (decode_bench, --warmup
untimed tokens from position 0, then --tokens timed; its median ms/token), the order
rotated by one stage per round so that no stage always runs first or after the same one.
Each stage is compared with the stage before it in --stages (its parent in the chain) by
the per-round ratio stage / parent; printed per round, then per stage: the medians, the
ratio's median and range, and how many rounds were slower. A stage is "slower than its
parent" when the median ratio exceeds 1 + --noise. With --load nice19 the rounds run
under load.py's background load (a nice -n 19 compile loop per core). Needs no venv:
plain python3. Writes --results (JSON) after every round.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import ab  # noqa: E402  (bazel, run_decode_bench)
import load as bgload  # noqa: E402

CHAIN = "decode,decode_aligned,decode_bo,decode_opt,decode_fused,decode_x12"
WEIGHTS = {"llama32_1b": "synthetic", "smollm2_135m": "@smollm2_135m//:model.gguf"}


def log(msg):
    print(f"[stages_ab {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build(a):
    targets = ["//tools/bench:decode_bench"] + [f"//models/{a.model}:{s}" for s in a.stages]
    weights = a.weights or WEIGHTS[a.model]
    if weights.startswith("@"):
        targets.append(weights)
    if not a.skip_build:
        ab.bazel("build", "--config=opt", *targets)
    if weights.startswith("@"):
        repo, name = weights[1:].split("//:")
        output_base = ab.bazel("info", "output_base", capture=True).stdout.strip()
        weights = os.path.join(output_base, "external", repo, name)
    paths = {"bench": os.path.join(ROOT, "bazel-bin", "tools", "bench", "decode_bench"),
             "weights": weights}
    for s in a.stages:
        paths[s] = os.path.join(ROOT, "bazel-bin", "models", a.model, s + ".elf")
    for k, p in paths.items():
        if p != "synthetic" and not os.path.exists(p):
            raise SystemExit(f"missing {p} ({k}): run without --skip_build")
    return paths


def run_stage(paths, stage, a):
    b = ab.run_decode_bench([paths["bench"], f"--elf={paths[stage]}", f"--weights={paths['weights']}"],
                            a.threads, a.tokens, a.warmup, what=f"decode_bench {stage}")
    return {"ms": b["ms_per_token"], "x_floor": b["x_floor"], "bw": b["bw_GB/s"],
            "solo_pct": b.get("pool_solo_pct", 0.0)}


def summary(rounds, a):
    rows = []
    for i, s in enumerate(a.stages):
        ms = [r[s]["ms"] for r in rounds]
        row = {"stage": s, "rounds": len(rounds), "ms": statistics.median(ms),
               "x_floor": statistics.median([r[s]["x_floor"] for r in rounds])}
        if i > 0:
            parent = a.stages[i - 1]
            ratios = [r[s]["ms"] / r[parent]["ms"] for r in rounds]
            ratio = statistics.median(ratios)
            row.update(parent=parent, ratio=ratio, lo=min(ratios), hi=max(ratios),
                       slower_rounds=sum(x > 1 for x in ratios),
                       verdict=("slower than its parent" if ratio > 1 + a.noise else
                                "faster" if ratio < 1 - a.noise else f"within {a.noise:.0%}"))
        rows.append(row)
    return rows


def save(rounds, a):
    path = a.results
    with open(path + ".tmp", "w") as f:
        json.dump({"args": vars(a), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "rounds": rounds, "summary": summary(rounds, a) if rounds else []}, f, indent=1)
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llama32_1b", choices=sorted(WEIGHTS))
    p.add_argument("--stages", default=CHAIN, help="chain order: each is compared with the one before")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--load", default="none", choices=bgload.KINDS)
    p.add_argument("--weights", default="",
                   help="decode_bench --weights (default: llama32_1b synthetic, generated in each "
                        "run; smollm2_135m its GGUF); a checkpoint dir loads faster")
    p.add_argument("--noise", type=float, default=0.03, help="ratio band counted as equal")
    p.add_argument("--results", default="/tmp/decodekit_peer/stages_ab.json")
    p.add_argument("--skip_build", action="store_true")
    a = p.parse_args()
    a.stages = [s for s in a.stages.split(",") if s]
    if len(a.stages) < 2:
        raise SystemExit("--stages: give at least a stage and its parent")
    if a.rounds < 1 or a.tokens < 1 or a.warmup < 0 or a.threads < 1:
        raise SystemExit("--rounds, --tokens, --threads must be >= 1, --warmup >= 0")
    os.makedirs(os.path.dirname(os.path.abspath(a.results)), exist_ok=True)
    paths = build(a)

    rounds = []
    width = max(len(s) for s in a.stages)
    with bgload.Load(a.load, log=log) as background:
        for r in range(a.rounds):
            order = a.stages[r % len(a.stages):] + a.stages[:r % len(a.stages)]
            res = {"load1_before": os.getloadavg()[0]}
            for s in order:
                background.check()
                res[s] = run_stage(paths, s, a)
            rounds.append(res)
            save(rounds, a)
            print(f"round {r + 1} (load1 {res['load1_before']:.1f}, order {','.join(order)})", flush=True)
            for i, s in enumerate(a.stages):
                ratio = "" if i == 0 else f"  {res[s]['ms'] / res[a.stages[i - 1]]['ms']:.3f} x parent"
                print(f"  {s:<{width}} {res[s]['ms']:9.3f} ms/token  x_floor {res[s]['x_floor']:.2f}"
                      f"  bw {res[s]['bw']:5.1f} GB/s  solo {res[s]['solo_pct']:5.1f}%{ratio}", flush=True)

    print(f"\n{a.model}, {a.threads} threads, load {a.load}, {len(rounds)} rounds "
          f"({a.warmup} warm-up + {a.tokens} timed tokens per run)")
    print("| stage | parent | ms/token (median) | x floor (median) | stage / parent (median) | range | rounds slower | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for row in summary(rounds, a):
        if "parent" in row:
            print(f"| {row['stage']} | {row['parent']} | {row['ms']:.3f} | {row['x_floor']:.2f} | "
                  f"{row['ratio']:.3f} | {row['lo']:.3f}-{row['hi']:.3f} | {row['slower_rounds']} of "
                  f"{row['rounds']} | {row['verdict']} |")
        else:
            print(f"| {row['stage']} | (first) | {row['ms']:.3f} | {row['x_floor']:.2f} | | | | |")
    log(f"wrote {a.results}")


if __name__ == "__main__":
    main()
