#!/usr/bin/env python3
"""KLD parity with llama.cpp (docs/perplexity.md, "Parity with llama.cpp"): for each case,
llama.cpp's own `llama-perplexity --kl-divergence` of a quantized GGUF against its BF16
requantization, and decodekit's `perplexity` of the matching stage against its bf16 stage,
on the same text and windows (-c 512, the second half of each window scored), then one table.

Cases (model: quantized file for llama.cpp / decodekit stage):
  smollm2_135m gguf: the Q4_1 file itself / decode_gguf
  smollm2_135m q8:   the BF16 file requantized to Q8_0, token_embd kept BF16 / decode_q8
  gemma3_270m  gguf: the Q4_K_M file itself / decode_gguf
  gemma3_270m  q8:   as for SmolLM2 / decode_q8
The BF16 file is llama.cpp's requantization of the model's GGUF (`llama_decode.py quantize
--type bf16`: the file's blocks dequantized, the values decodekit's bf16 stage runs; checked
bit for bit by check_requant.py / weights_digest, tools/peer/README.md).

The windows are checked to be the same tokens: llama-perplexity writes its tokens into the
--kl-divergence-base file, decodekit's perplexity writes its windows (--ids_out); every
window is compared token for token (position 0 is BOS in both where the vocabulary adds
one: llama-perplexity puts it there at evaluation, decodekit in the window).

  tools/peer/build_llama_tools.sh && ./bazelw build //tools/perplexity
  tools/peer/.venv/bin/python tools/peer/kld_parity.py [--models smollm2_135m] [--cases gguf,q8]
      [--threads 2] [--chunks N] [--workdir /tmp/decodekit_peer/kld]
Files under --workdir are reused when present (the BF16 / Q8_0 GGUFs, the base logits, each
engine's result); --fresh redoes the runs.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
STAGES = {"gguf": "decode_gguf", "q8": "decode_q8"}


def say(msg):
    print(f"[kld_parity {time.strftime('%H:%M:%S', time.gmtime())}] {msg}", file=sys.stderr, flush=True)


def run(cmd, log=None):
    say(" ".join(cmd) + (f" > {log}" if log else ""))
    if log:
        with open(log, "w") as f:
            subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT)
    else:
        subprocess.run(cmd, check=True)


def output_base():
    out = subprocess.run([os.path.join(ROOT, "bazelw"), "info", "output_base"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def parse_llama(log):
    """The figures of llama-perplexity --kl-divergence's closing statistics."""
    text = open(log, encoding="utf-8", errors="replace").read()

    def num(pattern):
        m = re.search(pattern, text)
        if not m:
            raise SystemExit(f"{log}: no match for {pattern!r}")
        return float(m.group(1))

    return {
        "mean_kld": num(r"Mean\s+KLD:\s+([-\d.]+)"),
        "p99_kld": num(r"99\.0%\s+KLD:\s+([-\d.]+)"),
        "median_kld": num(r"Median\s+KLD:\s+([-\d.]+)"),
        "top1": num(r"Same top p:\s+([-\d.]+)") / 100,
        "ppl": num(r"Mean PPL\(Q\)\s+:\s+([-\d.]+)"),
        "reference_ppl": num(r"Mean PPL\(base\)\s+:\s+([-\d.]+)"),
        "ppl_ratio": num(r"Mean PPL\(Q\)/PPL\(base\)\s+:\s+([-\d.]+)"),
        "chunks": int(num(r"computing over (\d+) chunks")),
    }


def base_tokens(path):
    """(n_ctx, n_chunk, tokens) from a llama-perplexity --kl-divergence-base file."""
    with open(path, "rb") as f:
        if f.read(8) != b"_logits_":
            raise SystemExit(f"{path}: not a llama-perplexity logits file")
        n_ctx, n_vocab, n_chunk = struct.unpack("<Iii", f.read(12))
        tokens = struct.unpack(f"<{n_ctx * n_chunk}i", f.read(4 * n_ctx * n_chunk))
    return n_ctx, n_chunk, tokens


def added_bos(gguf_path):
    """The BOS id llama-perplexity puts at each chunk's position 0, or None: the file's
    tokenizer.ggml.add_bos_token / bos_token_id (both models' files hold the key)."""
    import gguf
    fields = gguf.GGUFReader(gguf_path).fields
    if "tokenizer.ggml.add_bos_token" not in fields:
        raise SystemExit(f"{gguf_path}: no tokenizer.ggml.add_bos_token")
    if not fields["tokenizer.ggml.add_bos_token"].contents():
        return None
    return int(fields["tokenizer.ggml.bos_token_id"].contents())


def check_windows(base_file, ids_file, bos):
    """Fails unless llama-perplexity's chunks are decodekit's windows, token for token."""
    n_ctx, n_chunk, tokens = base_tokens(base_file)
    ours = json.load(open(ids_file))
    if ours["window"] != n_ctx or len(ours["windows"]) != n_chunk:
        raise SystemExit(f"windows differ: llama.cpp {n_chunk} of {n_ctx}, decodekit "
                         f"{len(ours['windows'])} of {ours['window']}")
    if ours["score_from"] != n_ctx // 2:
        raise SystemExit(f"decodekit scores from {ours['score_from']}, llama-perplexity from {n_ctx // 2}")
    for w, window in enumerate(ours["windows"]):
        theirs = list(tokens[w * n_ctx:(w + 1) * n_ctx])
        if bos is not None:
            theirs[0] = bos  # llama-perplexity's BOS for the first batch of each chunk
        if theirs != window:
            i = next(i for i in range(n_ctx) if theirs[i] != window[i])
            raise SystemExit(f"window {w} differs at position {i}: llama.cpp {theirs[i]}, decodekit {window[i]}")
    return n_chunk


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="smollm2_135m,gemma3_270m")
    p.add_argument("--cases", default="gguf,q8", help="gguf (the file itself), q8 (Q8_0 / decode_q8)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--chunks", type=int, default=-1, help="windows (-1: every whole window, both engines)")
    p.add_argument("--workdir", default="/tmp/decodekit_peer/kld")
    p.add_argument("--perplexity", default=os.path.join(ROOT, "bazel-bin/tools/perplexity/perplexity"),
                   help="decodekit's perplexity binary")
    p.add_argument("--fresh", action="store_true", help="redo every run (keeps the GGUFs)")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    py = sys.executable
    bin_dir = subprocess.run([os.path.join(HERE, "build_llama_tools.sh")], check=True, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
    llama_ppl = os.path.join(bin_dir, "llama-perplexity")
    ob = output_base()
    text = os.path.join(ob, "external/english_text/text.txt")
    nice = ["nice", "-n", "15"]
    rows = []
    for model in a.models.split(","):
        src = os.path.join(ob, "external", model, "model.gguf")
        if not os.path.exists(src):
            run([os.path.join(ROOT, "bazelw"), "build", f"@{model}//:model.gguf", "@english_text//:text.txt"])
        bf16 = os.path.join(a.workdir, f"{model}_bf16.gguf")
        if not os.path.exists(bf16):
            run([py, os.path.join(HERE, "llama_decode.py"), "quantize", "--gguf", src, "--out", bf16, "--type", "bf16"])
        base = os.path.join(a.workdir, f"{model}_bf16.kld")
        chunks = ["--chunks", str(a.chunks)]
        # -nr: no extra weight buffer types (AMX / repacked): llama-perplexity with them dies
        # with SIGSEGV on the Q4_1 file on the Intel host (as llama_decode.py's
        # PEER_NO_EXTRA_BUFTS); without them every engine runs ggml's plain CPU dot products.
        common = ["-f", text, "-c", "512", "-b", "512", "-t", str(a.threads), "-nr"] + chunks
        if a.fresh or not os.path.exists(base):
            run(nice + [llama_ppl, "-m", bf16, "--kl-divergence-base", base] + common,
                os.path.join(a.workdir, f"{model}_bf16.log"))
        for case in a.cases.split(","):
            stage = STAGES[case]
            if case == "gguf":
                quant = src
            else:
                quant = os.path.join(a.workdir, f"{model}_q8_0.gguf")
                if not os.path.exists(quant):
                    run([py, os.path.join(HERE, "llama_decode.py"), "quantize", "--gguf", bf16, "--out", quant,
                         "--type", "q8_0", "--embedding_type", "bf16"])
            llog = os.path.join(a.workdir, f"{model}_{case}_llama.log")
            if a.fresh or not os.path.exists(llog):
                run(nice + [llama_ppl, "-m", quant, "--kl-divergence-base", base, "--kl-divergence"] + common,
                    llog + ".tmp")
                os.replace(llog + ".tmp", llog)
            ours_json = os.path.join(a.workdir, f"{model}_{case}_decodekit.json")
            ids = os.path.join(a.workdir, f"{model}_{case}_ids.json")
            if a.fresh or not os.path.exists(ours_json):
                cmd = nice + [a.perplexity, "--model", src, "--stage", stage, "--text", text, "--threads",
                              str(a.threads), "--json", "--ids_out", ids]
                if a.chunks > 0:
                    cmd += ["--max_windows", str(a.chunks)]
                say(" ".join(cmd))
                out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
                open(ours_json, "w").write(out)
            ours = json.load(open(ours_json))
            theirs = parse_llama(llog)
            n = check_windows(base, ids, added_bos(src))
            rows.append((model, case, stage, n, ours, theirs))
    print(f"| model | case | windows | mean KLD dk / llama.cpp | dk / llama.cpp | p99 KLD dk / llama.cpp | "
          f"top-1 dk / llama.cpp | PPL ratio dk / llama.cpp | bf16 PPL dk / llama.cpp |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, case, stage, n, o, t in rows:
        print(f"| {model} | {stage} | {n} | {o['mean_kld']:.5f} / {t['mean_kld']:.5f} | "
              f"{o['mean_kld'] / t['mean_kld']:.3f} | {o['p99_kld']:.4f} / {t['p99_kld']:.4f} | "
              f"{100 * o['top1']:.2f}% / {100 * t['top1']:.2f}% | {o['ppl_ratio']:.4f} / {t['ppl_ratio']:.4f} | "
              f"{o['reference_ppl']:.3f} / {t['reference_ppl']:.3f} |")


if __name__ == "__main__":
    main()
