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
grep -qx "//verify/reference:reference_decoder" "$deps" || fail "the goldens do not come from //verify/reference:reference_decoder"
# The reference (//verify/reference) and its tool (//tools/reference_goldens) are the
# only parts of //verify and //tools allowed.
own='^//(verify/reference|tools/reference_goldens):'
for pkg in api graph kernels optimizations runtime verify; do
  hits="$(grep -E "^//$pkg[/:]" "$deps" | grep -vE "$own")" &&
    fail "the goldens depend on //$pkg, which the gate checks:"$'\n'"$hits"
done
# The chain's stages and what makes them (decode_elf's elfc is under //tools).
hits="$(grep -E "^//tools[/:]|^//tests/profile:(decode|npu2|corrupt)" "$deps" | grep -vE "$own")" &&
  fail "the goldens depend on the chain under test:"$'\n'"$hits"
finish
