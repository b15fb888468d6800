#!/usr/bin/env bash
# decode_bench's answers to bad command lines (issue 15): each names the flag, exits 2
# for a bad flag and 1 for a bad path or file, and a valid command line still runs.
#   decode_bench_cli_test.sh DECODE_BENCH TINY.elf BAD_HOST_OFFSET.elf
set -uo pipefail
bench="$1" elf="$2" bad="$3"
source tools/testing/cli_expect.sh
tool="$bench"

ok=(--elf "$elf" --weights synthetic --context 16 --tokens 3 --warmup 1 --bandwidth_every 2
    --benchmark_filter=threads:1)
expect_exit "no --elf" 2 "decode_bench: --elf is required" --weights synthetic
expect_exit "--elf a directory" 1 "--elf: $TEST_TMPDIR is a directory, not a file" \
  "${ok[@]}" --elf "$TEST_TMPDIR"
expect_exit "missing --elf" 1 "--elf: $TEST_TMPDIR/no.elf does not exist" "${ok[@]}" --elf "$TEST_TMPDIR/no.elf"
expect_exit "missing --weights" 1 "--weights: $TEST_TMPDIR/no_such_checkpoint does not exist" \
  "${ok[@]}" --weights "$TEST_TMPDIR/no_such_checkpoint"
expect_exit "--context 0" 2 "--context 0 is outside [1, 16777216]" "${ok[@]}" --context 0
expect_exit "--tokens 0" 2 "--tokens 0 is outside [1, 1048576]" "${ok[@]}" --tokens 0
expect_exit "--warmup -1" 2 "--warmup -1 is outside [0, 1048576]" "${ok[@]}" --warmup -1
# Was clamped to 1 without a word.
expect_exit "--bandwidth_every 0" 2 "--bandwidth_every 0 is outside [1, 1048576]" \
  "${ok[@]}" --bandwidth_every 0
expect_exit "--context past the KV cache" 2 "--context 17 exceeds the model's KV cache of 16 positions" \
  "${ok[@]}" --context 17
expect_exit "invalid ELF" 1 "at host_offset -4096 does not lie inside host value" "${ok[@]}" --elf "$bad"
expect_exit "valid" 0 "BM_Decode/threads:1" "${ok[@]}"
# --paired_floor adds a floor per token (a read of the token's weight bytes around it).
expect_exit "--paired_floor" 0 "x_floor_paired=" "${ok[@]}" --paired_floor
paired="$("$tool" "${ok[@]}" --paired_floor --benchmark_format=json 2>/dev/null)"
python3 - "$paired" <<'PY' || fail "--paired_floor: counters missing or not positive"
import json, sys
b = json.loads(sys.argv[1])["benchmarks"][0]
assert b["x_floor_paired"] > 0 and b["paired_bw_GB/s"] > 0, b
assert b["paired_fast_tokens"] <= 3, b
PY

# --model FILE: a config.json alone (synthetic weights), its chain built; the stage named.
mkdir -p "$TEST_TMPDIR/Tiny"
printf '%s\n' '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,' \
  '"intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,' \
  '"vocab_size": 300, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "max_position_embeddings": 512}' \
  >"$TEST_TMPDIR/Tiny/config.json"
model=(--model "$TEST_TMPDIR/Tiny/config.json" --cache_dir "$TEST_TMPDIR/cache" --tokens 2 --warmup 0 --context 16)
expect_exit "--model" 0 "stage decode_x12 (compress_weights over decode_fused)" "${model[@]}"
expect_exit "--model --stage decode_q8" 0 "stage decode_q8 (quantize_weights scheme=q8_0 over decode_x12)" \
  "${model[@]}" --stage decode_q8
expect_exit "--model and --elf" 2 "give --model or --elf, not both" "${model[@]}" --elf "$elf"

finish
