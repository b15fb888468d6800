"""optimization_pass(): the whole BUILD of a pass folder, optimizations/<pass>/.

Every pass folder holds the same three targets, named after the folder: the pass
library (<pass>.cc, <pass>.h), its test (<pass>_test.cc, with the goldens in
testdata/) and the layering test. Writing them once keeps the six folders from
drifting apart; a folder's BUILD is one call.
"""

load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")
load("//rules:layering.bzl", "layering_test")

# What every pass may use: the ELF schema, the weight formats, the kernel registry,
# the shared helpers.
_PASS_DEPS = [
    "//elf",
    "//formats:weight_format",
    "//registry",
    "//optimizations/common:pass_result",
    "//optimizations/common:program_util",
    "//util:status",
    "@com_google_absl//:status",
    "@com_google_absl//:strings",
]

_TEST_DEPS = [
    "//elf",
    "//graph",
    "//registry",
    "//optimizations/common:program_util",
    "//optimizations/testing",
    "@com_google_absl//:strings",
    "@com_google_googletest//:gtest_main",
]

def optimization_pass(deps = [], test_deps = []):
    """The targets of the pass folder this BUILD file is in.

    Reached from outside optimizations/ only through the pass table
    (//optimizations:passes).

    Args:
      deps: what the pass library needs besides the usual (e.g. the prefill plan).
      test_deps: what the pass's test needs besides the usual (e.g. the pass table).
    """
    name = native.package_name().split("/")[-1]
    visibility = ["//optimizations:__subpackages__"]
    cc_library(
        name = name,
        srcs = [name + ".cc"],
        hdrs = [name + ".h"],
        visibility = visibility,
        deps = _PASS_DEPS + deps,
    )

    # Goldens: testdata/<case>.after.textproto (./bazelw run //optimizations:update_goldens).
    cc_test(
        name = name + "_test",
        size = "small",
        srcs = [name + "_test.cc"],
        data = native.glob(["testdata/*.textproto"]),
        deps = [":" + name] + _TEST_DEPS + test_deps,
    )
    layering_test()
