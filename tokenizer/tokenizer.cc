#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "tokenizer/utf8.h"
#include "util/printable.h"

namespace dk::tokenizer {
namespace {

constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = 1 << 18;

// Decodes a byte-level token string to bytes the way HF's ByteLevel decoder does: if every
// character is in the byte alphabet, the mapped bytes; otherwise the token's own UTF-8.
std::string ByteLevelDecode(absl::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    size_t len = 0;
    if (NextUtf8(token.substr(i), &len) != Utf8Step::kValid) return std::string(token);
    const int b = UnicodeToByte(DecodeUtf8(token.substr(i), &len));
    if (b < 0) return std::string(token);
    out.push_back(static_cast<char>(b));
    i += len;
  }
  return out;
}

// HF's ByteFallback test: "<0x" + two characters u8::from_str_radix(.., 16) accepts + ">".
// (Rust's from_str_radix also takes a leading '+', so "<0x+A>" is byte 0x0A.)
int ByteFallbackValue(absl::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  const int hi = hex(token[3]), lo = hex(token[4]);
  if (token[3] == '+' && lo >= 0) return lo;
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

// The per-token part of a decoder (its Replace and ByteFallback steps) for one token:
// the bytes it stands for on its own.
std::string StepsTokenBytes(absl::Span<const DecoderStep> steps, absl::string_view token,
                            bool* is_byte) {
  std::string out(token);
  *is_byte = false;
  for (const DecoderStep& step : steps) {
    if (*is_byte) break;
    if (step.kind == DecoderStep::Kind::kReplace) {
      absl::StrReplaceAll({{step.pattern, step.content}}, &out);
    } else if (step.kind == DecoderStep::Kind::kByteFallback) {
      const int b = ByteFallbackValue(out);
      if (b >= 0) {
        out = std::string(1, static_cast<char>(b));
        *is_byte = true;
      }
    }
  }
  return out;
}

// An id of `what` (when set) inside the vocabulary of `n` tokens.
absl::Status CheckId(int64_t n, std::optional<int32_t> id, absl::string_view what) {
  if (id.has_value() && (*id < 0 || *id >= n)) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", what, " id ", *id,
                                                   " is out of range [0, ", n, ")"));
  }
  return absl::OkStatus();
}

// The decoder's steps and the normalizer's, as the token-by-token decoder and
// Normalize need them.
absl::Status CheckSteps(const TokenizerSpec& spec) {
  if (spec.byte_level && !spec.decoder.empty()) {
    return absl::InvalidArgumentError(
        "tokenizer: a byte-level tokenizer decodes byte-level; it takes no decoder steps");
  }
  if (!spec.byte_level && spec.decoder.empty()) {
    return absl::InvalidArgumentError(
        "tokenizer: a tokenizer that is not byte-level needs decoder steps");
  }
  for (size_t i = 0; i < spec.decoder.size(); ++i) {
    const DecoderStep& step = spec.decoder[i];
    if (step.kind == DecoderStep::Kind::kReplace && step.pattern.empty()) {
      return absl::InvalidArgumentError("tokenizer: a Replace decoder has an empty pattern");
    }
    // Token by token is exact only for Replace steps, then ByteFallback, then Fuse.
    if (i > 0 && static_cast<int>(step.kind) <= static_cast<int>(spec.decoder[i - 1].kind) &&
        step.kind != DecoderStep::Kind::kReplace) {
      return absl::InvalidArgumentError(
          "tokenizer: decoder steps must be Replace..., then ByteFallback, then Fuse");
    }
    if (i > 0 && step.kind == DecoderStep::Kind::kReplace &&
        spec.decoder[i - 1].kind != DecoderStep::Kind::kReplace) {
      return absl::InvalidArgumentError(
          "tokenizer: decoder steps must be Replace..., then ByteFallback, then Fuse");
    }
  }
  for (const NormalizerStep& step : spec.normalizer) {
    if (step.kind == NormalizerStep::Kind::kReplace && step.pattern.empty()) {
      return absl::InvalidArgumentError("tokenizer: a Replace normalizer has an empty pattern");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->spec_ = std::move(spec);
  if (absl::Status s = t->Init(); !s.ok()) return s;
  return t;
}

absl::Status Tokenizer::Init() {
  const int64_t n = static_cast<int64_t>(spec_.tokens.size());
  if (n == 0) return absl::InvalidArgumentError("tokenizer: empty vocabulary");
  if (n > (int64_t{1} << 30)) return absl::InvalidArgumentError("tokenizer: vocabulary too large");
  if (absl::Status s = CheckId(n, spec_.bos_id, "BOS"); !s.ok()) return s;
  if (absl::Status s = CheckId(n, spec_.eos_id, "EOS"); !s.ok()) return s;
  if (absl::Status s = CheckId(n, spec_.unk_id, "unknown-token"); !s.ok()) return s;
  for (int32_t id : spec_.prefix_ids) {
    if (absl::Status s = CheckId(n, id, "post-processor"); !s.ok()) return s;
  }
  for (int32_t id : spec_.suffix_ids) {
    if (absl::Status s = CheckId(n, id, "post-processor"); !s.ok()) return s;
  }
  if (spec_.eos_id.has_value()) spec_.eog_ids.push_back(*spec_.eos_id);
  for (int32_t id : spec_.eog_ids) {
    if (absl::Status s = CheckId(n, id, "end-of-generation"); !s.ok()) return s;
  }
  std::sort(spec_.eog_ids.begin(), spec_.eog_ids.end());
  spec_.eog_ids.erase(std::unique(spec_.eog_ids.begin(), spec_.eog_ids.end()), spec_.eog_ids.end());
  if (absl::Status s = CheckSteps(spec_); !s.ok()) return s;

  BuildTokenTables();
  if (absl::Status s = BuildMerges(); !s.ok()) return s;
  if (absl::Status s = BuildAddedTables(); !s.ok()) return s;

  absl::StatusOr<std::unique_ptr<PreTokenizer>> pt =
      PreTokenizer::Create(spec_.pre_tokenizer_patterns, spec_.pre_tokenizer_behaviors);
  if (!pt.ok()) return pt.status();
  pre_tokenizer_ = *std::move(pt);
  return absl::OkStatus();
}

void Tokenizer::BuildTokenTables() {
  const int32_t n = static_cast<int32_t>(spec_.tokens.size());
  token_to_id_.reserve(n);
  token_bytes_.reserve(n);
  is_byte_fallback_token_.assign(n, false);
  for (int32_t id = 0; id < n; ++id) {
    // Later duplicates win, as in HF (a vocabulary built as a dict from the token list).
    token_to_id_.insert_or_assign(spec_.tokens[id], id);
    if (spec_.byte_level) {
      token_bytes_.push_back(ByteLevelDecode(spec_.tokens[id]));
    } else {
      bool is_byte = false;
      token_bytes_.push_back(StepsTokenBytes(spec_.decoder, spec_.tokens[id], &is_byte));
      is_byte_fallback_token_[id] = is_byte;
    }
  }
  for (int b = 0; b < 256; ++b) {
    std::string s;
    AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), &s);
    auto it = token_to_id_.find(s);
    byte_token_[b] = spec_.byte_level && it != token_to_id_.end() ? it->second : -1;
    // HF looks up format!("<{b:#04X}>"): "<0x" and two upper-case hex digits.
    it = token_to_id_.find(absl::StrFormat("<0x%02X>", b));
    byte_fallback_token_[b] = it == token_to_id_.end() ? -1 : it->second;
  }
}

absl::Status Tokenizer::BuildMerges() {
  if (spec_.merges_from_vocab) {
    if (!spec_.merges.empty()) {
      return absl::InvalidArgumentError(
          "tokenizer: merges are given and also to be derived from the vocabulary");
    }
    BuildMergesFromVocab();
    return absl::OkStatus();
  }
  merges_.reserve(spec_.merges.size());
  for (size_t rank = 0; rank < spec_.merges.size(); ++rank) {
    const auto& [left, right] = spec_.merges[rank];
    const int32_t a = TokenToId(left), b = TokenToId(right);
    const int32_t merged = TokenToId(absl::StrCat(left, right));
    if (a < 0 || b < 0 || merged < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: merge #", rank, " '", Printable(left), " ", Printable(right),
          "' uses a token missing from the vocabulary ('",
          Printable(a < 0 ? left : b < 0 ? right : absl::StrCat(left, right)), "')"));
    }
    merges_.insert_or_assign(PairKey(a, b), Merge{static_cast<int32_t>(rank), merged});
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::BuildAddedTables() {
  const int64_t n = static_cast<int64_t>(spec_.tokens.size());
  raw_added_.assign(256, {});
  normalized_added_.assign(256, {});
  for (const TokenizerSpec::AddedToken& added : spec_.added_tokens) {
    if (absl::Status s = CheckId(n, added.id, absl::StrCat("added token '", added.content, "'"));
        !s.ok()) {
      return s;
    }
    if (added.content.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: added token ", added.id, " has empty content"));
    }
    if (absl::Status s = ValidateUtf8(added.content); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: added token ", added.id,
                                                     " is not valid UTF-8"));
    }
    if (!added.normalized) {
      raw_added_[static_cast<uint8_t>(added.content[0])].push_back({added.content, added.id});
      continue;
    }
    // HF matches a normalized added token by its normalized content.
    absl::StatusOr<std::string> content = Normalize(spec_.normalizer, added.content);
    if (!content.ok()) return content.status();
    if (content->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: added token ", added.id, " is empty once normalized"));
    }
    normalized_added_[static_cast<uint8_t>((*content)[0])].push_back({*content, added.id});
    has_normalized_added_ = true;
  }
  for (AddedTable* table : {&raw_added_, &normalized_added_}) {
    for (auto& list : *table) {
      std::stable_sort(list.begin(), list.end(), [](const AddedMatch& x, const AddedMatch& y) {
        return x.content.size() > y.content.size();
      });
    }
  }
  return absl::OkStatus();
}

int32_t Tokenizer::TokenToId(absl::string_view token) const {
  auto it = token_to_id_.find(token);
  return it == token_to_id_.end() ? -1 : it->second;
}

absl::StatusOr<absl::string_view> Tokenizer::TokenString(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is out of range [0, ", vocab_size(), ")"));
  }
  return absl::string_view(spec_.tokens[id]);
}

absl::StatusOr<absl::string_view> Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is out of range [0, ", vocab_size(), ")"));
  }
  return absl::string_view(token_bytes_[id]);
}

template <typename OnText>
absl::Status Tokenizer::SplitOnAdded(const AddedTable& table, absl::string_view text,
                                     std::vector<int32_t>* ids, OnText on_text) const {
  // Leftmost match, longest first (HF's AddedVocabulary).
  size_t segment_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const AddedMatch* match = nullptr;
    for (const AddedMatch& c : table[static_cast<uint8_t>(text[i])]) {
      if (text.substr(i, c.content.size()) == c.content) {
        match = &c;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (absl::Status s = on_text(text.substr(segment_start, i - segment_start)); !s.ok()) {
      return s;
    }
    ids->push_back(match->id);
    i += match->content.size();
    segment_start = i;
  }
  return on_text(text.substr(segment_start));
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text,
                                                       bool add_special_tokens) const {
  if (absl::Status s = ValidateUtf8(text); !s.ok()) return s;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), spec_.prefix_ids.begin(), spec_.prefix_ids.end());
  if (absl::Status s = SplitOnAdded(raw_added_, text, &ids,
                                    [&](absl::string_view segment) {
                                      return EncodeSegment(segment, &ids);
                                    });
      !s.ok()) {
    return s;
  }
  if (add_special_tokens) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return ids;
}

absl::Status Tokenizer::EncodeSegment(absl::string_view segment,
                                      std::vector<int32_t>* ids) const {
  if (segment.empty()) return absl::OkStatus();
  std::string normalized;
  if (!spec_.normalizer.empty()) {
    absl::StatusOr<std::string> n = Normalize(spec_.normalizer, segment);
    if (!n.ok()) return n.status();
    normalized = *std::move(n);
    segment = normalized;
  }
  if (!has_normalized_added_) return EncodeNormalized(segment, ids);
  return SplitOnAdded(normalized_added_, segment, ids, [&](absl::string_view text) {
    return EncodeNormalized(text, ids);
  });
}

absl::Status Tokenizer::EncodeNormalized(absl::string_view segment,
                                         std::vector<int32_t>* ids) const {
  if (segment.empty()) return absl::OkStatus();
  std::string prefixed;
  if (spec_.add_prefix_space && segment[0] != ' ') {
    prefixed = absl::StrCat(" ", segment);
    segment = prefixed;
  }
  std::vector<absl::string_view> pieces;
  pieces.reserve(segment.size() / 4 + 1);
  pre_tokenizer_->Split(segment, &pieces);
  for (absl::string_view piece : pieces) {
    if (absl::Status s = EncodePiece(piece, ids); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodePiece(absl::string_view piece, std::vector<int32_t>* ids) const {
  if (spec_.byte_level && piece.size() == 1 && byte_token_[static_cast<uint8_t>(piece[0])] >= 0) {
    ids->push_back(byte_token_[static_cast<uint8_t>(piece[0])]);
    return absl::OkStatus();
  }
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return absl::OkStatus();
    }
  }
  const size_t before = ids->size();
  if (absl::Status s = Bpe(piece, ids); !s.ok()) return s;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::vector<int32_t>(ids->begin() + before, ids->end()));
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::ByteSymbols(absl::string_view piece,
                                    std::vector<int32_t>* symbols) const {
  for (char c : piece) {
    const uint8_t b = static_cast<uint8_t>(c);
    int32_t id = byte_token_[b];
    if (id < 0) {
      if (!spec_.unk_id.has_value()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "tokenizer: byte 0x%02x has no token in the vocabulary and there is no unknown "
            "token",
            b));
      }
      id = *spec_.unk_id;
    }
    symbols->push_back(id);
  }
  return absl::OkStatus();
}

// HF BPE's merge_word: one symbol per character in the vocabulary; a missing character
// becomes its bytes' <0xXX> tokens (byte_fallback, when all exist) or the unknown token,
// consecutive unknowns fused into one (fuse_unk). As in HF, an unknown still pending is
// only added at the next character found in the vocabulary (or at the end), after any
// byte-fallback tokens in between.
absl::Status Tokenizer::CharSymbols(absl::string_view piece,
                                    std::vector<int32_t>* symbols) const {
  bool unk_pending = false;
  size_t i = 0;
  while (i < piece.size()) {
    size_t len = 0;
    if (NextUtf8(piece.substr(i), &len) != Utf8Step::kValid) {
      return absl::InternalError("tokenizer: a normalized piece is not valid UTF-8");
    }
    const absl::string_view ch = piece.substr(i, len);
    i += len;
    if (const int32_t id = TokenToId(ch); id >= 0) {
      if (unk_pending) symbols->push_back(*spec_.unk_id);
      unk_pending = false;
      symbols->push_back(id);
      continue;
    }
    if (spec_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_fallback_token_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : ch) symbols->push_back(byte_fallback_token_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (!spec_.unk_id.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: character '", ch, "' has no token in the vocabulary",
          spec_.byte_fallback ? " nor byte-fallback tokens" : "",
          " and there is no unknown token"));
    }
    if (unk_pending && !spec_.fuse_unk) symbols->push_back(*spec_.unk_id);
    unk_pending = true;
  }
  if (unk_pending) symbols->push_back(*spec_.unk_id);
  return absl::OkStatus();
}

absl::Status Tokenizer::Bpe(absl::string_view piece, std::vector<int32_t>* ids) const {
  if (spec_.ignore_merges) {
    std::string mapped;
    if (spec_.byte_level) {
      mapped.reserve(piece.size() * 2);
      for (char c : piece) AppendUtf8(ByteToUnicode(static_cast<uint8_t>(c)), &mapped);
    } else {
      mapped = std::string(piece);
    }
    const int32_t whole = TokenToId(mapped);
    if (whole >= 0) {
      ids->push_back(whole);
      return absl::OkStatus();
    }
  }

  std::vector<int32_t> initial;
  initial.reserve(piece.size());
  if (absl::Status s = spec_.byte_level ? ByteSymbols(piece, &initial)
                                        : CharSymbols(piece, &initial);
      !s.ok()) {
    return s;
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  const int32_t n = static_cast<int32_t>(initial.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) symbols[i] = Symbol{initial[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  // HF's BPE word merge: a min-heap on (rank, position).
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) heap.push(Candidate{it->second.rank, pos, it->second.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = symbols[cur.next];
    auto it = merges_.find(PairKey(cur.id, right.id));
    if (it == merges_.end() || it->second.id != top.new_id) continue;
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) symbols[cur.next].prev = top.pos;
    if (cur.prev >= 0) push_pair(cur.prev);
    push_pair(top.pos);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = symbols[i].next) ids->push_back(symbols[i].id);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  for (int32_t id : ids) {
    if (absl::StatusOr<absl::string_view> b = TokenBytes(id); !b.ok()) return b.status();
  }
  if (!spec_.byte_level) return DecodeSteps(ids);
  std::string bytes;
  for (int32_t id : ids) bytes.append(token_bytes_[id]);
  return Utf8Lossy(bytes);
}

// HF's decode_chain: Replace in each token; ByteFallback turns each run of <0xXX> tokens
// into its bytes if they are valid UTF-8, else into one U+FFFD per token; Fuse (and the
// final join) concatenate. Both per-token steps are already applied in token_bytes_.
std::string Tokenizer::DecodeSteps(absl::Span<const int32_t> ids) const {
  std::string out;
  std::string run;  // bytes of the current run of byte-fallback tokens
  auto flush = [&] {
    if (run.empty()) return;
    if (ValidateUtf8(run).ok()) {
      out.append(run);
    } else {
      for (size_t k = 0; k < run.size(); ++k) out.append("\xEF\xBF\xBD");
    }
    run.clear();
  };
  for (int32_t id : ids) {
    if (is_byte_fallback_token_[id]) {
      run.append(token_bytes_[id]);
      continue;
    }
    flush();
    out.append(token_bytes_[id]);
  }
  flush();
  return out;
}

absl::StatusOr<std::string> StreamingDecoder::Next(int32_t id) {
  absl::StatusOr<absl::string_view> b = tokenizer_.TokenBytes(id);
  if (!b.ok()) return b.status();
  pending_.append(b->data(), b->size());
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t len = 0;
    const Utf8Step step = NextUtf8(absl::string_view(pending_).substr(i), &len);
    if (step == Utf8Step::kIncomplete) break;
    if (step == Utf8Step::kValid) {
      out.append(pending_, i, len);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += len;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamingDecoder::Finish() {
  std::string out = Utf8Lossy(pending_);
  pending_.clear();
  return out;
}

absl::Status CheckTokenizerFitsModel(const Tokenizer& tokenizer, int64_t model_vocab,
                                     absl::string_view tokenizer_path, absl::string_view model_what) {
  if (tokenizer.vocab_size() <= model_vocab) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "tokenizer ", tokenizer_path, " has ", tokenizer.vocab_size(), " tokens but ", model_what, " has a vocabulary of ",
      model_vocab, ": it is not this model's tokenizer (its ids would index past the embedding table)"));
}

}  // namespace dk::tokenizer
