#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/utf8.h"

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
  auto check_id = [n](std::optional<int32_t> id, absl::string_view what) -> absl::Status {
    if (id.has_value() && (*id < 0 || *id >= n)) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", what, " id ", *id,
                                                     " is out of range [0, ", n, ")"));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = check_id(spec_.bos_id, "BOS"); !s.ok()) return s;
  if (absl::Status s = check_id(spec_.eos_id, "EOS"); !s.ok()) return s;
  if (absl::Status s = check_id(spec_.unk_id, "unknown-token"); !s.ok()) return s;
  for (int32_t id : spec_.prefix_ids) {
    if (absl::Status s = check_id(id, "post-processor"); !s.ok()) return s;
  }
  for (int32_t id : spec_.suffix_ids) {
    if (absl::Status s = check_id(id, "post-processor"); !s.ok()) return s;
  }

  token_to_id_.reserve(n);
  token_bytes_.reserve(n);
  for (int32_t id = 0; id < n; ++id) {
    // Later duplicates win, as in HF (a vocabulary built as a dict from the token list).
    token_to_id_.insert_or_assign(spec_.tokens[id], id);
    token_bytes_.push_back(ByteLevelDecode(spec_.tokens[id]));
  }
  for (int b = 0; b < 256; ++b) {
    std::string s;
    AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), &s);
    auto it = token_to_id_.find(s);
    byte_token_[b] = it == token_to_id_.end() ? -1 : it->second;
  }

  merges_.reserve(spec_.merges.size());
  for (size_t rank = 0; rank < spec_.merges.size(); ++rank) {
    const auto& [left, right] = spec_.merges[rank];
    const int32_t a = TokenToId(left), b = TokenToId(right);
    const int32_t merged = TokenToId(absl::StrCat(left, right));
    if (a < 0 || b < 0 || merged < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: merge #", rank, " '", left, " ", right, "' uses a token missing from the ",
          "vocabulary ('", a < 0 ? left : b < 0 ? right : absl::StrCat(left, right), "')"));
    }
    merges_.insert_or_assign(PairKey(a, b), Merge{static_cast<int32_t>(rank), merged});
  }

  added_by_first_byte_.assign(256, {});
  for (const TokenizerSpec::AddedToken& added : spec_.added_tokens) {
    if (absl::Status s = check_id(added.id, absl::StrCat("added token '", added.content, "'"));
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
    added_by_first_byte_[static_cast<uint8_t>(added.content[0])].push_back(&added);
  }
  for (auto& list : added_by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [](const auto* x, const auto* y) {
      return x->content.size() > y->content.size();
    });
  }

  absl::StatusOr<std::unique_ptr<PreTokenizer>> pt =
      PreTokenizer::Create(spec_.pre_tokenizer_patterns);
  if (!pt.ok()) return pt.status();
  pre_tokenizer_ = *std::move(pt);
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

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text,
                                                       bool add_special_tokens) const {
  if (absl::Status s = ValidateUtf8(text); !s.ok()) return s;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), spec_.prefix_ids.begin(), spec_.prefix_ids.end());

  // Added tokens first: leftmost match, longest first (HF's AddedVocabulary).
  size_t segment_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const auto& candidates = added_by_first_byte_[static_cast<uint8_t>(text[i])];
    const TokenizerSpec::AddedToken* match = nullptr;
    for (const TokenizerSpec::AddedToken* c : candidates) {
      if (text.substr(i, c->content.size()) == c->content) {
        match = c;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (absl::Status s = EncodeSegment(text.substr(segment_start, i - segment_start), &ids);
        !s.ok()) {
      return s;
    }
    ids.push_back(match->id);
    i += match->content.size();
    segment_start = i;
  }
  if (absl::Status s = EncodeSegment(text.substr(segment_start), &ids); !s.ok()) return s;

  if (add_special_tokens) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return ids;
}

absl::Status Tokenizer::EncodeSegment(absl::string_view segment,
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
  if (piece.size() == 1 && byte_token_[static_cast<uint8_t>(piece[0])] >= 0) {
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

absl::Status Tokenizer::Bpe(absl::string_view piece, std::vector<int32_t>* ids) const {
  if (spec_.ignore_merges) {
    std::string mapped;
    mapped.reserve(piece.size() * 2);
    for (char c : piece) AppendUtf8(ByteToUnicode(static_cast<uint8_t>(c)), &mapped);
    const int32_t whole = TokenToId(mapped);
    if (whole >= 0) {
      ids->push_back(whole);
      return absl::OkStatus();
    }
  }

  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    const uint8_t b = static_cast<uint8_t>(piece[i]);
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
    symbols[i] = Symbol{id, i - 1, i + 1 < n ? i + 1 : -1, true};
  }

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
  std::string bytes;
  for (int32_t id : ids) {
    absl::StatusOr<absl::string_view> b = TokenBytes(id);
    if (!b.ok()) return b.status();
    bytes.append(b->data(), b->size());
  }
  return Utf8Lossy(bytes);
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

}  // namespace dk::tokenizer
