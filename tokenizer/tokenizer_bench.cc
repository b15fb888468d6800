// Encoding throughput on ~1 MB of English-like text with the SmolLM2 tokenizer.
//
//   ./bazelw run -c opt //tokenizer:tokenizer_bench
//
// The text is generated deterministically: sentences of common English words (Zipf-like),
// mixed with rarer words assembled from the vocabulary's alphabetic tokens (so that many
// pre-tokenized pieces miss the BPE cache), numbers, punctuation and paragraph breaks.
// BM_Encode1MB reuses one tokenizer (warm cache, the steady state); BM_Encode1MBColdCache
// builds a fresh tokenizer per iteration outside the timed region, so every distinct
// piece goes through BPE once.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "benchmark/benchmark.h"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "weights/gguf.h"

namespace dk::tokenizer {
namespace {

constexpr const char* kCommonWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with", "be",
    "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which", "but",
    "have", "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her",
    "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no", "time",
    "people", "language", "model", "system", "world", "between", "through", "because",
    "different", "important", "government", "development", "information", "however",
    "example", "research", "question", "children", "students", "history", "computer",
    "science", "water", "number", "always", "something", "understand", "everything",
    "During", "The", "In", "However", "It's", "don't", "we'll", "they're", "I've"};

std::string MakeText(const Tokenizer& tok, size_t bytes) {
  // Rarer words from the vocabulary's alphabetic "Ġword" tokens.
  std::vector<std::string> rare;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    absl::string_view t = *tok.TokenString(id);
    if (t.size() > 3 && t.substr(0, 2) == "\xC4\xA0") {
      absl::string_view w = t.substr(2);
      bool alpha = true;
      for (char c : w) alpha = alpha && absl::ascii_isalpha(static_cast<unsigned char>(c));
      if (alpha) rare.emplace_back(w);
    }
  }
  std::mt19937 rng(42);
  const size_t n_common = sizeof(kCommonWords) / sizeof(kCommonWords[0]);
  std::string text;
  text.reserve(bytes + 256);
  int words_in_sentence = 0;
  while (text.size() < bytes) {
    const uint32_t r = rng() % 100;
    if (words_in_sentence > 0) text += ' ';
    if (r < 75) {
      // Zipf-ish: low indexes much more often.
      const size_t i = static_cast<size_t>(std::pow(rng() % 10000 / 10000.0, 2.5) * n_common);
      text += kCommonWords[i];
    } else if (r < 92) {
      text += rare[rng() % rare.size()];
      if (rng() % 3 == 0) text += rare[rng() % rare.size()];  // a compound, likely uncached
    } else if (r < 96) {
      text += std::to_string(rng() % 100000);
    } else {
      text += "(see";
      text += kCommonWords[rng() % n_common];
      text += ")";
    }
    if (++words_in_sentence > 8 + static_cast<int>(rng() % 15)) {
      text += (rng() % 5 == 0) ? "?" : ".";
      words_in_sentence = 0;
      text += (rng() % 6 == 0) ? "\n\n" : " ";
    }
  }
  text.resize(bytes);
  while (!text.empty() && (static_cast<uint8_t>(text.back()) & 0x80)) text.pop_back();
  return text;
}

std::string g_argv0;

std::string GgufPath() {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> rf(
      bazel::tools::cpp::runfiles::Runfiles::Create(g_argv0, &error));
  return rf == nullptr ? "" : rf->Rlocation("smollm2_135m/model.gguf");
}

std::unique_ptr<Tokenizer> LoadTokenizer() {
  auto gguf = weights::GgufFile::Open(GgufPath());
  if (!gguf.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**gguf);
  return tok.ok() ? *std::move(tok) : nullptr;
}

void BM_Encode1MB(benchmark::State& state) {
  std::unique_ptr<Tokenizer> tok = LoadTokenizer();
  if (tok == nullptr) {
    state.SkipWithError("cannot load the SmolLM2 tokenizer");
    return;
  }
  const std::string text = MakeText(*tok, 1 << 20);
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(text);
    if (!ids.ok()) {
      state.SkipWithError("encode failed");
      return;
    }
    n_tokens = ids->size();
    benchmark::DoNotOptimize(ids->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * text.size());
  state.counters["tokens"] = static_cast<double>(n_tokens);
}
BENCHMARK(BM_Encode1MB)->Unit(benchmark::kMillisecond);

void BM_Encode1MBColdCache(benchmark::State& state) {
  std::unique_ptr<Tokenizer> tok = LoadTokenizer();
  if (tok == nullptr) {
    state.SkipWithError("cannot load the SmolLM2 tokenizer");
    return;
  }
  const std::string text = MakeText(*tok, 1 << 20);
  for (auto _ : state) {
    state.PauseTiming();
    tok = LoadTokenizer();
    state.ResumeTiming();
    auto ids = tok->Encode(text);
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * text.size());
}
BENCHMARK(BM_Encode1MBColdCache)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_LoadFromGguf(benchmark::State& state) {
  for (auto _ : state) {
    std::unique_ptr<Tokenizer> tok = LoadTokenizer();
    if (tok == nullptr) {
      state.SkipWithError("cannot load the SmolLM2 tokenizer");
      return;
    }
    benchmark::DoNotOptimize(tok.get());
  }
}
BENCHMARK(BM_LoadFromGguf)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dk::tokenizer

int main(int argc, char** argv) {
  dk::tokenizer::g_argv0 = argv[0];
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
