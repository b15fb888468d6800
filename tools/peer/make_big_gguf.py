#!/usr/bin/env python3
"""Llama-3.x-shaped GGUFs of synthetic values (3B, 8B: too big for the in-memory path),
streamed tensor by tensor, then quantized by llama.cpp (Q4_K_M by default).

  tools/peer/.venv/bin/python tools/peer/make_big_gguf.py \
      --config tools/peer/configs/llama31_8b.json --out /tmp/scale/llama31_8b_q4_k_m.gguf

The values are //tools/synthetic_weights' (weights/synthetic.cc: MakeSyntheticWeights,
seed --seed), element for element: the same splitmix64 hash of (tensor name, index), the
same f32 products, rounded to bf16 the same way. The in-memory path
(`//tools/synthetic_weights --model config.json` -> `convert_synthetic.py`) holds the
whole bf16 model in RAM (16 GB for an 8B); this one holds one tensor at a time (the
largest, token_embd of an 8B: 1 GB of bf16 and its f32 intermediates) and writes the BF16
GGUF byte for byte as convert_synthetic.py does from that checkpoint (same metadata,
tokenizer, tensor order, Q/K permutation, rope_freqs). `--check CHECKPOINT_DIR` compares
the two (cmp) for a model that fits the in-memory path (the 3B does: 6.4 GB).

The BF16 file (2 bytes a parameter) is deleted once quantized unless --keep_bf16.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import convert_synthetic as cs  # noqa: E402

M64 = (1 << 64) - 1


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for c in s.encode():
        h ^= c
        h = (h * 0x100000001B3) & M64
    return h


def mix64(z):  # splitmix64's finalizer on a Python int
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def tensor_key(seed, name):
    return mix64(mix64(seed ^ 0x6A09E667F3BCC908) ^ fnv1a64(name))


def synthetic_bf16(key, begin, end, norm):
    """Elements [begin, end) of a synthetic tensor as bf16 bits (uint16): Uniform(key, i, std)
    of weights/synthetic.cc (std 0.02; norms 1 + Uniform(.., 0.3)), F32ToBf16-rounded."""
    std = 0.3 if norm else 0.02
    scale = np.float32(std * 1.7320508075688772 / 8388608.0)
    z = np.arange(begin + 1, end + 1, dtype=np.uint64)
    z *= np.uint64(0x9E3779B97F4A7C15)
    z += np.uint64(key)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    q = (z >> np.uint64(40)).astype(np.int32)
    q -= np.int32(1 << 23)
    f = q.astype(np.float32)
    f *= scale
    if norm:
        f += np.float32(1.0)
    u = f.view(np.uint32)
    u += np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return (u >> np.uint32(16)).astype(np.uint16)


class SyntheticTensor:
    """What GGUFWriter.add_tensor needs of an array (shape, dtype, nbytes, tofile), generated
    only when written and then dropped: bf16 bits, or F32 (1-D norms, as the converter
    writes them), Q/K rows permuted for llama.cpp's interleaved RoPE where `permute_heads`."""

    CHUNK = 1 << 23  # elements per generated slice

    def __init__(self, seed, hf_name, dims, f32=False, permute_heads=0):
        self.key = tensor_key(seed, hf_name)
        self.norm = hf_name.endswith("norm.weight")
        self.shape = tuple(dims)
        self.f32 = f32
        self.permute_heads = permute_heads
        self.dtype = np.dtype(np.float32 if f32 else np.uint16)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize

    def _convert(self, bits):
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32) if self.f32 else bits

    def tofile(self, fout):
        n = int(np.prod(self.shape))
        if self.permute_heads:
            bits = synthetic_bf16(self.key, 0, n, self.norm).reshape(self.shape)
            cs.permute_for_interleaved_rope(bits, self.permute_heads).tofile(fout)
            return
        for b in range(0, n, self.CHUNK):
            self._convert(synthetic_bf16(self.key, b, min(n, b + self.CHUNK), self.norm)).tofile(fout)


def write_bf16_gguf(cfg, out, name, seed, tokenizer=None):
    arch = cs.arch_of(cfg, "config")
    if arch.name != "llama":
        raise SystemExit(f"make_big_gguf: llama only (got {arch.name})")
    shape = cs.Shape(cfg)
    ffn = cfg["intermediate_size"]
    H, hd = shape.hidden, shape.head_dim
    w = gguf.GGUFWriter(out, arch.name)
    cs.add_metadata(w, arch, cfg, shape, name)
    cs.add_tokenizer(w, arch, tokenizer or arch.tokenizer, shape.vocab)

    def bf16(gguf_name, hf_name, dims, permute_heads=0):
        w.add_tensor(gguf_name, SyntheticTensor(seed, hf_name, dims, permute_heads=permute_heads),
                     raw_dtype=gguf.GGMLQuantizationType.BF16)

    def f32(gguf_name, hf_name, dims):
        w.add_tensor(gguf_name, SyntheticTensor(seed, hf_name, dims, f32=True))

    # convert_synthetic.py's order.
    divisors = cs.llama3_rope_divisors(cfg, hd)
    if divisors is not None:
        w.add_tensor("rope_freqs.weight", divisors)
    bf16("token_embd.weight", "model.embed_tokens.weight", [shape.vocab, H])
    f32("output_norm.weight", "model.norm.weight", [H])
    if not shape.tied:
        bf16("output.weight", "lm_head.weight", [shape.vocab, H])
    for i in range(shape.n_layers):
        hf, g = f"model.layers.{i}.", f"blk.{i}."
        f32(g + "attn_norm.weight", hf + "input_layernorm.weight", [H])
        bf16(g + "attn_q.weight", hf + "self_attn.q_proj.weight", [shape.n_heads * hd, H], shape.n_heads)
        bf16(g + "attn_k.weight", hf + "self_attn.k_proj.weight", [shape.n_kv * hd, H], shape.n_kv)
        bf16(g + "attn_v.weight", hf + "self_attn.v_proj.weight", [shape.n_kv * hd, H])
        bf16(g + "attn_output.weight", hf + "self_attn.o_proj.weight", [H, shape.n_heads * hd])
        f32(g + "ffn_norm.weight", hf + "post_attention_layernorm.weight", [H])
        bf16(g + "ffn_gate.weight", hf + "mlp.gate_proj.weight", [ffn, H])
        bf16(g + "ffn_up.weight", hf + "mlp.up_proj.weight", [ffn, H])
        bf16(g + "ffn_down.weight", hf + "mlp.down_proj.weight", [H, ffn])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="HF config.json of the shape (LlamaForCausalLM)")
    p.add_argument("--out", required=True, help="the quantized .gguf (the BF16 one: OUT minus .gguf + _bf16.gguf)")
    p.add_argument("--name", default=None, help="general.name (default: the config file's stem)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--type", default="q4_k_m", help="llama_decode.py quantize --type")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--keep_bf16", action="store_true")
    p.add_argument("--bf16_only", action="store_true", help="write the BF16 GGUF only")
    p.add_argument("--check", default=None, metavar="CHECKPOINT_DIR",
                   help="also convert_synthetic.py this checkpoint (//tools/synthetic_weights' of the "
                        "same config and seed) and require the same BF16 bytes")
    a = p.parse_args()
    cfg = json.load(open(a.config))
    name = a.name or os.path.splitext(os.path.basename(a.config))[0]
    bf16_path = a.out[:-5] + "_bf16.gguf" if a.out.endswith(".gguf") else a.out + "_bf16.gguf"
    t0 = time.time()
    write_bf16_gguf(cfg, bf16_path, name, a.seed)
    print(f"wrote {bf16_path} ({os.path.getsize(bf16_path) / 1e9:.2f} GB) in {time.time() - t0:.0f} s",
          file=sys.stderr)
    if a.check:
        ref = bf16_path + ".check.gguf"
        # The checkpoint's tensors with this config.json's metadata (synthetic_weights writes a
        # config.json of its own, its context capped).
        ckpt_cfg = os.path.join(a.check, "config.json")
        with open(ckpt_cfg, "w") as f:
            json.dump(cfg, f, indent=2)
        subprocess.run([sys.executable, os.path.join(HERE, "convert_synthetic.py"), "--checkpoint", a.check,
                        "--out", ref, "--name", name], check=True)
        same = subprocess.run(["cmp", bf16_path, ref]).returncode == 0
        os.remove(ref)
        print(f"check against {a.check}: {'IDENTICAL' if same else 'DIFFERENT'}", file=sys.stderr)
        if not same:
            sys.exit(1)
    if a.bf16_only:
        return
    t0 = time.time()
    subprocess.run([sys.executable, os.path.join(HERE, "llama_decode.py"), "quantize", "--gguf", bf16_path,
                    "--out", a.out, "--type", a.type, "--threads", str(a.threads)], check=True)
    print(f"quantized to {a.out} ({os.path.getsize(a.out) / 1e9:.2f} GB) in {time.time() - t0:.0f} s",
          file=sys.stderr)
    if not a.keep_bf16:
        os.remove(bf16_path)


if __name__ == "__main__":
    main()
