"""hf_layout_test: generate on a sharded HF-layout checkpoint of a model's synthetic weights."""

def hf_layout_test(model, tokenizer):
    native.sh_test(
        name = model,
        size = "medium",
        srcs = ["hf_layout_test.sh"],
        args = [
            "$(rootpath //tools/synthetic_weights)",
            "$(rootpath //tools/generate)",
            "$(rootpath //models/%s:decode_x12)" % model,
            "$(rootpath //models/%s:config.textproto)" % model,
            "$(rootpath %s)" % tokenizer,
        ],
        data = [
            "//tools/synthetic_weights",
            "//tools/generate",
            "//models/%s:decode_x12" % model,
            "//models/%s:config.textproto" % model,
            tokenizer,
        ],
        tags = ["cpu:2", "sanitizer_slow"],
    )
