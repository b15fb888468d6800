"""decode_bench: a decode benchmark (Google Benchmark) of one decode ELF."""

load("@rules_cc//cc:defs.bzl", "cc_binary")

def decode_bench(name, elf, weights = None, **kwargs):
    """`bazel run` benchmarks decode of one stage.

    Args:
      name: the binary's name.
      elf: the one stage to benchmark, usually the chain's final one (named `elf`
        like decode_generate's; verify_chain and decode_profile, which cover the
        whole chain, take its `final` stage instead).
      weights: the weights file (None: synthetic weights).
      **kwargs: passed to the cc_binary (e.g. tags).
    """
    cc_binary(
        name = name,
        testonly = True,
        args = [
            "--elf=$(rootpath %s)" % elf,
            "--weights=" + ("$(rootpath %s)" % weights if weights else "synthetic"),
        ],
        data = [elf] + ([weights] if weights else []),
        deps = ["//tools/bench:decode_bench_main"],
        **kwargs
    )
