// decodekit's API in one program: open a stage, then stream a completion (or, with
// --chat, the model's answer to a question in its chat format).
//
//   quickstart ELF MODEL PROMPT [--chat[=FORMAT]] [--temperature T] [--top_p P] [--seed S]
//              [--max_new_tokens N] [--stop TEXT]
//
// MODEL is a .gguf file (weights and tokenizer) or a checkpoint directory. Only the
// public header is used. Exit status: 0 generated, 1 the engine refused (its message on
// stderr), 2 bad arguments.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "api/decodekit.h"

namespace {

struct Args {
  decodekit::EngineOptions engine;
  decodekit::GenerateOptions generate;
  std::string prompt;
  bool chat = false;
};

// "--name=value" or "--name value" for a flag with a value; false when `arg` is not it.
bool Value(std::string_view name, int& i, int argc, char** argv, std::string& out) {
  const std::string_view arg = argv[i];
  if (arg.substr(0, name.size()) != name) return false;
  if (arg.size() > name.size() && arg[name.size()] == '=') {
    out = std::string(arg.substr(name.size() + 1));
    return true;
  }
  if (arg.size() != name.size() || i + 1 >= argc) return false;
  out = argv[++i];
  return true;
}

bool Parse(int argc, char** argv, Args& a) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string v;
    if (arg == "--chat") {
      a.chat = true;
    } else if (arg.substr(0, 7) == "--chat=") {
      a.chat = true;
      a.engine.chat_format = std::string(arg.substr(7));
    } else if (Value("--temperature", i, argc, argv, v)) {
      a.generate.sampling.temperature = std::strtof(v.c_str(), nullptr);
    } else if (Value("--top_p", i, argc, argv, v)) {
      a.generate.sampling.top_p = std::strtof(v.c_str(), nullptr);
    } else if (Value("--seed", i, argc, argv, v)) {
      a.generate.sampling.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Value("--max_new_tokens", i, argc, argv, v)) {
      a.generate.max_new_tokens = std::atoi(v.c_str());
    } else if (Value("--stop", i, argc, argv, v)) {
      a.generate.stop_strings.push_back(v);
    } else if (arg.substr(0, 2) == "--") {
      std::fprintf(stderr, "quickstart: unknown flag %s\n", argv[i]);
      return false;
    } else {
      positional.emplace_back(arg);
    }
  }
  if (positional.size() != 3) return false;
  a.engine.elf = positional[0];
  a.engine.weights = positional[1];
  a.prompt = positional[2];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  a.generate.max_new_tokens = 48;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr, "usage: quickstart ELF MODEL PROMPT [--chat[=FORMAT]] [--temperature T] [--top_p P] "
                         "[--seed S] [--max_new_tokens N] [--stop TEXT]\n");
    return 2;
  }
  auto engine = decodekit::Engine::Open(a.engine);
  if (!engine.ok()) {
    std::fprintf(stderr, "quickstart: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  const auto print = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  if (!a.chat) print(a.prompt);
  auto result = a.chat ? (*engine)->Chat({{"user", a.prompt}}, a.generate, print)
                       : (*engine)->Complete(a.prompt, a.generate, print);
  if (!result.ok()) {
    std::fprintf(stderr, "\nquickstart: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  static const char* kReasons[] = {"max_new_tokens", "end of generation", "stop string", "callback"};
  std::printf("\n");
  std::fprintf(stderr, "[quickstart] %s\n[quickstart] %d prompt tokens in %.0f ms, %zu new tokens at %.1f tokens/s; "
               "stopped at %s\n", (*engine)->Describe().c_str(), result->prompt_tokens, result->prompt_ms,
               result->tokens.size(), result->decode_tokens_per_s(), kReasons[static_cast<int>(result->stop)]);
  return 0;
}
