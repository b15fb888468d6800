// Merges derived from a SentencePiece vocabulary (TokenizerSpec::merges_from_vocab).
#include <cstdint>

#include "absl/strings/string_view.h"
#include "tokenizer/tokenizer.h"

namespace dk::tokenizer {

// SentencePiece BPE merges the adjacent pair whose concatenation is the best-scored
// vocabulary token. HF expresses that as ranked merges: for each token in rank order,
// each way to cut it into two vocabulary tokens, the longer left part first
// (transformers' generate_merges, sorting by (score, len(left), len(right)) descending).
// For Gemma the key is the token's position (its normal tokens' scores fall with the id,
// so that is highest score first; its whitespace runs score -1000 but sit at ids
// 138..167, and HF merges them by position), so the rank order is id order here.
// Cuts are at character boundaries, as Python slices a str.
void Tokenizer::BuildMergesFromVocab() {
  int32_t rank = 0;
  const int32_t n = vocab_size();
  merges_.reserve(static_cast<size_t>(n) * 2);  // Gemma 3: 514,906 merges, 262,144 tokens
  for (int32_t id = 0; id < n; ++id) {
    const absl::string_view token = spec_.tokens[id];
    // A duplicated token is one vocabulary entry, keyed at the id it maps to (the last).
    if (TokenToId(token) != id) continue;
    for (size_t cut = token.size() - (token.empty() ? 0 : 1); cut > 0; --cut) {
      if ((static_cast<uint8_t>(token[cut]) & 0xC0) == 0x80) continue;  // inside a character
      const int32_t left = TokenToId(token.substr(0, cut));
      if (left < 0) continue;
      const int32_t right = TokenToId(token.substr(cut));
      if (right < 0) continue;
      merges_.insert_or_assign(PairKey(left, right), Merge{rank++, id});
    }
  }
}

}  // namespace dk::tokenizer
