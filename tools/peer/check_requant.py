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

from gguf_pairs import compare_gguf_pair


def f32_to_bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", required=True)
    p.add_argument("--bf16", required=True)
    a = p.parse_args()
    def compare(name, s, d):
        ref = dequantize(s.data, s.tensor_type).astype(np.float32).reshape(-1)
        if d.tensor_type == gguf.GGMLQuantizationType.BF16:
            got = np.asarray(d.data).view(np.uint16).reshape(-1)
            return int(np.count_nonzero(got != f32_to_bf16_bits(ref))), ref.size
        if d.tensor_type == gguf.GGMLQuantizationType.F32:
            return int(np.count_nonzero(np.asarray(d.data, dtype=np.float32).reshape(-1) != ref)), ref.size
        print(f"{name}: unexpected type {d.tensor_type.name} in {a.bf16}")
        return None

    return compare_gguf_pair(a.src, a.bf16, compare)


if __name__ == "__main__":
    sys.exit(main())
