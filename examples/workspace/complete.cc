// complete ELF MODEL PROMPT: a greedy continuation of PROMPT through a decode ELF the
// rules built, on MODEL (a .gguf: weights and tokenizer), with decodekit's one header.
#include <cstdio>
#include <string>
#include <string_view>

#include "api/decodekit.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: complete ELF MODEL PROMPT\n");
    return 2;
  }
  decodekit::EngineOptions options;
  options.elf = argv[1];
  options.weights = argv[2];
  auto engine = decodekit::Engine::Open(options);
  if (!engine.ok()) {
    std::fprintf(stderr, "complete: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  decodekit::GenerateOptions generate;  // greedy
  generate.max_new_tokens = 12;
  std::fputs(argv[3], stdout);
  auto result = (*engine)->Complete(argv[3], generate, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return true;
  });
  std::printf("\n");
  if (!result.ok()) {
    std::fprintf(stderr, "complete: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  return 0;
}
