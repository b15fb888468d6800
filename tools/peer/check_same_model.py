#!/usr/bin/env python3
"""Checks that llama.cpp runs the same model as decodekit: feeds a golden prompt's ids
(models/<model>/goldens/hf_bf16.json, the HF transformers bf16 reference that decodekit's
verify gate passes against) to llama.cpp one token at a time, generates greedily and
prints llama.cpp's and HF's top-5 side by side. Passes, as the verify gate does, when the
greedy tokens agree up to the first divergence and llama.cpp's token there is in HF's
top 5 (bf16 arithmetic differs between engines; near-ties may flip). On synthetic weights
the top logits lie close together, so a wrong model can still put its first token in HF's
top 5: --min_equal N then also requires the first N greedy tokens to be equal.

  tools/peer/.venv/bin/python tools/peer/check_same_model.py \
      --gguf /tmp/decodekit_peer/llama32_1b_bf16.gguf \
      --goldens models/llama32_1b/goldens/hf_bf16.json --new_tokens 8 [--min_equal 8]
Exits 1 when the check fails.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gguf", required=True)
    p.add_argument("--goldens", required=True)
    p.add_argument("--prompt", type=int, default=0, help="index of the golden prompt")
    p.add_argument("--new_tokens", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--min_equal", type=int, default=0,
                   help="fail unless at least this many greedy tokens equal HF's (at most --new_tokens)")
    a = p.parse_args()
    g = json.load(open(a.goldens))["prompts"][a.prompt]
    n = min(a.new_tokens, len(g["steps"]))
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "llama_decode.py"), "logits", "--gguf", a.gguf,
         "--threads", str(a.threads), "--ids", ",".join(map(str, g["prompt_ids"])),
         "--new_tokens", str(n)], text=True, stdout=subprocess.PIPE, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])["steps"]
    print(f"prompt {g['text']!r} = {g['prompt_ids']}")
    in_top5, diverged = True, False
    for i, (mine, ref) in enumerate(zip(got, g["steps"])):
        same = mine["id"] == ref["id"]
        print(f"step {i}: llama.cpp {mine['id']:>6} top5 {mine['top5']} {mine['top5_logits']}")
        print(f"        HF bf16   {ref['id']:>6} top5 {ref['top5']} {ref['top5_logits']}"
              f"  {'same' if same else 'DIVERGE'}")
        if not same:
            in_top5 = mine["id"] in ref["top5"]
            diverged = True
            break  # the contexts differ from here on
    agreed = i if diverged else len(got)
    ok = in_top5 and agreed >= min(a.min_equal, n)
    print(f"{'PASS' if ok else 'FAIL'}: {agreed} of {n} greedy tokens equal to HF's"
          + (f"; at the divergence llama.cpp's token is {'in' if in_top5 else 'NOT in'} HF's top 5"
             if diverged else "")
          + (f"; --min_equal {a.min_equal}" if a.min_equal else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
