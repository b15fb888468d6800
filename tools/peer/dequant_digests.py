#!/usr/bin/env python3
"""Records gguf-py's dequantization (gguf.quants.dequantize, gguf-py 0.19.0) as the goldens
decodekit's dequantizers (weights/dequant.h) are tested against, bit for bit:

  blocks: crafted blocks of each block type decodekit dequantizes beyond Q8_0 / Q4_0 / Q4_1
          (random bytes under random, negative, subnormal and extreme f16 scales) and their
          f32 values -> weights/testdata/dequant_blocks.json (//weights:weights_test)
  file:   every tensor of a GGUF: name, ggml type, dims (ggml order) and the sha256 of its
          dequantized float32 little-endian bytes -> weights/testdata/gemma3_270m_q4_k_m_dequant.json
          (//weights:dequant_gguf_file_test)

  tools/peer/.venv/bin/python tools/peer/dequant_digests.py blocks --out weights/testdata/dequant_blocks.json
  tools/peer/.venv/bin/python tools/peer/dequant_digests.py file \\
      --gguf gemma-3-270m-q4_k_m.gguf --out weights/testdata/gemma3_270m_q4_k_m_dequant.json
Both outputs are deterministic (the blocks come from a fixed seed).
"""
import argparse
import hashlib
import json
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

Q = gguf.GGMLQuantizationType

# Byte offsets of each type's f16 fields (scale first, then minimum / super-minimum),
# as ggml's block structs lay them out.
F16_FIELDS = {
    Q.Q5_0: [0],
    Q.Q5_1: [0, 2],
    Q.Q2_K: [80, 82],
    Q.Q3_K: [108],
    Q.Q4_K: [0, 2],
    Q.Q5_K: [0, 2],
    Q.Q6_K: [208],
}


def f16_bits(rng, kind):
    """One f16 field: 'normal' (|x| in [2^-10, 4), either sign), 'subnormal', or 'max'."""
    sign = int(rng.integers(0, 2)) << 15
    if kind == "subnormal":
        return sign | int(rng.integers(1, 0x400))
    if kind == "max":
        return sign | 0x7BFF  # 65504
    return sign | int(rng.integers(0x1800, 0x4400))


def crafted_blocks(qtype, rng):
    """Blocks of `qtype`: random bytes under each kind of f16 field, all-ones bytes under
    +-65504, and all-zero bytes under signed zero scales (signed-zero results)."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    kinds = ["normal", "normal", "subnormal", "max", "normal", "subnormal"]
    if block_size > 32:  # the K-quants' 256-element blocks: fewer, to keep the file small
        kinds = ["normal", "subnormal", "max"]
    blocks = []
    for kind in kinds:
        b = bytearray(rng.integers(0, 256, type_size, dtype=np.uint8).tobytes())
        for off in F16_FIELDS[qtype]:
            b[off:off + 2] = f16_bits(rng, kind).to_bytes(2, "little")
        blocks.append(bytes(b))
    ones = bytearray(b"\xff" * type_size)
    zeros = bytearray(type_size)
    for i, off in enumerate(F16_FIELDS[qtype]):
        ones[off:off + 2] = (0x7BFF if i == 0 else 0xFBFF).to_bytes(2, "little")
        zeros[off:off + 2] = (0x8000 if i == 0 else 0x0000).to_bytes(2, "little")
    return blocks + [bytes(ones), bytes(zeros)]


def cmd_blocks(a):
    rng = np.random.default_rng(36)
    cases = []
    for qtype in F16_FIELDS:
        data = b"".join(crafted_blocks(qtype, rng))
        values = dequantize(np.frombuffer(data, dtype=np.uint8), qtype)
        assert values.dtype == np.float32
        cases.append({
            "type": qtype.name,
            "ggml_type": int(qtype),
            "blocks_hex": data.hex(),
            "f32_le_hex": values.astype("<f4").tobytes().hex(),
        })
    doc = {
        "generator": "tools/peer/dequant_digests.py blocks",
        "gguf_py": "gguf==0.19.0 (gguf.quants.dequantize)",
        "cases": cases,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def cmd_file(a):
    reader = gguf.GGUFReader(a.gguf)
    tensors = []
    for t in reader.tensors:
        values = dequantize(t.data, t.tensor_type)
        assert values.dtype == np.float32, t.name
        digest = hashlib.sha256(np.ascontiguousarray(values, dtype="<f4").tobytes()).hexdigest()
        tensors.append({
            "name": t.name,
            "type": t.tensor_type.name,
            "dims": [int(d) for d in t.shape],
            "f32_sha256": digest,
        })
    doc = {
        "generator": "tools/peer/dequant_digests.py file",
        "gguf_py": "gguf==0.19.0 (gguf.quants.dequantize)",
        "file_sha256": a.file_sha256,
        "tensors": tensors,
    }
    with open(a.out, "w") as f:  # one tensor a line
        head = json.dumps({k: v for k, v in doc.items() if k != "tensors"}, indent=1)[:-2]
        rows = ",\n  ".join(json.dumps(t) for t in tensors)
        f.write(f'{head},\n "tensors": [\n  {rows}\n ]\n}}\n')
    print(f"{len(tensors)} tensors -> {a.out}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("blocks")
    b.add_argument("--out", required=True)
    f = sub.add_parser("file")
    f.add_argument("--gguf", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--file_sha256", default="",
                   help="the GGUF's sha256, recorded in the golden for the reader")
    a = p.parse_args()
    {"blocks": cmd_blocks, "file": cmd_file}[a.cmd](a)


if __name__ == "__main__":
    main()
