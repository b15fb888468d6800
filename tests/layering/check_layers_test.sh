#!/usr/bin/env bash
# check_layers_test.sh CHECK_LAYERS ALLOWED ALL_LAYERS
# The layering check on made-up dependency lists: the lowest layer, formats (allowed
# to use ALLOWED, from rules/layering.bzl), may use external repositories
# and itself, and is refused every other layer of the workspace.
set -euo pipefail
check="$1" allowed="$2" all="$3"
deps="${TEST_TMPDIR:-/tmp}/deps"

printf '%s\n' //formats:weight_format //formats:weight_format.h @com_google_absl//:status >"$deps"
"$check" formats formats "$allowed" "$all" "$deps" "formats,rules" >/dev/null

for layer in util registry elf kernels weights runtime; do
  printf '%s\n' //formats:weight_format "//$layer:x" >"$deps"
  if out="$("$check" formats formats "$allowed" "$all" "$deps" "formats,rules")"; then
    echo "FAIL: formats may depend on //$layer:x (rules/layering.bzl: formats is the lowest layer)"
    exit 1
  fi
  grep -q "LAYERING: //formats (layer 'formats') depends on //$layer:x (layer '$layer')" <<<"$out"
done
echo "formats: refused every higher layer"
