#!/usr/bin/env bash
# compare_artifacts.sh TREE_A TREE_B: every decode ELF (each stage of every chain)
# and every phase-5 profile manifest that both builds produced must be byte-identical.
# Prints one line per artifact kind and each difference; exits 1 on a difference or
# when a tree has none of them (nothing compared proves nothing).
set -euo pipefail
a="$1" b="$2"

list() {  # the artifacts under TREE/bazel-bin, runfiles trees excluded
  (cd "$1/bazel-bin/" && find . -path '*.runfiles' -prune -o -type f \
     \( -name '*.elf' -o -name '*.manifest.json' \) -print | sed 's#^\./##' | LC_ALL=C sort)
}

list "$a" >"${TMPDIR:-/tmp}/artifacts_a.$$"
list "$b" >"${TMPDIR:-/tmp}/artifacts_b.$$"
trap 'rm -f "${TMPDIR:-/tmp}/artifacts_a.$$" "${TMPDIR:-/tmp}/artifacts_b.$$"' EXIT

bad=0
if ! diff -q "${TMPDIR:-/tmp}/artifacts_a.$$" "${TMPDIR:-/tmp}/artifacts_b.$$" >/dev/null; then
  echo "reproducibility: the two builds produced different sets of artifacts:"
  diff "${TMPDIR:-/tmp}/artifacts_a.$$" "${TMPDIR:-/tmp}/artifacts_b.$$" | sed -n 's/^[<>] /  /p' | head -20
  bad=1
fi
n=0 elfs=0 manifests=0
while read -r f; do
  [[ -f "$b/bazel-bin/$f" ]] || continue
  n=$((n + 1))
  case "$f" in *.elf) elfs=$((elfs + 1)) ;; *) manifests=$((manifests + 1)) ;; esac
  ha="$(sha256sum <"$a/bazel-bin/$f" | cut -d' ' -f1)"
  hb="$(sha256sum <"$b/bazel-bin/$f" | cut -d' ' -f1)"
  if [[ "$ha" != "$hb" ]]; then
    echo "reproducibility: bazel-bin/$f differs between the two builds ($ha vs $hb)"
    bad=1
  fi
done <"${TMPDIR:-/tmp}/artifacts_a.$$"
if ((n == 0)); then
  echo "reproducibility: no decode ELF or profile manifest found to compare"
  exit 1
fi
echo "reproducibility: $elfs decode ELFs and $manifests profile manifests compared by sha256: $( ((bad)) && echo DIFFERENT || echo identical)"
exit "$bad"
