#!/usr/bin/env python3
"""Checks that a Q8_0 GGUF llama.cpp wrote from a BF16 GGUF (llama_decode.py quantize
--type q8_0 --embedding_type bf16) holds exactly the weights decodekit's decode_q8 stage
runs: every Q8_0 tensor equals, block for block (f16 scale and 32 int8), gguf-py's
reference Q8_0 quantization (ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = roundf(x
/ d)) of the BF16 tensor, which is the rule decodekit's quantize_weights applies at load
(kernels/gemv/quantize.cc); the other tensors (the embedding / tied LM head in BF16, the
F32 norms) are unchanged. Also prints which tensors are in which type.

  tools/peer/.venv/bin/python tools/peer/check_q8.py --bf16 model_bf16.gguf --q8 model_q8_0.gguf
Exits 1 on any difference.
"""
import argparse
import sys

import numpy as np
import gguf
from gguf.quants import quantize

from gguf_pairs import compare_gguf_pair

T = gguf.GGMLQuantizationType


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bf16", required=True)
    p.add_argument("--q8", required=True)
    a = p.parse_args()
    def compare(name, s, d):
        key = f"{s.tensor_type.name}->{d.tensor_type.name}"
        got = np.asarray(d.data).view(np.uint8).reshape(-1)
        if name == "token_embd.weight" and d.tensor_type != s.tensor_type:
            print(f"{name}: {key}, but decode_q8 keeps the embedding (and tied LM head) as it is"
                  " (quantize with --embedding_type bf16)")
            return None
        if d.tensor_type == T.Q8_0:
            if s.tensor_type != T.BF16:
                print(f"{name}: Q8_0 from {s.tensor_type.name}, expected from BF16")
                return None
            bits = np.asarray(s.data).view(np.uint16).astype(np.uint32) << 16
            x = bits.view(np.float32).reshape(-1, int(s.shape[0]))  # rows of ne0 elements
            ref = quantize(x, T.Q8_0).view(np.uint8).reshape(-1)
        elif d.tensor_type == s.tensor_type:
            ref = np.asarray(s.data).view(np.uint8).reshape(-1)
        else:
            print(f"{name}: unexpected {key}")
            return None
        if got.size != ref.size:
            return ref.size, ref.size
        return int(np.count_nonzero(got != ref)), ref.size  # bytes

    return compare_gguf_pair(a.bf16, a.q8, compare)


if __name__ == "__main__":
    sys.exit(main())
