#!/usr/bin/env bash
# check_layers.sh PACKAGE LAYER ALLOWED_LAYERS ALL_LAYERS DEPS_FILE
# DEPS_FILE: one label per line (genquery over the package's rules). Every label of
# this workspace must belong to a layer in ALLOWED_LAYERS (comma-separated; the
# package's own layer included). Prints each violation and exits 1.
set -euo pipefail
package="$1" layer="$2" allowed=",$3," all="$4" deps="$5"

layer_of() {  # longest layer prefix of a package, or "" (a leaf: tools, tests, models)
  local p="$1" best="" l
  IFS=, read -ra layers <<<"$all"
  for l in "${layers[@]}"; do
    if [[ "$p" == "$l" || "$p" == "$l"/* ]] && ((${#l} > ${#best})); then best="$l"; fi
  done
  echo "$best"
}

bad=0
checked=0
while read -r label; do
  [[ "$label" == //* ]] || continue  # external repositories (Debian libraries) are fine
  case "$label" in *.h | *.cc | *-inl.h) continue ;; esac  # reported through their rule
  checked=$((checked + 1))
  pkg="${label#//}"; pkg="${pkg%%:*}"
  dep_layer="$(layer_of "$pkg")"
  extra=0  # an explicitly allowed package prefix (layering_test's `allow`)
  IFS=, read -ra allowed_list <<<"${allowed#,}"
  for a in "${allowed_list[@]}"; do
    [[ -n "$a" && ( "$pkg" == "$a" || "$pkg" == "$a"/* ) ]] && extra=1
  done
  if ((!extra)) && [[ -z "$dep_layer" || "$allowed" != *",$dep_layer,"* ]]; then
    echo "LAYERING: //$package (layer '$layer') depends on $label (layer '${dep_layer:-leaf}')"
    bad=1
  fi
done <"$deps"
if ((bad)); then
  echo "layer '$layer' may use only: ${allowed//,/ } (tools/build_defs/layering.bzl, README 'Layout')."
  echo "Find the path with: bazel query 'somepath(//$package:all, LABEL)'"
  exit 1
fi
echo "//$package (layer '$layer'): $checked dependency labels, all within: ${allowed//,/ }"
