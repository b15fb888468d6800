#!/usr/bin/env bash
# generate --model FILE: the model file alone, as a new user runs it. On the trained
# SmolLM2-135M GGUF it streams the answer through the best stage its weights allow
# (decode_gguf), builds the chain's ELFs once and takes them from the cache after; a
# corrupt cache entry is rebuilt, never used; bad requests exit 2 naming what, an
# unusable cache directory exits 1 naming it.
#   generate_model_test.sh GENERATE MODEL.gguf TOKENIZER.json TINY_CONFIG.json
set -uo pipefail
generate="$1" gguf="$2" tok="$3" tiny_config="$4"
source tools/testing/cli_expect.sh
tool="$generate"
cache="$TEST_TMPDIR/cache"
run=(--model "$gguf" --cache_dir "$cache" --prompt "The capital of France is" --max_new_tokens 6)

out="$("$generate" "${run[@]}" 2>"$TEST_TMPDIR/err1")" || fail "first run failed: $(cat "$TEST_TMPDIR/err1")"
grep -qF "Paris" <<<"$out" || fail "no 'Paris' in the answer: $out"
grep -qE "stage decode_gguf \(quantize_weights scheme=gguf over decode_q8\), ELF $cache/smollm2_135m-decode_gguf-[0-9a-f]{16}\.elf \(built\)" \
  "$TEST_TMPDIR/err1" || fail "first run does not say it built decode_gguf: $(cat "$TEST_TMPDIR/err1")"
elf="$(grep -oE "$cache/smollm2_135m-decode_gguf-[0-9a-f]{16}\.elf" "$TEST_TMPDIR/err1" | head -1)"
[[ -s "$elf" ]] || fail "no ELF at $elf"
n_elfs=$(ls "$cache"/*.elf | wc -l)
[[ $n_elfs == 9 ]] || fail "$n_elfs ELFs in the cache, expected the chain's 9"

out2="$("$generate" "${run[@]}" 2>"$TEST_TMPDIR/err2")" || fail "second run failed"
grep -qF "(cached)" "$TEST_TMPDIR/err2" || fail "second run did not use the cache: $(cat "$TEST_TMPDIR/err2")"
[[ "$out2" == "$out" ]] || fail "cached run answered differently: $out2"

# One byte of the cached ELF changed: rebuilt, and the answer is the same.
printf '\x00\x00\x00\x00' | dd of="$elf" bs=1 seek=200 conv=notrunc status=none
out3="$("$generate" "${run[@]}" 2>"$TEST_TMPDIR/err3")" || fail "run on a corrupt cache failed: $(cat "$TEST_TMPDIR/err3")"
grep -qF "rebuilt: the cached entry was corrupt" "$TEST_TMPDIR/err3" || fail "corrupt entry not rebuilt: $(cat "$TEST_TMPDIR/err3")"
[[ "$out3" == "$out" ]] || fail "run after the rebuild answered differently: $out3"

# Another stage by name: the bf16 one (the GGUF dequantized at load).
out4="$("$generate" "${run[@]}" --stage decode_x12 2>"$TEST_TMPDIR/err4")" || fail "--stage decode_x12 failed"
grep -qF "stage decode_x12 (compress_weights over decode_fused)" "$TEST_TMPDIR/err4" || fail "not decode_x12: $(cat "$TEST_TMPDIR/err4")"
grep -qF "Paris" <<<"$out4" || fail "decode_x12: no 'Paris': $out4"

expect_exit "--model and --elf" 2 "give --model or --elf, not both" "${run[@]}" --elf "$elf"
expect_exit "--stage without --model" 2 "--stage goes with --model" --elf "$elf" --tokenizer "$gguf" --stage decode_q8
expect_exit "unknown --stage" 1 'stage "decode_q5" is not in the chain: decode, decode_aligned' "${run[@]}" --stage decode_q5
touch "$TEST_TMPDIR/plain_file"
expect_exit "cache under a file" 1 "ELF cache: cannot create $TEST_TMPDIR/plain_file" \
  "${run[@]}" --cache_dir "$TEST_TMPDIR/plain_file/elf"
expect_exit "missing model" 1 "cannot open model $TEST_TMPDIR/nothing.gguf: No such file" \
  --model "$TEST_TMPDIR/nothing.gguf" --cache_dir "$cache"
mkdir -p "$TEST_TMPDIR/mamba"
printf '{"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 64}\n' >"$TEST_TMPDIR/mamba/config.json"
expect_exit "an architecture the graph does not have" 2 'model_type "mamba" is not supported' \
  --model "$TEST_TMPDIR/mamba" --cache_dir "$cache"

# A config.json alone: synthetic weights of its shape, a tokenizer named.
"$generate" --model "$tiny_config" --tokenizer "$tok" --cache_dir "$cache" \
  --prompt "a b" --max_new_tokens 4 --max_context 256 >/dev/null 2>"$TEST_TMPDIR/err5" ||
  fail "config.json alone failed: $(cat "$TEST_TMPDIR/err5")"
grep -qF "(tiny_llama, 2 layers, 256 positions): stage decode_x12" "$TEST_TMPDIR/err5" ||
  fail "config.json alone: $(cat "$TEST_TMPDIR/err5")"
finish
