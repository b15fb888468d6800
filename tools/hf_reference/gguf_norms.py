#!/usr/bin/env python3
"""Records the norm weights HF transformers loads from a Gemma 3 GGUF in bfloat16, for
//weights:gguf_arch_test to compare with what weights::LoadGguf loads.

llama.cpp's converter stores every Gemma norm weight as 1 + w; transformers' GGUF
loader subtracts 1 (in f32) before the model is cast to bf16. This script loads the
file through transformers, and also re-derives each norm from the file's raw f32
values (bf16(f32(stored) - 1)) with gguf-py, and stops unless both agree, so the
golden records one formula that both sides use.

  .venv-ref/bin/python tools/hf_reference/gguf_norms.py \\
      --gguf /path/to/gemma-3-270m-q4_k_m.gguf --out weights/testdata/gemma3_270m_norms.json

Output JSON: transformers_version, torch_version, gguf_sha256 (of the file), and
norms: {HF name: {"sha256": sha256 of the tensor's bf16 bytes (LE), "first": its
first 8 values as bf16 bit patterns}} for every tensor whose name ends in norm.weight.
"""

import argparse
import hashlib
import json
import os
import sys


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def raw_norms(path, torch):
    """HF name -> bf16 tensor, from the file's own f32 values less the converter's 1."""
    import gguf
    import numpy as np
    reader = gguf.GGUFReader(path)
    names = {"attn_norm": "input_layernorm", "attn_q_norm": "self_attn.q_norm",
             "attn_k_norm": "self_attn.k_norm", "post_attention_norm": "post_attention_layernorm",
             "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm"}
    out = {}
    for t in reader.tensors:
        if t.tensor_type != gguf.GGMLQuantizationType.F32 or not t.name.endswith("norm.weight"):
            continue
        values = np.asarray(t.data, dtype=np.float32) - np.float32(1)
        if t.name == "output_norm.weight":
            hf = "model.norm.weight"
        else:
            _, layer, stem, _ = t.name.split(".")
            hf = f"model.layers.{layer}.{names[stem]}.weight"
        out[hf] = torch.from_numpy(values.copy()).to(torch.bfloat16)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(os.path.abspath(args.gguf)), gguf_file=os.path.basename(args.gguf),
        dtype=torch.bfloat16)
    state = {k: v for k, v in model.state_dict().items() if k.endswith("norm.weight")}
    raw = raw_norms(args.gguf, torch)
    if sorted(raw) != sorted(state):
        sys.exit(f"norm names differ: transformers {sorted(set(state) - set(raw))}, "
                 f"gguf-py {sorted(set(raw) - set(state))}")
    norms = {}
    for name in sorted(state):
        t = state[name].contiguous()
        if not torch.equal(t.view(torch.int16), raw[name].view(torch.int16)):
            sys.exit(f"{name}: transformers' values are not bf16(f32(stored) - 1)")
        bits = t.view(torch.int16).numpy().astype("<u2")
        norms[name] = {"sha256": hashlib.sha256(bits.tobytes()).hexdigest(),
                       "first": [int(b) for b in bits[:8]]}
    doc = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
           "gguf_sha256": file_sha256(args.gguf), "norms": norms}
    # One line per tensor, so the golden stays short and its diffs readable.
    lines = [f"  {json.dumps(k)}: {json.dumps(doc[k])}," for k in sorted(doc) if k != "norms"]
    lines.append('  "norms": {')
    lines += [f"    {json.dumps(n)}: {json.dumps(norms[n], sort_keys=True)}," for n in sorted(norms)]
    lines[-1] = lines[-1].rstrip(",")
    with open(args.out, "w") as f:
        f.write("{\n" + "\n".join(lines) + "\n  }\n}\n")
    print(f"{len(norms)} norm tensors -> {args.out}")


if __name__ == "__main__":
    main()
