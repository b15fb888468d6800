#!/usr/bin/env python3
"""Spot-checks llama.cpp's requantization against gguf-py: every tensor of the BF16 GGUF
llama.cpp wrote (llama_decode.py quantize --type bf16) must hold, bit for bit, gguf-py's
dequantization of the same tensor of the source GGUF (Q4_1 / Q8_0 / F32) rounded to bf16
(round to nearest even, as PyTorch and decodekit round). Tensors kept in F32 by llama.cpp
(norms) are compared as f32.

  tools/peer/.venv/bin/python tools/peer/check_requant.py --src model.gguf --bf16 model_bf16.gguf
Exits 1 on any difference. (weights_digest checks the same through decodekit's loader.)
"""
import argparse
import sys

import numpy as np
import gguf
from gguf.quants import dequantize


def f32_to_bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", required=True)
    p.add_argument("--bf16", required=True)
    a = p.parse_args()
    src = {t.name: t for t in gguf.GGUFReader(a.src).tensors}
    dst = {t.name: t for t in gguf.GGUFReader(a.bf16).tensors}
    if set(src) != set(dst):
        print(f"tensor names differ: {sorted(set(src) ^ set(dst))}")
        return 1
    bad, counts = 0, {}
    for name in sorted(src):
        s, d = src[name], dst[name]
        ref = dequantize(s.data, s.tensor_type).astype(np.float32).reshape(-1)
        key = f"{s.tensor_type.name}->{d.tensor_type.name}"
        if d.tensor_type == gguf.GGMLQuantizationType.BF16:
            got = np.asarray(d.data).view(np.uint16).reshape(-1)
            diff = int(np.count_nonzero(got != f32_to_bf16_bits(ref)))
        elif d.tensor_type == gguf.GGMLQuantizationType.F32:
            diff = int(np.count_nonzero(np.asarray(d.data, dtype=np.float32).reshape(-1) != ref))
        else:
            print(f"{name}: unexpected type {d.tensor_type.name} in {a.bf16}")
            return 1
        counts[key] = counts.get(key, 0) + 1
        if diff:
            bad += 1
            print(f"{name} ({key}): {diff} of {ref.size} values differ")
    print(", ".join(f"{k}: {v} tensors" for k, v in sorted(counts.items())))
    print("IDENTICAL" if not bad else f"{bad} tensors differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
