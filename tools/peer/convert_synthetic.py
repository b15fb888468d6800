#!/usr/bin/env python3
"""Converts an HF Llama, Qwen2 or Qwen3 checkpoint directory (config.json +
model.safetensors in bf16, as //tools/synthetic_weights writes for llama32_1b,
qwen25_0_5b and qwen3_0_6b) into a BF16 GGUF that llama.cpp runs as the same model:

  tools/peer/.venv/bin/python tools/peer/convert_synthetic.py \
      --checkpoint /tmp/llama32_1b_synth --out /tmp/llama32_1b_bf16.gguf \
      [--tokenizer tokenizer/testdata/llama3_style_tokenizer.json]

- the architecture from config.json's model_type (else its architectures[0]): "llama",
  "qwen2" or "qwen3", laid out as llama.cpp's own converter writes each;
- metadata under the architecture's prefix from config.json (GQA head counts, eps, rope
  theta; key/value length where head_dim is not hidden / heads, as Qwen3's 128);
- the bf16 tensors copied bit for bit (norm weights and Qwen2's q/k/v biases as F32,
  exact), under GGUF names; for llama only, the Q and K rows permuted for llama.cpp's
  interleaved RoPE (the inverse of what decodekit's GGUF loader undoes; weights_digest
  proves the round trip); qwen2 / qwen3 run NEOX RoPE on HF's half-split rows, unpermuted;
- Qwen2's attn_q.bias / attn_k.bias / attn_v.bias, Qwen3's per-head attn_q_norm /
  attn_k_norm;
- Llama-3 RoPE scaling as a `rope_freqs.weight` F32 tensor of per-frequency divisors
  (llama.cpp has no metadata key for it);
- tied embeddings: no output.weight, llama.cpp then uses token_embd for the head;
- a "gpt2" (byte-level BPE) tokenizer with merges from the given tokenizer.json (default:
  the architecture's test tokenizer), padded with unused [PADn] tokens up to the model's
  vocab size, with the architecture's pre-tokenizer ("llama-bpe", "qwen2").

The safetensors file is read with numpy only (bf16 kept as raw uint16): no torch here.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import gguf


def read_safetensors(path):
    """Yields (name, shape, dtype, np.memmap of raw elements) for each tensor of one file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    base = 8 + n
    np_types = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in np_types:
            raise SystemExit(f"{path}: tensor {name} has dtype {dtype}; want BF16, F16 or F32")
        begin, end = info["data_offsets"]
        count = (end - begin) // np.dtype(np_types[dtype]).itemsize
        data = np.memmap(path, dtype=np_types[dtype], mode="r", offset=base + begin, shape=(count,))
        yield name, list(info["shape"]), dtype, data.reshape(info["shape"])


def read_checkpoint(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for f in files:
        for name, shape, dtype, data in read_safetensors(os.path.join(directory, f)):
            tensors[name] = (dtype, data)
    return tensors


def to_bf16_bits(dtype, data):
    """Raw bf16 bits (uint16) of a tensor; F32/F16 rounded to nearest even as PyTorch does."""
    if dtype == "BF16":
        return np.asarray(data)
    f = np.asarray(data, dtype=np.float32).view(np.uint32)
    rounded = (f + 0x7FFF + ((f >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def permute_for_interleaved_rope(w, n_heads):
    """HF half-split rows -> GGUF's interleaved order, per head: row j of the first half
    and row j of the second half become rows 2j and 2j+1."""
    out_dim = w.shape[0]
    return (w.reshape(n_heads, 2, out_dim // n_heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_divisors(cfg, head_dim):
    """Per rotary frequency: the factor llama.cpp divides the frequency by (rope_freqs),
    from rope_scaling {factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings}: 1 for short wavelengths, `factor` for long ones,
    a smooth blend in between (HF's llama3 rope initialisation)."""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if rs.get("rope_type", rs.get("type")) != "llama3":
        return None
    theta = cfg.get("rope_theta", rs.get("rope_theta"))
    factor = rs["factor"]
    low = rs["low_freq_factor"]
    high = rs["high_freq_factor"]
    old_ctx = rs["original_max_position_embeddings"]
    low_wavelen = old_ctx / low
    high_wavelen = old_ctx / high
    divisors = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / (theta ** (i / head_dim))
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            divisors.append(1.0)
        elif wavelen > low_wavelen:
            divisors.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            divisors.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(divisors, dtype=np.float32)


TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tokenizer", "testdata")


class Arch:
    """What llama.cpp's converter writes differently per architecture."""

    def __init__(self, name, tokenizer, pre, bos, add_bos, eos, permute_qk=False, biases=False,
                 qk_norm=False):
        self.name = name
        self.tokenizer = os.path.join(TESTDATA, tokenizer)  # the models' test tokenizer
        self.pre = pre  # tokenizer.ggml.pre: llama.cpp's pre-tokenizer regex
        self.bos, self.add_bos, self.eos = bos, add_bos, eos  # token texts (None: none)
        self.permute_qk = permute_qk  # interleaved RoPE: Q/K rows permuted (llama only)
        self.biases = biases  # q/k/v projection biases (qwen2)
        self.qk_norm = qk_norm  # per-head RMSNorm of q and k (qwen3)


ARCHS = {
    "llama": Arch("llama", "llama3_style_tokenizer.json", "llama-bpe", "<|begin_of_text|>", True,
                  ("<|eot_id|>", "<|end_of_text|>"), permute_qk=True),
    # Qwen adds no BOS; llama.cpp's NEOX RoPE rotates HF's half-split rows as they are.
    "qwen2": Arch("qwen2", "qwen2_style_tokenizer.json", "qwen2", "<|endoftext|>", False,
                  ("<|endoftext|>",), biases=True),
    "qwen3": Arch("qwen3", "qwen2_style_tokenizer.json", "qwen2", "<|endoftext|>", False,
                  ("<|im_end|>", "<|endoftext|>"), qk_norm=True),
}
HF_ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}


def arch_of(cfg, where):
    name = cfg.get("model_type") or HF_ARCHITECTURES.get((cfg.get("architectures") or [""])[0])
    if name not in ARCHS:
        raise SystemExit(f"{where}: model_type {cfg.get('model_type')!r} / architectures "
                         f"{cfg.get('architectures')} is not one of {', '.join(ARCHS)}")
    return ARCHS[name]


def add_tokenizer(writer, arch, tokenizer_json, vocab_size):
    tok = json.load(open(tokenizer_json, encoding="utf-8"))
    model = tok["model"]
    if model.get("type") != "BPE":
        raise SystemExit(f"{tokenizer_json}: want a BPE tokenizer, got {model.get('type')}")
    id_to_token = {i: t for t, i in model["vocab"].items()}
    special = {a["id"] for a in tok.get("added_tokens", []) if a.get("special")}
    for a in tok.get("added_tokens", []):
        id_to_token[a["id"]] = a["content"]
    n = max(id_to_token) + 1
    if n > vocab_size:
        raise SystemExit(f"{tokenizer_json} has {n} tokens, more than the model's {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        if i in id_to_token:
            tokens.append(id_to_token[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    if not merges:
        raise SystemExit(f"{tokenizer_json}: no merges (llama.cpp's gpt2 loader refuses that)")
    by_text = {t: i for i, t in enumerate(tokens)}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(arch.pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    if arch.bos in by_text:
        writer.add_bos_token_id(by_text[arch.bos])
    writer.add_add_bos_token(arch.add_bos)
    for eos in arch.eos:
        if eos in by_text:
            writer.add_eos_token_id(by_text[eos])
            break


class Shape:
    """The sizes of config.json the converter needs."""

    def __init__(self, cfg):
        self.hidden = cfg["hidden_size"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv = cfg.get("num_key_value_heads", self.n_heads)
        self.head_dim = cfg.get("head_dim") or self.hidden // self.n_heads
        self.n_layers = cfg["num_hidden_layers"]
        self.vocab = cfg["vocab_size"]
        self.tied = cfg.get("tie_word_embeddings", False)


def add_metadata(w, arch, cfg, shape, name):
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_context_length(cfg.get("max_position_embeddings", 2048))
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(shape.n_heads)
    w.add_head_count_kv(shape.n_kv)
    if arch.name == "llama" or shape.head_dim != shape.hidden // shape.n_heads:
        w.add_key_length(shape.head_dim)
        w.add_value_length(shape.head_dim)
    if arch.name == "llama":
        w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-5 if arch.name == "llama" else 1e-6))
    w.add_vocab_size(shape.vocab)


class TensorWriter:
    """Adds the checkpoint's tensors to the GGUF under llama.cpp's names."""

    def __init__(self, w, tensors, where):
        self.w, self.tensors, self.where = w, tensors, where

    def bf16(self, hf_name):
        if hf_name not in self.tensors:
            raise SystemExit(f"{self.where}: no tensor {hf_name}")
        return to_bf16_bits(*self.tensors[hf_name])

    def add_bf16(self, gguf_name, bits):
        self.w.add_tensor(gguf_name, np.ascontiguousarray(bits), raw_dtype=gguf.GGMLQuantizationType.BF16)

    def add_f32(self, gguf_name, hf_name):
        """1-D (norms, biases): F32, exact from bf16, as llama.cpp's converter writes them."""
        self.w.add_tensor(gguf_name, bf16_to_f32(self.bf16(hf_name)))


def add_layer(t, arch, shape, i):
    hf = f"model.layers.{i}."
    g = f"blk.{i}."
    t.add_f32(g + "attn_norm.weight", hf + "input_layernorm.weight")
    q, k = t.bf16(hf + "self_attn.q_proj.weight"), t.bf16(hf + "self_attn.k_proj.weight")
    if arch.permute_qk:
        q, k = permute_for_interleaved_rope(q, shape.n_heads), permute_for_interleaved_rope(k, shape.n_kv)
    t.add_bf16(g + "attn_q.weight", q)
    t.add_bf16(g + "attn_k.weight", k)
    t.add_bf16(g + "attn_v.weight", t.bf16(hf + "self_attn.v_proj.weight"))
    if arch.biases:
        for x in "qkv":
            t.add_f32(g + f"attn_{x}.bias", hf + f"self_attn.{x}_proj.bias")
    if arch.qk_norm:
        t.add_f32(g + "attn_q_norm.weight", hf + "self_attn.q_norm.weight")
        t.add_f32(g + "attn_k_norm.weight", hf + "self_attn.k_norm.weight")
    t.add_bf16(g + "attn_output.weight", t.bf16(hf + "self_attn.o_proj.weight"))
    t.add_f32(g + "ffn_norm.weight", hf + "post_attention_layernorm.weight")
    t.add_bf16(g + "ffn_gate.weight", t.bf16(hf + "mlp.gate_proj.weight"))
    t.add_bf16(g + "ffn_up.weight", t.bf16(hf + "mlp.up_proj.weight"))
    t.add_bf16(g + "ffn_down.weight", t.bf16(hf + "mlp.down_proj.weight"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="HF checkpoint directory")
    p.add_argument("--out", required=True, help="output .gguf")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer.json (default: tokenizer/testdata/llama3_style_tokenizer.json for "
                        "llama, qwen2_style_tokenizer.json for qwen2 and qwen3)")
    p.add_argument("--name", default=None, help="general.name (default: the directory's name)")
    a = p.parse_args()

    cfg = json.load(open(os.path.join(a.checkpoint, "config.json")))
    arch = arch_of(cfg, a.checkpoint)
    shape = Shape(cfg)
    w = gguf.GGUFWriter(a.out, arch.name)
    add_metadata(w, arch, cfg, shape, a.name or os.path.basename(os.path.normpath(a.checkpoint)))
    add_tokenizer(w, arch, a.tokenizer or arch.tokenizer, shape.vocab)

    t = TensorWriter(w, read_checkpoint(a.checkpoint), a.checkpoint)
    divisors = llama3_rope_divisors(cfg, shape.head_dim)
    if divisors is not None:
        w.add_tensor("rope_freqs.weight", divisors)
    t.add_bf16("token_embd.weight", t.bf16("model.embed_tokens.weight"))
    t.add_f32("output_norm.weight", "model.norm.weight")
    if not shape.tied:
        t.add_bf16("output.weight", t.bf16("lm_head.weight"))
    for i in range(shape.n_layers):
        add_layer(t, arch, shape, i)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"wrote {a.out}: {arch.name}, {shape.n_layers} layers, vocab {shape.vocab}, tied={shape.tied}, "
          f"rope_freqs={'yes' if divisors is not None else 'no'}", file=sys.stderr)


if __name__ == "__main__":
    main()
