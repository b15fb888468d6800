#!/usr/bin/env python3
"""Converts an HF Llama checkpoint directory (config.json + model.safetensors in bf16, as
//tools/synthetic_weights writes for llama32_1b) into a BF16 GGUF that llama.cpp runs as
the same model:

  tools/peer/.venv/bin/python tools/peer/convert_synthetic.py \
      --checkpoint /tmp/llama32_1b_synth --out /tmp/llama32_1b_bf16.gguf \
      [--tokenizer tokenizer/testdata/llama3_style_tokenizer.json]

- llama architecture metadata from config.json (GQA head counts, eps, rope theta);
- the bf16 tensors copied bit for bit (norm weights as F32, exact), under GGUF names,
  with the Q and K rows permuted for llama.cpp's interleaved RoPE (the inverse of what
  decodekit's GGUF loader undoes; weights_digest proves the round trip);
- Llama-3 RoPE scaling as a `rope_freqs.weight` F32 tensor of per-frequency divisors
  (llama.cpp has no metadata key for it);
- tied embeddings: no output.weight, llama.cpp then uses token_embd for the head;
- a "gpt2" (byte-level BPE) tokenizer with merges from the given tokenizer.json, padded
  with unused [PADn] tokens up to the model's vocab size.

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


def add_tokenizer(writer, tokenizer_json, vocab_size):
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
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    if "<|begin_of_text|>" in by_text:
        writer.add_bos_token_id(by_text["<|begin_of_text|>"])
        writer.add_add_bos_token(True)
    for eos in ("<|eot_id|>", "<|end_of_text|>"):
        if eos in by_text:
            writer.add_eos_token_id(by_text[eos])
            break


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="HF checkpoint directory")
    p.add_argument("--out", required=True, help="output .gguf")
    p.add_argument("--tokenizer", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "tokenizer", "testdata", "llama3_style_tokenizer.json"))
    p.add_argument("--name", default=None, help="general.name (default: the directory's name)")
    a = p.parse_args()

    cfg = json.load(open(os.path.join(a.checkpoint, "config.json")))
    hidden = cfg["hidden_size"]
    n_heads = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_heads)
    head_dim = cfg.get("head_dim") or hidden // n_heads
    n_layers = cfg["num_hidden_layers"]
    vocab = cfg["vocab_size"]
    tied = cfg.get("tie_word_embeddings", False)
    tensors = read_checkpoint(a.checkpoint)

    w = gguf.GGUFWriter(a.out, "llama")
    name = a.name or os.path.basename(os.path.normpath(a.checkpoint))
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_context_length(cfg.get("max_position_embeddings", 2048))
    w.add_embedding_length(hidden)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-5))
    w.add_vocab_size(vocab)
    add_tokenizer(w, a.tokenizer, vocab)

    def bf16(hf_name):
        if hf_name not in tensors:
            raise SystemExit(f"{a.checkpoint}: no tensor {hf_name}")
        return to_bf16_bits(*tensors[hf_name])

    def add_bf16(gguf_name, bits):
        w.add_tensor(gguf_name, np.ascontiguousarray(bits), raw_dtype=gguf.GGMLQuantizationType.BF16)

    def add_norm(gguf_name, hf_name):  # 1-D: F32 (exact from bf16), as llama.cpp's converter does
        w.add_tensor(gguf_name, bf16_to_f32(bf16(hf_name)))

    divisors = llama3_rope_divisors(cfg, head_dim)
    if divisors is not None:
        w.add_tensor("rope_freqs.weight", divisors)
    add_bf16("token_embd.weight", bf16("model.embed_tokens.weight"))
    add_norm("output_norm.weight", "model.norm.weight")
    if not tied:
        add_bf16("output.weight", bf16("lm_head.weight"))
    for i in range(n_layers):
        hf = f"model.layers.{i}."
        g = f"blk.{i}."
        add_norm(g + "attn_norm.weight", hf + "input_layernorm.weight")
        add_bf16(g + "attn_q.weight", permute_for_interleaved_rope(bf16(hf + "self_attn.q_proj.weight"), n_heads))
        add_bf16(g + "attn_k.weight", permute_for_interleaved_rope(bf16(hf + "self_attn.k_proj.weight"), n_kv))
        add_bf16(g + "attn_v.weight", bf16(hf + "self_attn.v_proj.weight"))
        add_bf16(g + "attn_output.weight", bf16(hf + "self_attn.o_proj.weight"))
        add_norm(g + "ffn_norm.weight", hf + "post_attention_layernorm.weight")
        add_bf16(g + "ffn_gate.weight", bf16(hf + "mlp.gate_proj.weight"))
        add_bf16(g + "ffn_up.weight", bf16(hf + "mlp.up_proj.weight"))
        add_bf16(g + "ffn_down.weight", bf16(hf + "mlp.down_proj.weight"))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"wrote {a.out}: llama, {n_layers} layers, vocab {vocab}, tied={tied}, "
          f"rope_freqs={'yes' if divisors is not None else 'no'}", file=sys.stderr)


if __name__ == "__main__":
    main()
