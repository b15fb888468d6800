#!/usr/bin/env python3
"""Writes tokenizer/testdata/chat_goldens.json: what HF apply_chat_template renders (text and
token ids) for every template in tokenizer/testdata/chat_templates/ on a fixed set of
conversations. //tokenizer:chat_test compares dk::tokenizer::ChatTemplate against it.

Reference: transformers' apply_chat_template (transformers==5.24.0 with jinja2, pinned in
tools/hf_reference/requirements.txt). For each (template, conversation, add_generation_prompt):
  text = apply_chat_template(messages, chat_template=..., tokenize=False, ...)
  ids  = apply_chat_template(messages, chat_template=..., tokenize=True, ...)
or, where the template raises, the error message (recorded as "error").

Tokenizers (one per template family; the C++ test loads the same files):
  smollm2, chatml            tokenizer/testdata/smollm2_tokenizer.json: SmolLM2's GGUF vocabulary
                             as a tokenizer.json (tools/tokenizer_goldens; //tokenizer:golden_test
                             checks it equals the GGUF's). transformers' GGUF loader is not used
                             for SmolLM2: it does not split digits as SmolLM2 does.
  qwen2.5_instruct, qwen3    tokenizer/testdata/qwen2_style_tokenizer.json (Qwen2 layout,
                             <|im_start|>/<|im_end|>/<think> added tokens)
  llama3*, llama3.x_instruct tokenizer/testdata/llama3_style_tokenizer.json (bos_token
                             <|begin_of_text|>, the template's {{ bos_token }})
  gemma3_it                  the Gemma 3 270M GGUF through AutoTokenizer.from_pretrained(dir,
                             gguf_file=...) (bos_token <bos>)

Llama 3.2's template takes today's date (strftime_now) unless date_string is given; its goldens
pass date_string="26 Jul 2024" (recorded per case) so the file does not depend on the day.

Run from the repository root:
    /work/main/.venv-ref/bin/python tools/chat_goldens/make_chat_goldens.py \
        --gemma3_gguf "$(./bazelw info output_base)/external/gemma3_270m/model.gguf"
"""
import argparse
import json
import os

import transformers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

TEMPLATE_DIR = "tokenizer/testdata/chat_templates"
OUT = "tokenizer/testdata/chat_goldens.json"

# template file -> tokenizer key
TEMPLATES = {
    "smollm2.jinja": "smollm2",
    "chatml.jinja": "smollm2",
    "qwen2.5_instruct.jinja": "qwen2",
    "qwen3.jinja": "qwen2",
    "llama3.jinja": "llama3",
    "llama3.1_instruct.jinja": "llama3",
    "llama3.2_instruct.jinja": "llama3",
    "gemma3_it.jinja": "gemma3",
}

TOKENIZER_FILES = {
    "smollm2": "tokenizer/testdata/smollm2_tokenizer.json",
    "qwen2": "tokenizer/testdata/qwen2_style_tokenizer.json",
    "llama3": "tokenizer/testdata/llama3_style_tokenizer.json",
}


def m(role, content):
    return {"role": role, "content": content}


SYSTEM = m("system", "You are a terse assistant.")
# (name, messages, add_generation_prompt values)
CONVERSATIONS = [
    ("system_user", [SYSTEM, m("user", "What is 2+2?")], (True, False)),
    ("user_only", [m("user", "Hello!")], (True, False)),
    ("multi_turn", [m("user", "Hi"), m("assistant", "Hello! How can I help?"),
                    m("user", "Tell me a joke.")], (True, False)),
    ("system_multi_turn", [SYSTEM, m("user", "Hi"), m("assistant", "Hello."),
                           m("user", "Bye"), m("assistant", "Goodbye.")], (True, False)),
    ("non_ascii_whitespace", [m("system", "  Réponds en français.  \n"),
                              m("user", "\n  Ça va? 你好 🙂  \n"),
                              m("assistant", " Très bien.\u00a0"), m("user", "Merci\t\u3000")],
     (True,)),
    ("empty_content", [m("user", "")], (True,)),
    ("empty_system", [m("system", ""), m("user", "Hi")], (True,)),
    ("system_only", [m("system", "Be brief.")], (True, False)),
    ("think_history", [m("user", "Q1"), m("assistant", "<think>\nfirst\n</think>\n\nA1"),
                       m("user", "Q2"), m("assistant", "\n<think>second</think>A2\n")],
     (False, True)),
    ("think_last_only", [m("user", "Q1"), m("assistant", "plain A1"), m("user", "Q2"),
                         m("assistant", "<think>\n\nr\n\n</think>\n\n\nA2")], (False,)),
    ("tool_response_like_user", [m("user", "Q1"), m("assistant", "<think>t</think>A1"),
                                 m("user", "<tool_response>x</tool_response>"),
                                 m("assistant", "<think>u</think>A2")], (False,)),
    # Error cases for the templates that raise (others render them).
    ("empty_conversation", [], (True,)),
    ("user_user", [m("user", "a"), m("user", "b")], (True,)),
    ("assistant_first", [m("assistant", "a"), m("user", "b")], (True,)),
    ("late_system", [m("user", "a"), m("assistant", "b"), m("system", "c"), m("user", "d")],
     (True,)),
    ("system_second", [m("user", "a"), m("system", "b")], (True,)),
]


def load_tokenizers(gemma3_gguf):
    toks = {}
    for key, path in TOKENIZER_FILES.items():
        kwargs = {"bos_token": "<|begin_of_text|>"} if key == "llama3" else {}
        toks[key] = PreTrainedTokenizerFast(tokenizer_file=path, **kwargs)
    directory, name = os.path.split(os.path.abspath(gemma3_gguf))
    toks["gemma3"] = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    assert toks["gemma3"].bos_token == "<bos>", toks["gemma3"].bos_token
    return toks


def render(tok, template, messages, gen, extra):
    kwargs = dict(chat_template=template, add_generation_prompt=gen, **extra)
    try:
        text = tok.apply_chat_template(messages, tokenize=False, **kwargs)
    except Exception as e:  # the template's raise_exception, or an undefined messages[0]
        return {"error": f"{type(e).__name__}: {e}"}
    ids = tok.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return {"text": text, "ids": [int(i) for i in ids]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gemma3_gguf", required=True, help="@gemma3_270m//:model.gguf")
    args = parser.parse_args()
    toks = load_tokenizers(args.gemma3_gguf)
    cases = []
    for tfile, tkey in TEMPLATES.items():
        with open(os.path.join(TEMPLATE_DIR, tfile), encoding="utf-8") as f:
            template = f.read()
        extra = {"date_string": "26 Jul 2024"} if tfile == "llama3.2_instruct.jinja" else {}
        for name, messages, gens in CONVERSATIONS:
            for gen in gens:
                case = {"template": tfile, "tokenizer": tkey, "conversation": name,
                        "messages": messages, "add_generation_prompt": gen, **extra}
                case.update(render(toks[tkey], template, messages, gen, extra))
                cases.append(case)
    out = {"reference": f"transformers=={transformers.__version__} apply_chat_template",
           "cases": cases}
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error" in c for c in cases)
    print(f"wrote {OUT}: {len(cases)} cases ({errors} errors)")


if __name__ == "__main__":
    main()
