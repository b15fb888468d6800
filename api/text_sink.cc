#include "api/text_sink.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "util/status.h"

namespace decodekit::internal {

TextSink::TextSink(const dk::tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop_strings,
                   const TextCallback& on_text, std::string* text)
    : tokenizer_(tokenizer), decoder_(tokenizer), stops_(std::move(stop_strings)), on_text_(on_text), text_(text) {}

absl::Status TextSink::Push(int32_t token) {
  std::string piece;
  if (token >= 0 && token < tokenizer_.vocab_size()) {
    DK_ASSIGN_OR_RETURN(piece, decoder_.Next(token));
  } else {
    piece = absl::StrCat(decoder_.Finish(), "<id:", token, ">");
  }
  Emit(stops_.Push(piece, &stop_string_seen_));
  return absl::OkStatus();
}

void TextSink::Finish() {
  if (stop_string_seen_) return;  // the text after the stop string is dropped
  bool stopped = false;
  std::string rest = stops_.Push(decoder_.Finish(), &stopped);
  if (!stopped) rest += stops_.Finish();
  stop_string_seen_ = stopped;
  Emit(rest);
}

void TextSink::Emit(const std::string& text) {
  if (text.empty()) return;
  text_->append(text);
  if (on_text_ && !callback_ended_ && !on_text_(text)) callback_ended_ = true;
}

}  // namespace decodekit::internal
