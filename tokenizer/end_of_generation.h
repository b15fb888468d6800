// The loaders' end-of-generation parts (private to //tokenizer:tokenizer): the known
// end-of-turn texts among the added tokens, and a checkpoint's tokenizer_config.json and
// generation_config.json.
#ifndef DK_TOKENIZER_END_OF_GENERATION_H_
#define DK_TOKENIZER_END_OF_GENERATION_H_

#include <string>

#include "absl/status/status.h"
#include "tokenizer/tokenizer.h"

namespace dk::tokenizer {

// Adds to spec.eog_ids each special added token whose text IsKnownEndOfGenerationText.
void AddKnownEndOfGenerationIds(TokenizerSpec& spec);

// Reads `dir`/tokenizer_config.json (bos_token, eos_token: a token's text, or an object
// whose "content" is) into spec.bos_id / eos_id, and `dir`/generation_config.json
// (eos_token_id: an id or a list of ids) into spec.eog_ids. Either file may be absent;
// one that is present but malformed (not JSON, a key of the wrong type, a text naming no
// token, an id outside the vocabulary) is InvalidArgument naming the file and the key.
absl::Status AddCheckpointConfigs(const std::string& dir, TokenizerSpec& spec);

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_END_OF_GENERATION_H_
