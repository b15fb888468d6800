"""@rules_cc for Bazel 4.2.3 offline: forwards every rule to the native one.

Debian's bazel-rules-cc needs a newer @bazel_tools (`use_cpp_toolchain`) than
bazel-bootstrap 4.2.3 has, yet @bazel_tools//tools/cpp loads @rules_cc, so every
C++ build needs one. This shim is that one.
"""

load(
    "//cc/private:native.bzl",
    "NativeCcInfo",
    "NativeCcToolchainConfigInfo",
    "NativeDebugPackageInfo",
    "native_cc_common",
)

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def fdo_profile(**attrs):
    native.fdo_profile(**attrs)

def fdo_prefetch_hints(**attrs):
    native.fdo_prefetch_hints(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)

def objc_import(**attrs):
    native.objc_import(**attrs)

CcInfo = NativeCcInfo
CcToolchainConfigInfo = NativeCcToolchainConfigInfo
DebugPackageInfo = NativeDebugPackageInfo
cc_common = native_cc_common
