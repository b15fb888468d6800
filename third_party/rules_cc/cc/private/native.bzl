"""Native C++ symbols under other names (Starlark cannot write `CcInfo = CcInfo`)."""

NativeCcInfo = CcInfo
NativeCcToolchainConfigInfo = CcToolchainConfigInfo
NativeDebugPackageInfo = DebugPackageInfo
native_cc_common = cc_common
