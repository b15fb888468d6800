"""The public Bazel rules of decodekit: load("//rules:defs.bzl", ...).

decodekit_model (rules/decodekit_model.bzl) writes a model's standard chain, its
verify, profile and generate targets in one call, from the model file alone; from
another workspace: load("@decodekit//rules:defs.bzl", "decodekit_model"). By hand, a
BUILD writes its chain with these: decode_elf (the baseline), one
optimization rule per stage (rules/optimizations.bzl), and verify_chain,
decode_profile naming the final stage; model_targets (rules/model.bzl) writes the
rest every model has (the npu2 plan, decode_generate targets, decode_plan_test). Their
provider, DecodeElfInfo, is in //rules:providers.bzl. Every .bzl of the build
lives in rules/ and loads only from rules/ (tests/layering checks it), so no
layer of the code loads a .bzl from above itself.
"""

load(":decode_elf.bzl", _decode_elf = "decode_elf", _model_shape = "model_shape")
load(":decodekit_model.bzl", _decodekit_model = "decodekit_model")
load(":generate.bzl", _decode_generate = "decode_generate")
load(
    ":optimizations.bzl",
    _buffer_object_reuse = "buffer_object_reuse",
    _compress_weights = "compress_weights",
    _fuse_kernels = "fuse_kernels",
    _layout_alignment = "layout_alignment",
    _merge_multi_launch = "merge_multi_launch",
    _quantize_weights = "quantize_weights",
    _speculative_decode = "speculative_decode",
)
load(":model.bzl", _model_targets = "model_targets")
load(":plan_test.bzl", _decode_plan_test = "decode_plan_test")
load(":profile.bzl", _decode_profile = "decode_profile")
load(":verify.bzl", _verify_chain = "verify_chain", _verify_test = "verify_test")

decode_elf = _decode_elf
model_shape = _model_shape
layout_alignment = _layout_alignment
buffer_object_reuse = _buffer_object_reuse
merge_multi_launch = _merge_multi_launch
fuse_kernels = _fuse_kernels
compress_weights = _compress_weights
quantize_weights = _quantize_weights
speculative_decode = _speculative_decode
verify_chain = _verify_chain
verify_test = _verify_test
decode_profile = _decode_profile
decode_generate = _decode_generate
decode_plan_test = _decode_plan_test
model_targets = _model_targets
decodekit_model = _decodekit_model
