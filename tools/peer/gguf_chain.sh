#!/usr/bin/env bash
# The standard decode chain of a GGUF, built by hand with elfc and elf_opt (what a model's
# BUILD does with its rules), for a file no model package names (tools/peer/make_big_gguf.py's
# 3B / 8B, or a wheel's GGUF at another --max_context):
#
#   tools/peer/gguf_chain.sh MODEL.gguf OUT_DIR [MAX_CONTEXT]
#
# writes OUT_DIR/decode.elf, decode_aligned.elf, decode_bo.elf, decode_opt.elf,
# decode_fused.elf, decode_x12.elf, decode_q8.elf and decode_gguf.elf (the GGUF's own
# blocks; the stage to run with --weights MODEL.gguf; built from decode_opt, quantized
# before fuse_kernels, where the standard order is refused: see below). MAX_CONTEXT: elfc --max_context
# (0 or absent: its default cap, 32768). Needs the opt builds of //tools/elfc and
# //tools/elf_opt (./bazelw build --config=opt //tools/elfc //tools/elf_opt).
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,12p' "$0"
  exit 2
fi
gguf="$1" out="$2" max_context="${3:-0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
elfc="$root/bazel-bin/tools/elfc/elfc"
opt="$root/bazel-bin/tools/elf_opt/elf_opt"
for b in "$elfc" "$opt"; do
  [[ -x "$b" ]] || { echo "gguf_chain: $b missing; ./bazelw build --config=opt //tools/elfc //tools/elf_opt" >&2; exit 1; }
done
mkdir -p "$out"
"$elfc" --model "$gguf" --max_context "$max_context" --out "$out/decode.elf"
step() {  # step PARENT CHILD PASS [args...]
  local in="$1" to="$2" pass="$3"
  shift 3
  "$opt" --pass="$pass" --in "$out/$in.elf" --out "$out/$to.elf" "$@"
}
step decode decode_aligned layout_alignment
step decode_aligned decode_bo buffer_object_reuse
step decode_bo decode_opt merge_multi_launch
step decode_opt decode_fused fuse_kernels --allow_noop
step decode_fused decode_x12 compress_weights
step decode_x12 decode_q8 quantize_weights scheme=q8_0
if ! step decode_q8 decode_gguf quantize_weights --weights "$gguf" scheme=gguf; then
  # llama.cpp's Q4_K_M of a Llama 3 keeps attn_v / ffn_down in Q6_K in half the layers
  # (q / k in Q4_K): fuse_kernels' rms_gemv3 has fused q/k/v by then, and one launch
  # reads one format. Quantized first, fuse_kernels leaves those layers' q/k/v unfused
  # (bit-identical either way): decode_opt -> the GGUF's blocks -> fused.
  echo "gguf_chain: decode_gguf from decode_q8 refused (above); building decode_opt -> quantize_weights(gguf) -> fuse_kernels instead" >&2
  step decode_opt decode_gguf_unfused quantize_weights --weights "$gguf" scheme=gguf
  step decode_gguf_unfused decode_gguf fuse_kernels --allow_noop
  rm -f "$out/decode_gguf_unfused.elf"
fi
ls -la "$out"/*.elf >&2
