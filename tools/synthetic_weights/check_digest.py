#!/usr/bin/env python3
"""Checks that the C++ weights digest (weights/weights.h Weights::Digest) matches the
same digest computed over the state dict transformers builds.

  .venv/bin/python tools/synthetic_weights/check_digest.py --hf /tmp/llama32_1b_synth \
      --expect sha256:...
  .venv/bin/python tools/synthetic_weights/check_digest.py --gguf path/to/model.gguf \
      --expect sha256:...

Digest: sha256 over every tensor in sorted name order of: the name's bytes, a NUL, the
rank as u32 LE, each dim as i64 LE, then the bf16 data (LE). lm_head.weight is skipped
when the embeddings are tied (it is the same tensor as model.embed_tokens.weight).
Exits 1 on a mismatch.
"""
import argparse
import hashlib
import os
import struct
import sys

import torch
from transformers import AutoModelForCausalLM


def digest(model) -> str:
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    sd = model.state_dict()
    h = hashlib.sha256()
    for name in sorted(sd):
        if tied and name == "lm_head.weight":
            continue
        t = sd[name].detach().to(torch.bfloat16).contiguous().cpu()
        h.update(name.encode() + b"\0")
        h.update(struct.pack("<I", t.dim()))
        for d in t.shape:
            h.update(struct.pack("<q", d))
        h.update(t.view(torch.int16).numpy().tobytes())
    return "sha256:" + h.hexdigest()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--hf", help="HF checkpoint directory")
    p.add_argument("--gguf", help="GGUF file")
    p.add_argument("--expect", help="digest the C++ side printed")
    a = p.parse_args()
    if bool(a.hf) == bool(a.gguf):
        p.error("give exactly one of --hf and --gguf")
    if a.hf:
        model = AutoModelForCausalLM.from_pretrained(a.hf, dtype=torch.bfloat16)
    else:
        path = os.path.abspath(a.gguf)
        model = AutoModelForCausalLM.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.bfloat16)
    got = digest(model)
    print(got)
    if a.expect:
        ok = got == a.expect
        print("MATCH" if ok else f"MISMATCH: C++ says {a.expect}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
