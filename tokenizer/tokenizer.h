// BPE tokenizer (GPT-2 / SmolLM2 / Llama 3 / Qwen2 byte-level, and Gemma 3's SentencePiece
// BPE with byte fallback), exact against HuggingFace `tokenizers`.
//
// Loading:
//   * Tokenizer::FromGguf: a GGUF file's `tokenizer.ggml.*` metadata. Model "gpt2": tokens,
//     merges, token_type, bos/eos ids, add_bos_token/add_eos_token, and `pre`, the
//     pre-tokenizer name: "smollm", "gpt2", "llama-bpe"/"llama3"/"llama-v3". Model "llama"
//     (SentencePiece BPE) in Gemma's layout (general.architecture gemma/gemma2/gemma3), as
//     transformers builds it from the file: no merges stored, so they are derived from the
//     vocabulary (TokenizerSpec::merges_from_vocab); whitespace-run tokens the file spells
//     with spaces respelled with "▁"; BOS added unless add_bos_token is false.
//   * Tokenizer::FromTokenizerJson: an HF tokenizer.json (model BPE with vocab + merges,
//     byte_fallback, fuse_unk, ignore_merges; normalizer NFC / Replace / Sequence;
//     pre_tokenizer ByteLevel / Split (Isolated, MergedWithPrevious) / Digits / Sequence;
//     decoder ByteLevel, or a Sequence of Replace / ByteFallback / Fuse; added tokens;
//     post_processor TemplateProcessing / ByteLevel / Sequence).
//   * Tokenizer::Load(path): a .gguf file, a tokenizer.json file, or a checkpoint directory
//     holding tokenizer.json. Next to a tokenizer.json (in the directory, or beside a file
//     named tokenizer.json), tokenizer_config.json names the BOS/EOS tokens and
//     generation_config.json lists the end-of-generation ids.
//
// End of generation (end_of_generation_ids): a model ends its answer with one of several
// tokens, rarely only the tokenizer's EOS (Llama 3 Instruct: <|eot_id|>, Qwen: <|im_end|>,
// Gemma: <end_of_turn>). The set is the EOS id; from a GGUF, tokenizer.ggml.eot_token_id and
// eom_token_id; from a checkpoint, generation_config.json's eos_token_id (an id or a list);
// and, from either, every special (GGUF: control) token whose text is a known end-of-turn
// token (the texts llama.cpp's vocabulary loader treats as end of generation), since files
// often name only one of them.
//
// Encoding (as HF does): added tokens that are not `normalized` (all special tokens, e.g.
// <|im_start|>, <|eot_id|>, <bos>) are matched as whole tokens anywhere in the raw input
// (leftmost, longest first); the text between them is normalized (NFC, Replace), then
// `normalized` added tokens are matched the same way in the normalized text; what remains
// is pre-tokenized with the model's regexes and BPE-merged by merge rank, piece by piece.
// Byte-level tokenizers (a ByteLevel pre-tokenizer; every "gpt2" GGUF) map each piece to the GPT-2
// byte alphabet first; the others (Gemma) start BPE from the piece's characters, a
// character missing from the vocabulary becoming its UTF-8 bytes' <0xXX> tokens
// (byte_fallback) or the unknown token (consecutive ones fused into one with fuse_unk).
// With add_special_tokens, BOS/EOS are added the way the model's HF tokenizer adds them
// (GGUF: tokenizer.ggml.add_bos_token / add_eos_token; tokenizer.json: its
// TemplateProcessing post-processor). SmolLM2 and Qwen add no BOS; Llama 3 and Gemma do.
//
// Invalid UTF-8 input is REJECTED: Encode returns InvalidArgument naming the byte offset of
// the first ill-formed sequence (HF's Python API cannot even receive such input).
//
// Decoding: ids out of [0, vocab_size) are an InvalidArgument error. Byte-level: bytes that
// do not form valid UTF-8 (e.g. a prefix of a multi-byte character) are replaced by U+FFFD,
// one per maximal ill-formed subpart, exactly like HF's ByteLevel decoder. Otherwise the
// decoder's steps run as HF runs them (Replace "▁" -> " "; ByteFallback: a run of <0xXX>
// tokens becomes its bytes if they are valid UTF-8, else one U+FFFD per token; Fuse).
// StreamingDecoder emits text incrementally and never emits half a character: an incomplete
// trailing character is held back until the next token completes it (or Finish() replaces
// it by U+FFFD; for byte-fallback tokens that is one U+FFFD per maximal ill-formed subpart,
// where Decode follows HF's one per byte).
//
// Tokenizer is immutable after loading and thread-safe (the BPE cache is mutex-guarded).
#ifndef DK_TOKENIZER_TOKENIZER_H_
#define DK_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "weights/gguf.h"

namespace dk::tokenizer {

// A step of a decoder that is not ByteLevel (HF's Replace, ByteFallback, Fuse).
struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse };
  Kind kind = Kind::kFuse;
  std::string pattern;  // kReplace: the literal replaced in each token; never empty
  std::string content;  // kReplace: its replacement
};

// Everything a BPE tokenizer is made of; the loaders fill this in.
struct TokenizerSpec {
  // Token strings indexed by id: in the byte-level alphabet (e.g. "Ġworld") when
  // byte_level, else plain UTF-8 (e.g. "▁world", "<0x0A>").
  std::vector<std::string> tokens;
  // Merge rules in rank order: (left token, right token).
  std::vector<std::pair<std::string, std::string>> merges;
  // A SentencePiece vocabulary stores no merges: when set (and `merges` is empty), every
  // split of a token into two vocabulary tokens is a merge, ranked by the merged token's
  // id (lower first), then by the longer left part; the order transformers derives for
  // Gemma's GGUF vocabulary (its generate_merges over token positions).
  bool merges_from_vocab = false;
  struct AddedToken {
    int32_t id = 0;
    std::string content;
    bool special = true;
    // HF's `normalized`: matched in the normalized text (content normalized too) rather
    // than in the raw input.
    bool normalized = false;
  };
  // Tokens matched whole in the input before pre-tokenization.
  std::vector<AddedToken> added_tokens;
  // Normalization of the text between non-normalized added tokens (empty: none).
  std::vector<NormalizerStep> normalizer;
  // Regex splits in order (HF/Oniguruma syntax; see pre_tokenizer.h).
  std::vector<std::string> pre_tokenizer_patterns;
  // Parallel to pre_tokenizer_patterns; a missing entry is kIsolated.
  std::vector<SplitBehavior> pre_tokenizer_behaviors;
  // Byte-level BPE (ByteLevel pre-tokenizer and decoder). When false, BPE starts from
  // characters and `decoder` decodes.
  bool byte_level = true;
  // Not byte_level: a character missing from the vocabulary becomes its bytes' <0xXX>
  // tokens (when all of them exist) instead of the unknown token.
  bool byte_fallback = false;
  // Not byte_level: consecutive unknown characters become one unknown token.
  bool fuse_unk = false;
  // Not byte_level: the decoder's steps (ByteLevel tokenizers decode byte-level).
  std::vector<DecoderStep> decoder;
  // ByteLevel add_prefix_space: prepend ' ' to text segments not starting with one.
  bool add_prefix_space = false;
  // HF BPE ignore_merges: a piece that is itself a vocabulary token is not merged.
  bool ignore_merges = false;
  // Ids added around the encoded text when add_special_tokens is true (e.g. BOS).
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> unk_id;
  // Ids that end generation (see the top of this file). Tokenizer::Create sorts them, drops
  // repeats, adds eos_id and refuses one out of [0, tokens.size()).
  std::vector<int32_t> eog_ids;
};

// Whether `text` is a special token's text that ends a turn or the text in some model
// family (e.g. "<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|endoftext|>").
bool IsKnownEndOfGenerationText(absl::string_view text);

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  static absl::StatusOr<TokenizerSpec> SpecFromGguf(const weights::GgufFile& gguf);
  static absl::StatusOr<TokenizerSpec> SpecFromTokenizerJson(absl::string_view json_text);

  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const weights::GgufFile& gguf);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromTokenizerJson(
      absl::string_view json_text);
  // A .gguf file, a tokenizer.json file, or a directory containing tokenizer.json.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);

  // Text -> ids. add_special_tokens: add BOS/EOS as the model's HF tokenizer does.
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool add_special_tokens = true) const;
  // Ids -> text (special tokens are kept as their text).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const;

  // The token string as stored in the vocabulary (e.g. "Ġworld"); InvalidArgument if out
  // of range.
  absl::StatusOr<absl::string_view> TokenString(int32_t id) const;
  // The raw bytes a token decodes to (may be part of a UTF-8 character).
  absl::StatusOr<absl::string_view> TokenBytes(int32_t id) const;
  // -1 when absent.
  int32_t TokenToId(absl::string_view token) const;

  int32_t vocab_size() const { return static_cast<int32_t>(spec_.tokens.size()); }
  std::optional<int32_t> bos_id() const { return spec_.bos_id; }
  std::optional<int32_t> eos_id() const { return spec_.eos_id; }
  // Every id that ends generation, sorted (eos_id among them when set).
  absl::Span<const int32_t> end_of_generation_ids() const { return spec_.eog_ids; }
  bool IsEndOfGeneration(int32_t id) const;
  const TokenizerSpec& spec() const { return spec_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };

  Tokenizer() = default;
  absl::Status Init();
  // Init's parts, run after the spec is validated: the vocabulary's lookup tables,
  // the merge ranks, the added-token tables.
  void BuildTokenTables();
  absl::Status BuildMerges();
  // BuildMerges for spec_.merges_from_vocab (vocab_merges.cc).
  void BuildMergesFromVocab();
  absl::Status BuildAddedTables();
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Encodes one text segment that holds no added token.
  absl::Status EncodeSegment(absl::string_view segment, std::vector<int32_t>* ids) const;
  // Encodes normalized text that holds no added token.
  absl::Status EncodeNormalized(absl::string_view text, std::vector<int32_t>* ids) const;
  // BPE of one pre-tokenized piece (raw bytes), cached.
  absl::Status EncodePiece(absl::string_view piece, std::vector<int32_t>* ids) const;
  absl::Status Bpe(absl::string_view piece, std::vector<int32_t>* ids) const;
  // The symbols BPE starts from: one per byte (byte-level) or per character.
  absl::Status ByteSymbols(absl::string_view piece, std::vector<int32_t>* symbols) const;
  absl::Status CharSymbols(absl::string_view piece, std::vector<int32_t>* symbols) const;
  // Decode through `spec_.decoder` (not byte_level).
  std::string DecodeSteps(absl::Span<const int32_t> ids) const;

  // Added tokens matched in one pass, by first byte, longest first.
  struct AddedMatch {
    std::string content;
    int32_t id;
  };
  using AddedTable = std::vector<std::vector<AddedMatch>>;
  // Calls on_text for each stretch of `text` between added tokens of `table` and pushes
  // the tokens' ids to `ids` in order.
  template <typename OnText>
  absl::Status SplitOnAdded(const AddedTable& table, absl::string_view text,
                            std::vector<int32_t>* ids, OnText on_text) const;

  TokenizerSpec spec_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  int32_t byte_token_[256];           // byte_level: the single-byte token, -1 if none
  int32_t byte_fallback_token_[256];  // the <0xXX> token, -1 if none
  std::vector<std::string> token_bytes_;  // what each id decodes to on its own
  std::vector<bool> is_byte_fallback_token_;  // decoded by ByteFallback (not byte_level)
  AddedTable raw_added_;         // not `normalized`: matched in the raw input
  AddedTable normalized_added_;  // `normalized`: matched after normalization
  bool has_normalized_added_ = false;

  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mu_);
};

// Incremental decoding for generation: Next(id) returns the text that became complete.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Appends `id`'s bytes; returns the newly complete text (possibly empty). Never returns
  // part of a UTF-8 character; ill-formed bytes come out as U+FFFD.
  absl::StatusOr<std::string> Next(int32_t id);
  // Flushes held bytes (an incomplete character becomes U+FFFD) and resets.
  std::string Finish();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

// The tokenizer at `tokenizer_path` against a model of `model_vocab` embedding rows
// (`model_what` names it, e.g. the ELF): refused when the tokenizer has more tokens than
// the model has rows, since its ids would index past the table; the error names both
// files and both sizes. Fewer tokens than rows is accepted: models pad their vocabulary
// (Qwen2.5: 151,936 rows for 151,665 tokens), and ids past the tokenizer's are shown as
// <id:N> by the tools.
absl::Status CheckTokenizerFitsModel(const Tokenizer& tokenizer, int64_t model_vocab,
                                     absl::string_view tokenizer_path, absl::string_view model_what);

}  // namespace dk::tokenizer

#endif  // DK_TOKENIZER_TOKENIZER_H_
