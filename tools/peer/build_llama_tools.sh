#!/usr/bin/env bash
# Builds llama.cpp's own command-line tools `llama-perplexity`, `llama-quantize` and
# `llama-batched-bench` from the llama.cpp sources vendored in the pinned llama-cpp-python sdist
# (requirements.txt), the same sources install.sh compiles into the venv's shared library, so the
# KLD parity check (docs/perplexity.md) and the batched-decode comparison (batched_ab.py
# --peer_tool) run the field's tools rather than re-implementations of them.
# Native CPU build (GGML_NATIVE, OpenMP), static, no HTTPS / server / tests.
# Idempotent: does nothing when the binaries exist and were built from the same sdist.
# Usage: tools/peer/build_llama_tools.sh        (from anywhere; prints the bin directory last)
#        PEER_BUILD=/some/dir tools/peer/build_llama_tools.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${PEER_BUILD:-$here/.build}"
req="$here/requirements.txt"
want="$(sed -n 's/^llama-cpp-python==//p' "$req")"
venv="${PEER_VENV:-$here/.venv}"
# The sha256 of llama_cpp_python-0.3.36.tar.gz as pip fetches it from PyPI: another file
# under that name fails here rather than building other sources.
sdist_sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
sdist="llama_cpp_python-$want.tar.gz"
bin="$out/llama.cpp-build/bin"
stamp="$out/built-from"

say() { echo "[peer build_llama_tools $(date -u +%H:%M:%S)] $*" >&2; }

tools=(llama-perplexity llama-quantize llama-batched-bench)
built=1
for t in "${tools[@]}"; do [[ -x "$bin/$t" ]] || built=0; done
if [[ "$built" == 1 && -f "$stamp" &&
      "$(cat "$stamp")" == "$sdist $sdist_sha256" ]]; then
  say "${tools[*]} of llama-cpp-python==$want already built; nothing to do"
  echo "$bin"
  exit 0
fi

start=$(date +%s)
mkdir -p "$out"
if [[ ! -f "$out/$sdist" ]]; then
  # pip is the ordinary client for PyPI; the venv's pip when install.sh made one.
  pip="$venv/bin/pip"
  [[ -x "$pip" ]] || pip="python3 -m pip"
  say "downloading $sdist"
  $pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$want" -d "$out"
fi
got="$(sha256sum "$out/$sdist" | cut -d' ' -f1)"
if [[ "$got" != "$sdist_sha256" ]]; then
  say "$out/$sdist: sha256 $got, want $sdist_sha256"
  exit 1
fi
rm -rf "$out/src"
mkdir -p "$out/src"
tar -xzf "$out/$sdist" -C "$out/src"
src="$out/src/llama_cpp_python-$want/vendor/llama.cpp"

say "configuring $src"
cmake -S "$src" -B "$out/llama.cpp-build" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON \
  > "$out/cmake-configure.log" 2>&1 || { tail -n 30 "$out/cmake-configure.log"; exit 1; }
say "compiling ${tools[*]} (log: $out/cmake-build.log)"
cmake --build "$out/llama.cpp-build" --target "${tools[@]}" \
  -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" > "$out/cmake-build.log" 2>&1 ||
  { tail -n 40 "$out/cmake-build.log"; exit 1; }
echo "$sdist $sdist_sha256" > "$stamp"
"$bin/llama-perplexity" --version >&2 || true
say "done in $(( $(date +%s) - start )) s"
echo "$bin"
