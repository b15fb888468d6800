#!/usr/bin/env python3
"""decodekit vs llama.cpp decode, interleaved A B A B on the same weights (README.md).

  tools/peer/install.sh                                  # once: the venv and llama.cpp
  tools/peer/.venv/bin/python tools/peer/ab.py           # 6 pairs x {smollm2, llama32_1b} x {1, 2} threads
  tools/peer/.venv/bin/python tools/peer/ab.py --models smollm2_135m --threads 2 --pairs 3
  tools/peer/.venv/bin/python tools/peer/ab.py --stage x12    # decode_x12 (bf16 in 12 bits) vs llama.cpp BF16
  tools/peer/.venv/bin/python tools/peer/ab.py --stage q8_0   # decode_q8 vs llama.cpp Q8_0
  tools/peer/.venv/bin/python tools/peer/ab.py --stage gguf --models smollm2_135m
                                                         # decode_gguf vs llama.cpp, one Q4_1 file
  tools/peer/.venv/bin/python tools/peer/ab.py --stage x12 --models gemma3_270m
                                                         # Gemma 3 270M (x12, q8_0 or gguf only)
  tools/peer/.venv/bin/python tools/peer/ab.py --stage x12 --models qwen25_0_5b,qwen3_0_6b
                                                         # Qwen2.5 0.5B, Qwen3 0.6B (x12 or q8_0)
  tools/peer/.venv/bin/python tools/peer/ab.py --stage x12 --prompt_tokens 512
                                                         # prompt processing (pp512) instead of decode

Prepare (idempotent, files under --workdir):
  - builds //tools/bench:decode_bench_<model> (--config=opt) as a `bazel run` script, and
    //tools/peer:read_bandwidth, //tools/peer:weights_digest, //tools/synthetic_weights;
  - smollm2_135m, gemma3_270m: the GGUF decodekit runs (SmolLM2's Q4_1, Gemma 3's
    trained Q4_K_M; dequantized to bf16 at load) and a BF16 GGUF llama.cpp requantizes
    from it; llama32_1b, qwen25_0_5b, qwen3_0_6b: the synthetic checkpoint (seed 1,
    //tools/synthetic_weights) and its BF16 GGUF (convert_synthetic.py: llama, qwen2,
    qwen3 architecture);
  - checks with decodekit's weights digest that the BF16 GGUF each llama.cpp run reads
    holds exactly the bf16 weights decodekit runs (stops otherwise);
  - --stage x12: decodekit runs the chain's decode_x12 stage (//tools/bench:
    decode_bench_<model>_x12: the same bf16 weights stored in 12 bits each, rebuilt bit
    for bit), llama.cpp the BF16 GGUF, as for bf16;
  - --stage q8_0: decodekit runs the chain's decode_q8 stage (//tools/bench:
    decode_bench_<model>_q8: layer GEMV weights quantized to Q8_0 at load, embedding and
    tied LM head bf16), llama.cpp a Q8_0 GGUF it quantizes from the BF16 one with the
    embedding kept BF16; check_q8.py checks its blocks are ggml's reference Q8_0 of the
    BF16 weights, the rule decodekit applies (stops otherwise).
  - --stage gguf (smollm2_135m, gemma3_270m): decodekit runs decode_gguf (//tools/bench:
    decode_bench_<model>_gguf: every GEMV weight in the file's own blocks: SmolLM2's
    Q4_1 / Q8_0, Gemma 3's Q5_0 / Q4_K / Q6_K / Q8_0), llama.cpp the very same GGUF
    file: the same bytes in both engines.
  - gemma3_270m, qwen25_0_5b and qwen3_0_6b have no plain bf16 target (decode_opt):
    --stage x12 runs the same bf16 weights, bit for bit.
Then per (model, threads), --pairs times: A = decode_bench (decodekit, its weights),
a read-bandwidth measurement, B = llama_decode.py time (llama.cpp, the BF16 GGUF). Both
decode --warmup untimed tokens from position 0, then --tokens timed ones (positions
warmup .. warmup+tokens-1); each reports the median ms/token. Prints each pair, then the
medians per (model, threads), split by bandwidth mode when more than one occurs (the
mode comes from a --bw_threads read-bandwidth probe between A and B: ~58 GB/s, ~33 GB/s,
or 'low' when the host is busy); writes --results under --workdir.
With --prompt_tokens N, A and B process a prompt instead (llama-bench's pp method): A =
decode_bench --prompt_tokens N (a new sequence fed N tokens, --prefill_chunk rows per run,
up to the first new token), B = llama_decode.py pp (the same ids in batches of 512, logits
for the last only); each reports the median of --reps prompts after an untimed one.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import load as bgload  # noqa: E402
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable
MODELS = ("smollm2_135m", "llama32_1b", "gemma3_270m", "qwen25_0_5b", "qwen3_0_6b")
GGUF_MODELS = ("smollm2_135m", "gemma3_270m")  # a GGUF of their own (--stage gguf)
# The others run synthetic weights (seed 1): a checkpoint //tools/synthetic_weights writes
# from models/<model>/config.json (the shape the model's decode ELF is built from),
# converted by convert_synthetic.py.
# The stages each model has a //tools/bench:decode_bench_<model><suffix> target for.
STAGES = {"smollm2_135m": ("bf16", "x12", "q8_0", "gguf"), "llama32_1b": ("bf16", "x12", "q8_0"),
          "gemma3_270m": ("x12", "q8_0", "gguf"), "qwen25_0_5b": ("x12", "q8_0"),
          "qwen3_0_6b": ("x12", "q8_0")}


def log(msg):
    print(f"[ab {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def forget(path):
    """Removes a check marker (if any) before the file it vouched for is replaced."""
    if os.path.exists(path):
        os.remove(path)


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, text=True, **kw)


def bazel(*args, capture=False):
    return run([os.path.join(ROOT, "bazelw"), *args], cwd=ROOT,
               stdout=subprocess.PIPE if capture else None)


class Prepared:
    def __init__(self, a):
        self.a = a
        self.w = a.workdir
        os.makedirs(self.w, exist_ok=True)
        self.bin = {}

    def build(self):
        a = self.a
        if not a.skip_build:
            bazel("build", "--config=opt", "//tools/peer:read_bandwidth", "//tools/peer:weights_digest",
                  "//tools/synthetic_weights", *[self.bench_target(m) for m in a.models])
            for m in a.models:
                bazel("run", "--config=opt", f"--script_path={self.script(m)}", self.bench_target(m))
        for name in ("read_bandwidth", "weights_digest"):
            self.bin[name] = os.path.join(ROOT, "bazel-bin", "tools", "peer", name)
        self.bin["synthetic_weights"] = os.path.join(ROOT, "bazel-bin", "tools", "synthetic_weights",
                                                     "synthetic_weights")
        for path in list(self.bin.values()) + [self.script(m) for m in a.models]:
            if not os.path.exists(path):
                raise SystemExit(f"missing {path}: run without --skip_build")

    def bench_target(self, model):
        suffix = {"bf16": "", "x12": "_x12", "q8_0": "_q8", "gguf": "_gguf"}[self.a.stage]
        return f"//tools/bench:decode_bench_{model}{suffix}"

    def model_gguf(self, model):
        """The GGUF file the model's bench target reads (its external repository)."""
        return os.path.join(ROOT, "bazel-bin", "tools", "bench", self.bench_target(model).split(":")[1]
                            + ".runfiles", model, "model.gguf")

    def script(self, model):
        return os.path.join(self.w, self.bench_target(model).split(":")[1] + ".sh")

    def digest(self, *paths):
        out = subprocess.run([self.bin["weights_digest"], "--same", *paths], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE)
        sys.stderr.write(out.stdout)
        return out.returncode == 0, out.stdout

    def weights(self, model):
        """The llama.cpp GGUF for `model`, made and checked once."""
        gguf = os.path.join(self.w, f"{model}_bf16.gguf")
        check = gguf + ".digest_check"
        if self.a.stage == "gguf":
            return self.model_gguf(model)  # the file decode_gguf reads, block for block
        if model in GGUF_MODELS:
            # llama.cpp's BF16 requantization of the model's own (quantized) GGUF; the
            # digest below proves it is what decodekit dequantizes (Gemma's F32 1 + w
            # norms are kept F32, and decodekit subtracts the 1 from both files alike).
            own = self.model_gguf(model)
            if not os.path.exists(gguf):
                run([PY, os.path.join(HERE, "llama_decode.py"), "quantize", "--gguf", own, "--out",
                     gguf + ".tmp", "--type", "bf16"])
                forget(check)  # a check vouches for the file it read, not for a new one
                os.replace(gguf + ".tmp", gguf)
            sources = [own, gguf]
        else:
            ckpt = os.path.join(self.w, f"{model}_synth")
            if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
                run([self.bin["synthetic_weights"], "--model",
                     os.path.join(ROOT, "models", model, "config.json"), "--name", model,
                     "--max_context", "2048", "--out", ckpt,
                     "--seed", "1"], stdout=subprocess.DEVNULL)
            if not os.path.exists(gguf):
                run([PY, os.path.join(HERE, "convert_synthetic.py"), "--checkpoint", ckpt, "--out",
                     gguf + ".tmp"])
                forget(check)
                os.replace(gguf + ".tmp", gguf)
            sources = [ckpt, gguf]
        if not os.path.exists(check):
            ok, text = self.digest(*sources)
            if not ok:
                raise SystemExit(f"{gguf} does not hold the weights decodekit runs:\n{text}")
            with open(check, "w") as f:
                f.write(text)
        if self.a.stage == "q8_0":
            return self.q8(gguf)
        return gguf

    def q8(self, bf16_gguf):
        """llama.cpp's Q8_0 requantization of `bf16_gguf` (embedding kept BF16), checked once."""
        gguf = bf16_gguf.replace("_bf16.gguf", "_q8_0.gguf")
        check = gguf + ".q8_check"
        if not os.path.exists(gguf):
            run([PY, os.path.join(HERE, "llama_decode.py"), "quantize", "--gguf", bf16_gguf, "--out",
                 gguf + ".tmp", "--type", "q8_0", "--embedding_type", "bf16"])
            forget(check)
            os.replace(gguf + ".tmp", gguf)
        if not os.path.exists(check):
            out = subprocess.run([PY, os.path.join(HERE, "check_q8.py"), "--bf16", bf16_gguf, "--q8", gguf],
                                 text=True, stdout=subprocess.PIPE)
            sys.stderr.write(out.stdout)
            if out.returncode != 0:
                raise SystemExit(f"{gguf} is not the Q8_0 weights decodekit runs:\n{out.stdout}")
            with open(check, "w") as f:
                f.write(out.stdout)
        return gguf


def run_decode_bench(cmd, threads, tokens, warmup, what="decode_bench"):
    """Runs decode_bench (`cmd`: the binary or its `bazel run` script, plus flags) on one
    thread count, --warmup untimed then --tokens timed tokens, one bandwidth sample before
    them; returns its JSON benchmark entry (counters as keys)."""
    out = subprocess.run(
        cmd + [f"--benchmark_filter=BM_Decode/threads:{threads}/", "--benchmark_format=json",
               f"--tokens={tokens}", f"--warmup={warmup}", f"--context={warmup + tokens}",
               f"--bandwidth_every={tokens}"],
        cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if out.returncode != 0:
        raise SystemExit(f"{what} failed:\n{out.stderr[-3000:]}")
    b = json.loads(out.stdout)["benchmarks"][0]
    if b.get("error_occurred"):
        raise SystemExit(f"{what}: {b.get('error_message')}")
    return b


def decodekit(prep, model, threads, a):
    if a.prompt_tokens:
        # Prompt processing: decode_bench's BM_Prompt (--prefill_chunk rows per run).
        out = subprocess.run(
            [prep.script(model), f"--benchmark_filter=BM_Prompt/threads:{threads}/", "--benchmark_format=json",
             f"--prompt_tokens={a.prompt_tokens}", f"--prompts={a.reps}", f"--prefill_chunk={a.prefill_chunk}"],
            cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if out.returncode != 0:
            raise SystemExit(f"decode_bench --prompt_tokens failed:\n{out.stderr[-3000:]}")
        b = json.loads(out.stdout)["benchmarks"][0]
        if b.get("error_occurred"):
            raise SystemExit(f"decode_bench: {b.get('error_message')}")
        return {"ms_per_token": b["ttft_ms"], "x_floor": 0.0, "bw_inside": 0.0, "pool_solo_pct": 0.0}
    b = run_decode_bench([prep.script(model)], threads, a.tokens, a.warmup)
    return {"ms_per_token": b["ms_per_token"], "x_floor": b["x_floor"], "bw_inside": b["bw_GB/s"],
            "pool_solo_pct": b.get("pool_solo_pct", 0.0)}


def llamacpp(gguf, threads, a):
    if a.prompt_tokens:
        out = subprocess.run(
            [PY, os.path.join(HERE, "llama_decode.py"), "pp", "--gguf", gguf, f"--threads={threads}",
             f"--prompt_tokens={a.prompt_tokens}", f"--reps={a.reps}", f"--load_mode={a.load_mode}"],
            cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if out.returncode != 0:
            raise SystemExit(f"llama_decode.py pp failed:\n{out.stderr[-3000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        return {"ms_per_token": r["ms"], "ms_max": r["ms"]}
    out = subprocess.run(
        [PY, os.path.join(HERE, "llama_decode.py"), "time", "--gguf", gguf, f"--threads={threads}",
         f"--warmup={a.warmup}", f"--tokens={a.tokens}", f"--n_ctx={a.n_ctx}"]
        + [f"--load_mode={a.load_mode}"],
        cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if out.returncode != 0:
        raise SystemExit(f"llama_decode.py failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bandwidth(prep, threads):
    out = subprocess.run([prep.bin["read_bandwidth"], f"--threads={threads}"], text=True,
                         stdout=subprocess.PIPE, check=True)
    return float(out.stdout.split()[0].split("=")[1])


def mode(gbs, a):
    """The host's bandwidth mode: ~58 or ~33 GB/s, or below both when the host is busy."""
    if a.load != "none":
        return "load"  # the probe then measures the load as much as the memory
    if gbs >= a.fast_gbps:
        return "~58"
    return "~33" if gbs >= a.slow_gbps else "low"


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summary_rows(results, a):
    rows = []
    for model in a.models:
        for t in a.threads:
            rs = [r for r in results if r["model"] == model and r["threads"] == t]
            if not rs:
                continue
            groups = [("all", rs)]
            modes = sorted({r["bw_mode"] for r in rs})
            if len(modes) > 1:
                groups += [(m, [r for r in rs if r["bw_mode"] == m]) for m in modes]
            for label, g in groups:
                rows.append({
                    "model": model, "threads": t, "bw": label, "pairs": len(g),
                    "decodekit_ms": med([r["decodekit_ms"] for r in g]),
                    "llamacpp_ms": med([r["llamacpp_ms"] for r in g]),
                    "ratio": med([r["ratio"] for r in g]),
                    "bw_GBps": med([r["bw_GBps"] for r in g]),
                })
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="smollm2_135m,llama32_1b",
                   help="comma-separated, of " + ", ".join(MODELS))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--stage", default="bf16", choices=["bf16", "x12", "q8_0", "gguf"],
                   help="bf16: decode_opt vs llama.cpp BF16; x12: decode_x12 (the chain's final bf16 "
                        "stage: the same weights in 12 bits each, bit-identical) vs llama.cpp BF16; "
                        "q8_0: decode_q8 vs llama.cpp Q8_0; "
                        "gguf (smollm2_135m, gemma3_270m): decode_gguf vs llama.cpp on the same "
                        "GGUF file (Q4_1, Q4_K_M); gemma3_270m: x12, q8_0 or gguf; qwen25_0_5b, "
                        "qwen3_0_6b: x12 or q8_0")
    p.add_argument("--warmup", type=int, default=8, help="untimed tokens from position 0")
    p.add_argument("--tokens", type=int, default=64, help="timed tokens after the warm-up")
    p.add_argument("--n_ctx", type=int, default=256, help="llama.cpp KV cache positions")
    p.add_argument("--prompt_tokens", type=int, default=0,
                   help="> 0: prompt processing instead of decode (pp, as llama-bench -p N): the time to "
                        "feed N prompt tokens up to the first new token, decode_bench --prompt_tokens vs "
                        "llama_decode.py pp (batches of 512)")
    p.add_argument("--prefill_chunk", type=int, default=512, help="decodekit's prompt chunk (--prompt_tokens)")
    p.add_argument("--reps", type=int, default=3, help="timed prompts per side and pair (--prompt_tokens)")
    p.add_argument("--load_mode", default="auto", choices=["auto", "none", "mmap"],
                   help="llama.cpp's model load mode (auto: its default)")
    p.add_argument("--bw_threads", type=int, default=2,
                   help="threads of the bandwidth probe between A and B (a host-state probe: "
                        "the same for every configuration)")
    p.add_argument("--fast_gbps", type=float, default=45.0,
                   help="probe at or above this: the ~58 GB/s mode")
    p.add_argument("--slow_gbps", type=float, default=25.0,
                   help="probe at or above this (and below --fast_gbps): the ~33 GB/s mode; "
                        "below: 'low' (a busy host)")
    p.add_argument("--workdir", default="/tmp/decodekit_peer", help="GGUFs, checkpoint, results")
    p.add_argument("--results", default="results.json", help="file name under --workdir")
    p.add_argument("--skip_build", action="store_true")
    p.add_argument("--load", default="none", choices=bgload.KINDS,
                   help="run every pair under this background load (load.py; nice19: a "
                        "nice -n 19 compile loop per core, in a session of its own)")
    p.add_argument("--summarize", metavar="RESULTS_JSON",
                   help="only print the medians of a saved (possibly partial) run")
    a = p.parse_args()
    if a.summarize:
        with open(a.summarize) as f:
            saved = json.load(f)
        a.models = saved["args"]["models"]
        a.threads = saved["args"]["threads"]
        a.stage = saved["args"].get("stage", "bf16")
        a.load = saved["args"].get("load", "none")
        a.prompt_tokens = saved["args"].get("prompt_tokens", 0)
        print_summary(saved["pairs"], a)
        return
    a.models = [m for m in a.models.split(",") if m]
    a.threads = [int(t) for t in a.threads.split(",") if t]
    for m in a.models:
        if m not in MODELS:
            raise SystemExit(f"--models: unknown {m}; known: {', '.join(MODELS)}")
        if a.stage not in STAGES[m]:
            raise SystemExit(f"--stage {a.stage}: {m} has no decode_bench target for it (tools/bench/BUILD); "
                             f"its stages: {', '.join(STAGES[m])}"
                             + (" (x12: the same bf16 weights, bit for bit)" if a.stage == "bf16" else ""))

    prep = Prepared(a)
    prep.build()
    gguf = {m: prep.weights(m) for m in a.models}

    results = []
    print(f"{'model':<13} {'thr':>3} {'pair':>4} {'decodekit ms':>12} {'llama.cpp ms':>12} "
          f"{'ratio':>6} {'bw GB/s':>8} {'mode':>5} {'dk x_floor':>10} {'load1':>5} {'dk solo%':>8}", flush=True)
    with bgload.Load(a.load, log=log) as background:
        run_pairs(prep, gguf, results, background, a)
    print_summary(results, a)
    log(f"wrote {save(results, a)}")


def run_pairs(prep, gguf, results, background, a):
    for model in a.models:
        for t in a.threads:
            for i in range(a.pairs):
                background.check()
                load1 = os.getloadavg()[0]  # other processes on the host (2 cores here)
                dk = decodekit(prep, model, t, a)
                gbs = bandwidth(prep, a.bw_threads)
                lc = llamacpp(gguf[model], t, a)
                r = {"model": model, "stage": a.stage, "threads": t, "pair": i + 1,
                     "decodekit_ms": dk["ms_per_token"], "llamacpp_ms": lc["ms_per_token"],
                     "ratio": dk["ms_per_token"] / lc["ms_per_token"], "bw_GBps": gbs,
                     "bw_mode": mode(gbs, a), "decodekit_x_floor": dk["x_floor"],
                     "decodekit_bw_inside": dk["bw_inside"], "llamacpp_ms_max": lc["ms_max"], "load1": load1,
                     "decodekit_pool_solo_pct": dk["pool_solo_pct"]}
                results.append(r)
                print(f"{model:<13} {t:>3} {i + 1:>4} {r['decodekit_ms']:>12.3f} "
                      f"{r['llamacpp_ms']:>12.3f} {r['ratio']:>6.3f} {gbs:>8.1f} {r['bw_mode']:>5} {r['decodekit_x_floor']:>10.2f} {load1:>5.1f} {r['decodekit_pool_solo_pct']:>8.1f}",
                      flush=True)
                save(results, a)


def save(results, a):
    """Writes everything so far (after every pair: a stopped run keeps its pairs)."""
    path = os.path.join(a.workdir, a.results)
    args = {k: v for k, v in vars(a).items()}
    with open(path + ".tmp", "w") as f:
        json.dump({"args": args, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "pairs": results, "medians": summary_rows(results, a)}, f, indent=1)
    os.replace(path + ".tmp", path)
    return path


def print_summary(results, a):
    rows = summary_rows(results, a)
    under = "" if a.load == "none" else f", under load {a.load}"
    pp = getattr(a, "prompt_tokens", 0)
    what = f"pp{pp}: ms to feed {pp} prompt tokens" if pp else "ms/token"
    print(f"\nmedians, weights {a.stage}{under}, {what} (ratio = decodekit ms / llama.cpp ms; < 1: decodekit faster)")
    extra = " decodekit tokens/s | llama.cpp tokens/s |" if pp else ""
    print(f"| model | threads | bandwidth mode | pairs | decodekit {what.split(':')[0] if pp else 'ms/token'} "
          f"| llama.cpp | ratio | read GB/s |{extra}")
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if pp else ""))
    for r in rows:
        tail = f" {pp / r['decodekit_ms'] * 1e3:.1f} | {pp / r['llamacpp_ms'] * 1e3:.1f} |" if pp else ""
        print(f"| {r['model']} | {r['threads']} | {r['bw']} | {r['pairs']} | {r['decodekit_ms']:.3f} "
              f"| {r['llamacpp_ms']:.3f} | {r['ratio']:.3f} | {r['bw_GBps']:.1f} |{tail}")


if __name__ == "__main__":
    main()
