// decodekit's API in one program: open a stage, then stream a completion (or, with
// --chat, the model's answer to a question in its chat format).
//
//   quickstart ELF MODEL PROMPT [--chat[=FORMAT]] [--temperature T] [--top_p P] [--seed S]
//              [--max_new_tokens N] [--stop TEXT]
//
// MODEL is a .gguf file (weights and tokenizer) or a checkpoint directory. Only the
// public header is used. Exit status: 0 generated, 1 the engine refused (its message on
// stderr), 2 bad arguments.
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
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

// Numbers are parsed whole and range-checked: atoi/strtof alone would read
// "--max_new_tokens abc" as 0 and "--seed -1" as 2^64 - 1, a run the user did not ask
// for. (The standard library's parsers, checked, since the example uses no header but
// the public one.) Each prints "quickstart: --flag VALUE: expected ..." and returns
// false, which main answers with the usage line and exit 2.
bool BadValue(std::string_view flag, const std::string& v, const char* expected) {
  std::fprintf(stderr, "quickstart: %.*s %s: expected %s\n", static_cast<int>(flag.size()), flag.data(),
               v.c_str(), expected);
  return false;
}

// A decimal integer in [lo, hi], nothing else (no sign for unsigned T, no spaces).
template <typename T>
bool ParseInt(std::string_view flag, const std::string& v, T lo, T hi, const char* expected, T& out) {
  T x{};
  const auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || err != std::errc() || end != v.data() + v.size() || x < lo || x > hi) {
    return BadValue(flag, v, expected);
  }
  out = x;
  return true;
}

// A finite float in [lo, hi] (lo excluded when `open_lo`), nothing after it.
bool ParseFloat(std::string_view flag, const std::string& v, float lo, bool open_lo, float hi,
                const char* expected, float& out) {
  char* end = nullptr;
  errno = 0;
  const float x = v.empty() || std::isspace(static_cast<unsigned char>(v[0])) ? NAN : std::strtof(v.c_str(), &end);
  // Written so that NaN fails (comparisons with NaN are false).
  if (errno != 0 || end != v.c_str() + v.size() || !std::isfinite(x) || !(open_lo ? x > lo : x >= lo) ||
      !(x <= hi)) {
    return BadValue(flag, v, expected);
  }
  out = x;
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
      if (!ParseFloat("--temperature", v, 0, false, std::numeric_limits<float>::max(),
                      "a finite number >= 0 (0: greedy)", a.generate.sampling.temperature)) {
        return false;
      }
    } else if (Value("--top_p", i, argc, argv, v)) {
      if (!ParseFloat("--top_p", v, 0, true, 1, "a number in (0, 1]", a.generate.sampling.top_p)) return false;
    } else if (Value("--seed", i, argc, argv, v)) {
      if (!ParseInt<uint64_t>("--seed", v, 0, std::numeric_limits<uint64_t>::max(),
                              "an integer in [0, 18446744073709551615]", a.generate.sampling.seed)) {
        return false;
      }
    } else if (Value("--max_new_tokens", i, argc, argv, v)) {
      if (!ParseInt<int>("--max_new_tokens", v, 0, std::numeric_limits<int>::max(),
                         "an integer in [0, 2147483647]", a.generate.max_new_tokens)) {
        return false;
      }
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
