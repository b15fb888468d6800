#!/bin/bash
# reference_goldens_cli_test.sh TOOL CONFIG.json HF_GOLDENS.json TOKENIZER
set -u
tool="$1" config="$2" hf="$3" tok="$4"
source tools/testing/cli_expect.sh
out="$TEST_TMPDIR/goldens.json"
prompts="$TEST_TMPDIR/prompts.txt"
expect_exit "neither --model nor --config" 2 "exactly one of --model and --config" --prompts="$prompts" --out="$out"
expect_exit "no --prompts" 2 "--prompts" --model="$config" --out="$out"
expect_exit "config.json without a tokenizer" 1 "--tokenizer is required" --model="$config" --prompts="$hf" --out="$out"
# HF's first prompt, one new token.
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompts"][0]["text"])' "$hf" >"$prompts"
"$tool" --model="$config" --tokenizer="$tok" --prompts="$prompts" --new_tokens=1 --out="$out" ||
  fail "reference_goldens exited $?"
python3 - "$out" "$hf" <<'PY' || fail "the reference decoder's goldens disagree with HF's"
import json, sys
ref, hf = (json.load(open(p)) for p in sys.argv[1:])
assert ref["reference"].startswith("decodekit reference decoder"), ref["reference"]
assert "not HF" in ref["reference"], ref["reference"]
assert ref["weights_digest"] == hf["weights_digest"], (ref["weights_digest"], hf["weights_digest"])
r, h = ref["prompts"][0], hf["prompts"][0]
assert r["prompt_ids"] == h["prompt_ids"], "prompt ids differ"
assert r["steps"][0]["top5"] == h["steps"][0]["top5"], (r["steps"][0], h["steps"][0])
print("reference decoder = HF on", len(r["prompt_ids"]), "prompt ids: top-5", r["steps"][0]["top5"])
PY
finish
