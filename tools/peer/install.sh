#!/usr/bin/env bash
# Installs the llama.cpp peer: a venv at tools/peer/.venv with llama-cpp-python built from
# source for this CPU (GGML_NATIVE, OpenMP), plus the pinned packages of requirements.txt.
# Idempotent: does nothing when the venv already has the pinned llama-cpp-python.
# Usage: tools/peer/install.sh            (from anywhere)
#        PEER_VENV=/some/dir tools/peer/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${PEER_VENV:-$here/.venv}"
req="$here/requirements.txt"
want="$(sed -n 's/^llama-cpp-python==//p' "$req")"
py="${PYTHON:-python3}"

say() { echo "[peer install $(date -u +%H:%M:%S)] $*"; }

if [[ -x "$venv/bin/python" ]] &&
   "$venv/bin/python" - "$want" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
assert md.version("llama-cpp-python") == sys.argv[1]
assert md.version("gguf")
import llama_cpp  # the shared library loads
PY
then
  say "llama-cpp-python==$want already installed in $venv; nothing to do"
  exit 0
fi

start=$(date +%s)
if [[ ! -x "$venv/bin/python" ]]; then
  say "creating venv $venv ($("$py" --version))"
  "$py" -m venv "$venv"
fi
say "installing pinned dependencies from $req"
# Everything except llama-cpp-python (built below).
grep -v '^llama-cpp-python==' "$req" > "$venv/requirements-deps.txt"
"$venv/bin/pip" install --quiet -r "$venv/requirements-deps.txt"

say "building llama-cpp-python==$want from source (compiles llama.cpp: 9 to 13 min on 2 busy cores)"
# pip shows the compiler's output only at the end: log it to a file and print a heartbeat.
build_log="$venv/llama-cpp-python-build.log"
CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_OPENMP=ON" \
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
  "$venv/bin/pip" install --verbose --no-binary llama-cpp-python --no-build-isolation --no-deps \
    "llama-cpp-python==$want" > "$build_log" 2>&1 &
pip_pid=$!
while kill -0 "$pip_pid" 2>/dev/null; do
  sleep 30
  kill -0 "$pip_pid" 2>/dev/null && say "still compiling ($(( $(date +%s) - start )) s so far; log: $build_log)"
done
if ! wait "$pip_pid"; then
  tail -n 40 "$build_log"
  say "pip failed; full log: $build_log"
  exit 1
fi
"$venv/bin/pip" check
"$venv/bin/python" - <<'PY'
import llama_cpp
print(llama_cpp.llama_print_system_info().decode())
PY
"$venv/bin/python" -c "import importlib.metadata as md, sys; sys.exit(md.version('llama-cpp-python') != '$want')" ||
  { say "llama-cpp-python did not install"; exit 1; }
say "done in $(( $(date +%s) - start )) s"
