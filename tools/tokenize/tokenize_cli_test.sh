#!/usr/bin/env bash
# tokenize on bad input (issue 15): --tokenizer named when missing, a missing path
# said not to exist, a broken .gguf told by its content (not "not valid JSON").
# And on Gemma 3's GGUF (SentencePiece): the ids HF gives, tokens such as "\n" escaped.
#   tokenize_cli_test.sh TOKENIZE TOKENIZER.json GEMMA3.gguf
set -uo pipefail
tokenize="$1" tok="$2" gemma="$3"
source tools/testing/cli_expect.sh
tool="$tokenize"
expect_exit "valid" 0 "ids:" --tokenizer "$tok" "hello"
expect_exit "no --tokenizer" 2 "tokenize: --tokenizer is required" "hello"
expect_exit "missing path" 1 "tokenize: --tokenizer: /nonexistent/t.gguf does not exist" \
  --tokenizer /nonexistent/t.gguf "hello"
printf 'GGUX\003\000\000\000garbage that is no GGUF and no JSON' >"$TEST_TMPDIR/broken.gguf"
expect_exit "broken gguf" 1 "is neither a GGUF file (no GGUF magic) nor a tokenizer.json" \
  --tokenizer "$TEST_TMPDIR/broken.gguf" "hello"
out="$("$tokenize" --tokenizer "$TEST_TMPDIR/broken.gguf" hello 2>&1)"
grep -qF "JSON" <<<"${out/tokenizer.json/}" && fail "broken gguf reported as JSON: $out"
head -c 20 "$tok" >"$TEST_TMPDIR/cut.json"
expect_exit "truncated json" 1 "cut.json: " --tokenizer "$TEST_TMPDIR/cut.json" "hello"
expect_exit "gemma3 spaces" 0 "ids:    [2, 138, 13498, 138, 35220]" --tokenizer "$gemma" "  two  spaces"
expect_exit "gemma3 newline token" 0 $'107\t\\n\t"\\n"' --tokenizer "$gemma" $'a\nb'
expect_exit "gemma3 decode" 0 "<bos>  two  spaces" --tokenizer "$gemma" --decode 2 138 13498 138 35220
finish
