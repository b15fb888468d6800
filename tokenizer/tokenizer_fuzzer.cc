// libFuzzer target: the tokenizer loaders (issue 15). The input is a tokenizer.json
// and, when it parses as a GGUF image, GGUF tokenizer metadata; a tokenizer that
// loads then encodes and decodes a few bytes. Errors are fine, crashes are not.
//   ./bazelw build --config=fuzz //tokenizer:tokenizer_fuzzer
//   bazel-bin/tokenizer/tokenizer_fuzzer -max_total_time=60 CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"

namespace {

void Exercise(const dk::tokenizer::Tokenizer& tok) {
  auto ids = tok.Encode("Hello, world 123 \xc3\xa9");
  if (ids.ok()) (void)tok.Decode(*ids);
  const std::vector<int32_t> edge = {0, tok.vocab_size() - 1, tok.vocab_size(), -1};
  (void)tok.Decode(edge);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (auto tok = dk::tokenizer::Tokenizer::FromTokenizerJson(bytes); tok.ok()) Exercise(**tok);
  if (auto gguf = dk::weights::GgufFile::FromBytes(bytes, "fuzz.gguf"); gguf.ok()) {
    if (auto tok = dk::tokenizer::Tokenizer::FromGguf(**gguf); tok.ok()) Exercise(**tok);
  }
  return 0;
}
