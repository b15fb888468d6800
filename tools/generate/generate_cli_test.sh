#!/usr/bin/env bash
# generate's answers to bad command lines (issue 15): each names the flag, exits 2
# for a bad flag or a model file it does not support (a tensor of a ggml type it does
# not dequantize, a GGUF architecture it does not know) and 1 for a bad path or a file
# it cannot read, and the valid command line still works.
#   generate_cli_test.sh GENERATE TINY.elf TOKENIZER.json SMALL_VOCAB.elf
# (TINY.elf's vocabulary covers TOKENIZER.json's ids; SMALL_VOCAB.elf's does not)
set -uo pipefail
generate="$1" elf="$2" tok="$3" small_vocab_elf="$4"
source tools/testing/cli_expect.sh
tool="$generate"

ok=(--elf "$elf" --tokenizer "$tok" --weights synthetic --prompt "a b")
expect_exit "no --elf" 2 "generate: --elf is required" --tokenizer "$tok"
expect_exit "no --tokenizer" 2 "generate: --tokenizer is required" --elf "$elf"
expect_exit "negative --max_new_tokens" 2 "--max_new_tokens -1 is outside" "${ok[@]}" --max_new_tokens -1
expect_exit "negative --max_context" 2 "--max_context -5 is outside" "${ok[@]}" --max_context -5
expect_exit "--elf a directory" 1 "--elf: $TEST_TMPDIR is a directory, not a file" \
  "${ok[@]}" --elf "$TEST_TMPDIR"
expect_exit "missing --weights" 1 "--weights: $TEST_TMPDIR/no_such_checkpoint does not exist" \
  "${ok[@]}" --weights "$TEST_TMPDIR/no_such_checkpoint"
expect_exit "missing --tokenizer" 1 "--tokenizer: /nonexistent/tok.json does not exist" \
  "${ok[@]}" --tokenizer /nonexistent/tok.json
# The up-front context check: an int sum wrapped negative and let it through.
expect_exit "INT_MAX --max_new_tokens" 1 "+ --max_new_tokens (2147483647) exceeds the KV cache of 128" \
  "${ok[@]}" --max_new_tokens 2147483647
# An unquoted prompt: the shell splits it; the words after the first are refused, not
# dropped (the run would otherwise answer "The" instead of the prompt meant).
expect_exit "unquoted --prompt" 2 "generate: unexpected argument 'capital': this tool takes only --flags" \
  "${ok[@]}" --prompt The capital
expect_exit "empty synthetic seed" 1 "--weights synthetic:: the seed after 'synthetic:' must be a decimal number" \
  "${ok[@]}" --weights synthetic:
expect_exit "non-numeric synthetic seed" 1 "--weights synthetic:x1: the seed after 'synthetic:' must be" \
  "${ok[@]}" --weights synthetic:x1
expect_exit "another model's tokenizer" 1 \
  "tokens but ELF $small_vocab_elf has a vocabulary of 300: it is not this model's tokenizer" \
  "${ok[@]}" --elf "$small_vocab_elf"
# A FIFO as --weights (no writer) is refused at once, not waited on (timeout: a hang
# fails here instead of at the test's time limit).
mkfifo "$TEST_TMPDIR/weights_fifo"
tool=timeout
expect_exit "a FIFO as --weights" 1 "weights $TEST_TMPDIR/weights_fifo is not a regular file or directory" \
  20 "$generate" --elf "$elf" --tokenizer "$tok" --weights "$TEST_TMPDIR/weights_fifo" --prompt "a b"
tool="$generate"
# A tokenizer of a size that fits, but not the ids the model's own files name (the
# tokenizer's BOS is 0, its end of generation 1 and 4).
mkdir -p "$TEST_TMPDIR/other_ckpt"
echo '{"bos_token_id": 5, "eos_token_id": 1}' >"$TEST_TMPDIR/other_ckpt/config.json"
expect_exit "a tokenizer with another BOS" 1 \
  "is not this model's: its BOS is id 0, the model's is 5 (model ids from $TEST_TMPDIR/other_ckpt/config.json)" \
  "${ok[@]}" --weights "$TEST_TMPDIR/other_ckpt"
echo '{"bos_token_id": 0, "eos_token_id": [7, 8]}' >"$TEST_TMPDIR/other_ckpt/config.json"
mkdir -p "$TEST_TMPDIR/tok_dir"
cp "$tok" "$TEST_TMPDIR/tok_dir/tokenizer.json"
echo '{"eos_token": "<|end_of_text|>"}' >"$TEST_TMPDIR/tok_dir/tokenizer_config.json"
expect_exit "a tokenizer that never ends on the model's EOS" 1 \
  "none of its end-of-generation ids [1, 4] is the model's EOS or end of turn [7, 8]" \
  "${ok[@]}" --weights "$TEST_TMPDIR/other_ckpt" --tokenizer "$TEST_TMPDIR/tok_dir"
# Well-formed GGUFs that ask for what decodekit does not support: a tensor of a ggml
# type the loader does not dequantize (IQ4_NL: 32 elements in 18 bytes), an unknown
# architecture. Exit 2, naming the tensor and the type, or the architecture.
u32() { printf "$(printf '\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
u64() { u32 "$1"; u32 0; }
str() { u64 "${#1}"; printf '%s' "$1"; }
kv_u32() { str "$1"; u32 4; u32 "$2"; }
one_tensor_gguf() {  # ARCH OUT: one 256 x 4 IQ4_NL tensor
  local arch="$1" out="$2"
  {
    printf 'GGUF'; u32 3; u64 1; u64 6
    str general.architecture; u32 8; str "$arch"
    kv_u32 "$arch.block_count" 1
    kv_u32 "$arch.embedding_length" 256
    kv_u32 "$arch.feed_forward_length" 256
    kv_u32 "$arch.attention.head_count" 4
    kv_u32 "$arch.vocab_size" 4
    str token_embd.weight; u32 2; u64 256; u64 4; u32 20; u64 0
  } >"$out"
  local size
  size=$(stat -c %s "$out")
  head -c $(((32 - size % 32) % 32 + 4 * 8 * 18)) /dev/zero >>"$out"
}
one_tensor_gguf llama "$TEST_TMPDIR/iq4_nl.gguf"
expect_exit "IQ4_NL tensor" 2 \
  "generate: tensor \"token_embd.weight\" (model.embed_tokens.weight) in $TEST_TMPDIR/iq4_nl.gguf: unsupported ggml type IQ4_NL (20)" \
  "${ok[@]}" --weights "$TEST_TMPDIR/iq4_nl.gguf"
one_tensor_gguf mamba "$TEST_TMPDIR/mamba.gguf"
expect_exit "unknown architecture" 2 "general.architecture \"mamba\"" \
  "${ok[@]}" --weights "$TEST_TMPDIR/mamba.gguf"
# Sampling and chat options: bad values are usage errors naming the option.
expect_exit "negative --temperature" 2 "temperature" "${ok[@]}" --temperature -1
expect_exit "--top_p 0" 2 "top_p" "${ok[@]}" --top_p 0
expect_exit "unknown --chat_format" 2 "vicuna" "${ok[@]}" --chat --chat_format vicuna
# The test tokenizer carries no chat template: --chat asks for a format.
expect_exit "--chat without a template" 1 "carry no chat template" "${ok[@]}" --chat
expect_exit "valid" 0 "new tokens" "${ok[@]}" --max_new_tokens 2
expect_exit "valid, sampled" 0 "stopped at --max_new_tokens" "${ok[@]}" --max_new_tokens 3 --temperature 0.8 --seed 2
expect_exit "valid, raw chat" 0 "new tokens" "${ok[@]}" --max_new_tokens 2 --chat --chat_format raw --system "Be brief."

finish
