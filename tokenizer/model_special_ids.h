// The special token ids a model's own files name (BOS, EOS, end of turn), for checking
// a tokenizer that is given beside the weights. A tokenizer of the model's vocabulary
// size but another model's ids passes the vocabulary check (CheckTokenizerFitsModel),
// yet starts every prompt with the wrong BOS and never stops at the model's EOS.
#ifndef DK_TOKENIZER_MODEL_SPECIAL_IDS_H_
#define DK_TOKENIZER_MODEL_SPECIAL_IDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/tokenizer.h"

namespace dk::tokenizer {

struct ModelSpecialIds {
  std::string source;  // the file(s) the ids come from, for messages
  std::optional<int64_t> bos;
  std::vector<int64_t> eos;  // EOS and end-of-turn ids: any of them ends generation
};

// The ids the weights at `weights_spec` name: a GGUF's tokenizer.ggml.bos_token_id and
// eos / eot / eom_token_id; an HF checkpoint directory's config.json bos_token_id and
// eos_token_id and generation_config.json eos_token_id (an id or a list). nullopt for
// synthetic weights ("synthetic[:SEED]"), which name none. A key of the wrong type is an
// error naming the file and the key.
absl::StatusOr<std::optional<ModelSpecialIds>> ReadModelSpecialIds(const std::string& weights_spec);

// Refuses `tokenizer` when its BOS differs from the model's (both have one), or when it
// names an EOS and none of its end-of-generation ids (that EOS among them) is one of
// the model's EOS / end-of-turn ids.
// The error names both files and the ids.
absl::Status CheckTokenizerSpecialIds(const Tokenizer& tokenizer, const ModelSpecialIds& model,
                                      absl::string_view tokenizer_path);

// ReadModelSpecialIds then CheckTokenizerSpecialIds: what a tool runs after loading a
// tokenizer for the weights at `weights_spec`.
absl::Status CheckTokenizerMatchesWeights(const Tokenizer& tokenizer, absl::string_view tokenizer_path,
                                          const std::string& weights_spec);

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_MODEL_SPECIAL_IDS_H_
