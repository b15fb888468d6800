#!/usr/bin/env bash
# check_layers.sh PACKAGE LAYER ALLOWED_LAYERS ALL_LAYERS DEPS_FILE LOAD_LAYERS STARLARK_FILE...
# DEPS_FILE: one label per line (genquery over the package's rules). Every label of
# this workspace must belong to a layer in ALLOWED_LAYERS (comma-separated; the
# package's own layer included). STARLARK_FILE: the package's BUILD and .bzl files;
# every .bzl of this workspace they load() must belong to a layer in LOAD_LAYERS.
# Prints each violation and exits 1.
set -euo pipefail
package="$1" layer="$2" allowed=",$3," all="$4" deps="$5" load_allowed=",$6,"
shift 6

layer_of() {  # longest layer prefix of a package, or "" (a leaf: tools, tests, models)
  local p="$1" best="" l
  IFS=, read -ra layers <<<"$all"
  for l in "${layers[@]}"; do
    if [[ "$p" == "$l" || "$p" == "$l"/* ]] && ((${#l} > ${#best})); then best="$l"; fi
  done
  echo "$best"
}

# within ALLOWED LABEL: whether LABEL's package belongs to a layer in ALLOWED
# (",a,b,"), or lies under one of its entries (layering_test's `allow`).
within() {
  local allowed="$1" pkg="${2#//}" a dep_layer
  pkg="${pkg%%:*}"
  IFS=, read -ra allowed_list <<<"${allowed#,}"
  for a in "${allowed_list[@]}"; do
    [[ -n "$a" && ( "$pkg" == "$a" || "$pkg" == "$a"/* ) ]] && return 0
  done
  dep_layer="$(layer_of "$pkg")"
  [[ -n "$dep_layer" && "$allowed" == *",$dep_layer,"* ]]
}

layer_name() { local pkg="${1#//}"; pkg="$(layer_of "${pkg%%:*}")"; echo "${pkg:-leaf}"; }

bad=0
checked=0
while read -r label; do
  [[ "$label" == //* ]] || continue  # external repositories (Debian libraries) are fine
  case "$label" in *.h | *.cc | *-inl.h) continue ;; esac  # reported through their rule
  checked=$((checked + 1))
  if ! within "$allowed" "$label"; then
    echo "LAYERING: //$package (layer '$layer') depends on $label (layer '$(layer_name "$label")')"
    bad=1
  fi
done <"$deps"

# load("//pkg:file.bzl", ...): the label is the call's first argument, on its line.
# A load of this package (":file.bzl") or of another repository (@...) is fine.
loads=0
for file in "$@"; do
  while read -r label; do
    loads=$((loads + 1))
    if ! within "$load_allowed" "$label"; then
      echo "LAYERING: //$package/$(basename "$file") (layer '$layer') loads $label (layer '$(layer_name "$label")')"
      bad=1
    fi
  done < <(sed -nE 's#^[[:space:]]*load\([[:space:]]*"(//[^"]*)".*#\1#p' "$file")
done
if ((bad)); then
  echo "layer '$layer' may use only: ${allowed//,/ }; load .bzl files only from: ${load_allowed//,/ }"
  echo "(rules/layering.bzl, README 'Layout')."
  echo "Find the path with: bazel query 'somepath(//$package:all, LABEL)'"
  exit 1
fi
echo "//$package (layer '$layer'): $checked dependency labels, all within: ${allowed//,/ }"
echo "//$package: $loads loads of this workspace's .bzl files in $# files, all from: ${load_allowed//,/ }"
