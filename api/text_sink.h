// The text side of generation inside the Engine: each new token's bytes become whole
// UTF-8 characters (tokenizer::StreamingDecoder), held back while they could still be
// the start of a stop string (tokenizer::StopStrings), then appended to the result and
// passed to the user's callback.
#ifndef DECODEKIT_API_TEXT_SINK_H_
#define DECODEKIT_API_TEXT_SINK_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "api/decodekit.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace decodekit::internal {

class TextSink {
 public:
  TextSink(const dk::tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop_strings,
           const TextCallback& on_text, std::string* text);
  // Adds a new token's text. Ids past the tokenizer's vocabulary (a model's padded
  // rows) show as <id:N>.
  absl::Status Push(int32_t token);
  // The rest of the text, at the end of generation.
  void Finish();
  bool stop_string_seen() const { return stop_string_seen_; }
  bool callback_ended() const { return callback_ended_; }
  bool ended() const { return stop_string_seen_ || callback_ended_; }

 private:
  void Emit(const std::string& text);

  const dk::tokenizer::Tokenizer& tokenizer_;
  dk::tokenizer::StreamingDecoder decoder_;
  dk::tokenizer::StopStrings stops_;
  const TextCallback& on_text_;
  std::string* text_;
  bool stop_string_seen_ = false;
  bool callback_ended_ = false;
};

}  // namespace decodekit::internal

#endif  // DECODEKIT_API_TEXT_SINK_H_
