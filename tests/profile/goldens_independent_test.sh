#!/bin/bash
# The goldens come from the scalar reference decoder alone: nothing that builds them
# (deps of :goldens, from the genquery DEPS) is code the gate checks (the runtime, its
# kernels, the graph builder, the passes, verify) or a stage of the chain. Goldens
# such code made would agree with a fault every stage shares.
#   goldens_independent_test.sh DEPS
set -u
deps="$1"
source tools/testing/cli_expect.sh
[[ -s "$deps" ]] || fail "empty dependency list $deps"
grep -qx "//tests/e2e:reference_decoder" "$deps" || fail "the goldens do not come from //tests/e2e:reference_decoder"
for pkg in api graph kernels optimizations runtime verify; do
  hits="$(grep -E "^//$pkg[/:]" "$deps")" && fail "the goldens depend on //$pkg, which the gate checks:"$'\n'"$hits"
done
# The chain's stages and what makes them (decode_elf's elfc is under //tools).
hits="$(grep -E "^//tools[/:]|^//tests/profile:(decode|npu2|corrupt)" "$deps")" &&
  fail "the goldens depend on the chain under test:"$'\n'"$hits"
finish
