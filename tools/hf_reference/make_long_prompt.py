#!/usr/bin/env python3
"""Writes a one-line long prompt (for the long-position goldens) of at least --tokens
tokens: the prose lines of --source (headings, code blocks, tables and blank lines
dropped), joined by spaces, cut at the first word boundary where the tokenizer's count
reaches --tokens. Deterministic for the same source and tokenizer.

  .venv-ref/bin/python tools/hf_reference/make_long_prompt.py --source README.md \\
      --tokenizer tokenizer/testdata/smollm2_tokenizer.json --tokens 1100 \\
      --out models/smollm2_135m/prompts_long.txt
"""
import argparse
import os

from transformers import AutoTokenizer, PreTrainedTokenizerFast


def prose(path):
    words, in_code = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if s.startswith("```"):
                in_code = not in_code
                continue
            if in_code or not s or s.startswith(("#", "|", "    ")) or line.startswith("    "):
                continue
            words.extend(s.split())
    return words


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", required=True)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokenizer", help="tokenizer.json")
    src.add_argument("--gguf", help="GGUF file whose tokenizer counts (as transformers builds it)")
    p.add_argument("--tokens", type=int, default=1100)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if a.gguf:
        path = os.path.abspath(a.gguf)
        tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    else:
        tok = PreTrainedTokenizerFast(tokenizer_file=a.tokenizer)
    words = prose(a.source)
    lo, hi = 1, len(words)  # the fewest words whose text has >= a.tokens tokens
    count = lambda n: len(tok(" ".join(words[:n]), add_special_tokens=True)["input_ids"])
    if count(hi) < a.tokens:
        raise SystemExit(f"{a.source} has only {count(hi)} tokens of prose")
    while lo < hi:
        mid = (lo + hi) // 2
        if count(mid) >= a.tokens:
            hi = mid
        else:
            lo = mid + 1
    text = " ".join(words[:lo])
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print(f"wrote {a.out}: {lo} words, {count(lo)} tokens")


if __name__ == "__main__":
    main()
