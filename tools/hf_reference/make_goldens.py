#!/usr/bin/env python3
"""Records the HuggingFace transformers bf16 reference for the verify gate.

For every prompt, greedy-decodes --new-tokens tokens with the model in bfloat16
(use_cache=True, one forward per step over the KV cache) and records per step the
chosen id (argmax, ties to the smaller id), the top-5 ids (sorted by (-logit, id)) and
their logits. The C++ gate (//verify) reads the JSON this writes; see README.md for the
schema and the exact regeneration commands.

  # SmolLM2-135M (GGUF weights; tokenizer checked against tokenizer/testdata goldens)
  .venv-ref/bin/python tools/hf_reference/make_goldens.py \
      --gguf $OUTPUT_BASE/external/smollm2_135m/model.gguf --model-name smollm2_135m \
      --tokenizer tokenizer/testdata/smollm2_tokenizer.json \
      --prompts models/smollm2_135m/prompts.txt \
      --out models/smollm2_135m/goldens/hf_bf16.json

  # Llama-3.2-1B-shaped checkpoint directory with the llama3-style test tokenizer
  .venv-ref/bin/python tools/hf_reference/make_goldens.py \
      --model-dir CKPT_DIR --tokenizer tokenizer/testdata/llama3_style_tokenizer.json \
      --model-name llama32_1b --prompts models/llama32_1b/prompts.txt --out OUT.json
"""

import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

TOP_K = 5
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMOLLM2_VOCAB = 49152
SMOLLM2_TOKENIZER_GOLDENS = os.path.join(REPO_ROOT, "tokenizer/testdata/smollm2_goldens.json")


def load_model(args):
    """Returns the model in bf16, eval mode. GGUF tensors are dequantized by transformers
    (Q4_1 -> f32, Q/K rows un-permuted) and then cast to bf16 (round to nearest even)."""
    if args.gguf:
        path = os.path.abspath(args.gguf)
        model = AutoModelForCausalLM.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.bfloat16)
    else:
        model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.bfloat16)
    model.eval()
    # The reference is plain bf16 nn.Linear layers over dequantized weights; a GGUF
    # loader that kept the blocks packed (GgufLinear, f32 kernels) would not be.
    for name, module in model.named_modules():
        if "gguf" in type(module).__name__.lower():
            sys.exit(f"error: module {name} is {type(module).__name__}: GGUF weights were "
                     "kept packed; the reference needs them dequantized to bf16")
    for name, p in model.state_dict().items():
        if p.dtype != torch.bfloat16:
            sys.exit(f"error: tensor {name} is {p.dtype}, expected torch.bfloat16")
    return model


def load_tokenizer(args):
    if args.tokenizer:
        return PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    if args.gguf:
        path = os.path.abspath(args.gguf)
        return AutoTokenizer.from_pretrained(os.path.dirname(path),
                                             gguf_file=os.path.basename(path))
    return AutoTokenizer.from_pretrained(args.model_dir)


def check_tokenizer(tok, goldens_path):
    """The prompt ids must be the ids //tokenizer produces (proven exact against HF
    `tokenizers` by tokenizer/testdata/*_goldens.json). Returns a list of mismatches."""
    with open(goldens_path, encoding="utf-8") as f:
        g = json.load(f)
    bad = []
    for case in g["cases"]:
        ids = tok(case["text"], add_special_tokens=True)["input_ids"]
        if ids != case["ids"]:
            bad.append((case["text"], case["ids"], ids))
    return bad


def weights_digest(model):
    """"sha256:<hex>" per weights/weights.h Weights::Digest(): every tensor of the state
    dict in sorted name order (lm_head.weight excluded when tied): name bytes, NUL, rank
    u32 LE, each dim i64 LE, bf16 data (LE, row-major)."""
    sd = model.state_dict()
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    h = hashlib.sha256()
    for name in sorted(sd):
        if tied and name == "lm_head.weight":
            continue
        t = sd[name].detach().to(torch.bfloat16).contiguous().cpu()
        h.update(name.encode("utf-8"))
        h.update(b"\0")
        h.update(struct.pack("<I", t.dim()))
        for d in t.shape:
            h.update(struct.pack("<q", d))
        h.update(t.view(torch.int16).numpy().astype("<i2", copy=False).tobytes())
    return "sha256:" + h.hexdigest()


def top_k(logits):
    """logits: 1-D float32 numpy array. Ids sorted by (-logit, id), first TOP_K."""
    order = np.lexsort((np.arange(logits.shape[0]), -logits))[:TOP_K]
    return [int(i) for i in order], [float(logits[i]) for i in order]


@torch.inference_mode()
def greedy(model, prompt_ids, new_tokens):
    """Greedy decode with the KV cache; returns one record per generated token."""
    steps = []
    input_ids = torch.tensor([prompt_ids], dtype=torch.long)
    past = None
    for _ in range(new_tokens):
        out = model(input_ids=input_ids, past_key_values=past, use_cache=True)
        past = out.past_key_values
        # bf16 logits -> f32 exactly; no rounding happens here.
        logits = out.logits[0, -1].float().numpy()
        ids, vals = top_k(logits)
        chosen = ids[0]  # argmax with ties to the smaller id
        steps.append({"id": chosen, "top5": ids, "top5_logits": vals})
        input_ids = torch.tensor([[chosen]], dtype=torch.long)
    return steps


def safe_decode(tok, ids):
    """Decodes ids; ids the tokenizer does not know (a synthetic model's vocab can be
    larger than the test tokenizer's) become "<id:N>"."""
    n = len(tok)
    out, run = [], []
    for i in ids:
        if i < n:
            run.append(i)
        else:
            if run:
                out.append(tok.decode(run, skip_special_tokens=False))
                run = []
            out.append(f"<id:{i}>")
    if run:
        out.append(tok.decode(run, skip_special_tokens=False))
    return "".join(out)


def format_goldens(result):
    """JSON with one line per step and per id list, so that a regenerated file diffs
    step by step in review."""
    inline = {}

    def compact(value):
        key = f"@@inline{len(inline)}@@"
        inline[json.dumps(key)] = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        return key

    doc = dict(result)
    doc["prompts"] = [
        dict(p, prompt_ids=compact(p["prompt_ids"]), steps=[compact(s) for s in p["steps"]])
        for p in result["prompts"]
    ]
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    for key, value in inline.items():
        text = text.replace(key, value, 1)
    return text + "\n"


def read_prompts(path):
    with open(path, encoding="utf-8") as f:
        prompts = [line.rstrip("\n") for line in f]
    prompts = [p for p in prompts if p.strip()]
    if not prompts:
        sys.exit(f"error: no prompts in {path}")
    return prompts


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model-dir", help="HF checkpoint directory (config.json + safetensors)")
    src.add_argument("--gguf", help="GGUF file (tokenizer read from it unless --tokenizer)")
    p.add_argument("--tokenizer", help="tokenizer.json to use instead of the model's own")
    p.add_argument("--model-name", help="value of the JSON 'model' field")
    p.add_argument("--prompts", help="file with one prompt per line")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--out", help="output JSON file")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip-tokenizer-check", action="store_true",
                   help="do not compare the GGUF tokenizer with tokenizer/testdata goldens")
    return p.parse_args(argv)


def setup(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tok = load_tokenizer(args)
    # The check's goldens are SmolLM2's tokenizer's: it applies to a GGUF of that
    # vocabulary (49152 ids) only; another model's GGUF tokenizer (Gemma 3's) is
    # transformers' own, which //tokenizer's goldens for that family check.
    if args.gguf and not args.skip_tokenizer_check and len(tok) == SMOLLM2_VOCAB:
        # transformers' GGUF tokenizer has no "smollm" pre-tokenizer and differs from
        # SmolLM2's tokenizer.json on a few whitespace / non-ASCII-digit cases; refuse it
        # then (use --tokenizer tokenizer/testdata/smollm2_tokenizer.json).
        bad = check_tokenizer(tok, SMOLLM2_TOKENIZER_GOLDENS)
        if bad:
            for text, want, got in bad[:5]:
                print(f"tokenizer mismatch: {text!r}\n  goldens: {want}\n  HF: {got}",
                      file=sys.stderr)
            sys.exit(f"error: the tokenizer disagrees with {SMOLLM2_TOKENIZER_GOLDENS} "
                     f"on {len(bad)} cases; pass --tokenizer "
                     "tokenizer/testdata/smollm2_tokenizer.json")
    model = load_model(args)
    return tok, model


def main():
    args = parse_args()
    if not args.prompts or not args.out:
        sys.exit("error: --prompts and --out are required")
    prompts = read_prompts(args.prompts)
    tok, model = setup(args)
    result = {
        "model": args.model_name or os.path.basename(args.gguf or args.model_dir),
        "weights_digest": weights_digest(model),
        # Which reference made these goldens (verify and the profile print it).
        "reference": f"transformers {transformers.__version__} bf16",
        # The model file they were recorded from (its name; the digest identifies it).
        "model_file": os.path.basename(os.path.abspath(args.gguf or args.model_dir)),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "dtype": "bfloat16",
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "generator": "tools/hf_reference/make_goldens.py",
        "new_tokens": args.new_tokens,
        "prompts": [],
    }
    for text in prompts:
        prompt_ids = tok(text, add_special_tokens=True)["input_ids"]
        steps = greedy(model, prompt_ids, args.new_tokens)
        out_ids = [s["id"] for s in steps]
        result["prompts"].append({
            "text": text,
            "prompt_ids": prompt_ids,
            "steps": steps,
            "text_out": safe_decode(tok, out_ids),
        })
        print(f"{text!r} -> {result['prompts'][-1]['text_out']!r}", file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(format_goldens(result))
    print(f"wrote {args.out} ({len(prompts)} prompts, digest {result['weights_digest']})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
