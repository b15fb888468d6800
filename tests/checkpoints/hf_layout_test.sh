#!/usr/bin/env bash
# `generate --weights DIR --tokenizer DIR` on a checkpoint directory in the exact HF
# layout of the model's family: config.json as its HF model writes it, the weights
# sharded (model-0000i-of-00003.safetensors + model.safetensors.index.json) and the
# tokenizer as DIR/tokenizer.json. The checkpoint holds the synthetic weights (seed 1),
# so its continuation must be exactly the one of `--weights synthetic`: every tensor
# read from the right shard under the right name.
#   hf_layout_test.sh SYNTHETIC_WEIGHTS GENERATE ELF CONFIG TOKENIZER.json
set -euo pipefail
synthetic_weights="$1" generate="$2" elf="$3" config="$4" tokenizer="$5"
dir="$TEST_TMPDIR/checkpoint"
"$synthetic_weights" --config "$config" --out "$dir" --shards 3 >/dev/null
cp "$tokenizer" "$dir/tokenizer.json"
for f in config.json model.safetensors.index.json tokenizer.json \
         model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors; do
  [[ -s "$dir/$f" ]] || { echo "FAIL: the checkpoint has no $f"; exit 1; }
done
[[ ! -e "$dir/model.safetensors" ]] || { echo "FAIL: a sharded checkpoint also has model.safetensors"; exit 1; }
run() { "$generate" --elf "$elf" --max_new_tokens 8 --prompt "The capital of France is" --stop_at_eos=false "$@"; }
from_dir="$(run --weights "$dir" --tokenizer "$dir")"
synthetic="$(run --weights synthetic --tokenizer "$tokenizer")"
echo "checkpoint: $from_dir"
echo "synthetic:  $synthetic"
[[ -n "$from_dir" && "$from_dir" == "$synthetic" ]] || { echo "FAIL: the checkpoint's continuation differs"; exit 1; }
# A shard missing from the directory is an error naming it, never a silent fallback.
rm "$dir/model-00002-of-00003.safetensors"
if out="$(run --weights "$dir" --tokenizer "$dir" 2>&1)"; then
  echo "FAIL: generate ran without shard 2: $out"; exit 1
fi
grep -q "model-00002-of-00003.safetensors" <<<"$out" || { echo "FAIL: the error does not name the shard: $out"; exit 1; }
echo "PASS"
