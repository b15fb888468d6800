// The OpenAI HTTP API's requests and responses as tools/serve speaks them: a request
// body parsed and checked into decodekit's options, and the JSON of the replies
// (whole, or as server-sent-event chunks). No I/O and no engine here, so each rule is
// testable on its own (openai_api_test).
//
// What is taken (everything else in a body is ignored, as llama-server does):
//   both endpoints: model, max_tokens (chat: max_completion_tokens too), temperature,
//     top_p, seed, stop (a string or up to 4), stream, stream_options.include_usage, and
//     the extensions llama-server also takes: top_k, min_p, repetition_penalty,
//     ignore_eos;
//   /v1/completions: prompt (a string, or a list of one string);
//   /v1/chat/completions: messages (role system / developer / user / assistant;
//     content a string or a list of {"type": "text"} parts).
// Refused with a 400 naming the parameter rather than silently ignored: n != 1,
// non-zero frequency / presence penalties, logprobs, echo, best_of != 1, a logit_bias,
// tools / functions, a response_format other than text.
#ifndef DK_TOOLS_SERVE_OPENAI_API_H_
#define DK_TOOLS_SERVE_OPENAI_API_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/decodekit.h"

namespace dk::serve {

// An error as the OpenAI API reports one: an HTTP status and
// {"error": {"message", "type", "param", "code"}} ("" param / code: null).
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;

  std::string Body() const;  // the JSON body
};

enum class Endpoint { kCompletions, kChat };

struct Request {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                          // "" when the body names none
  std::string prompt;                         // kCompletions
  std::vector<decodekit::Message> messages;   // kChat
  std::optional<int> max_tokens;              // absent: see DefaultMaxTokens
  decodekit::SamplingOptions sampling;        // temperature 1 unless given (OpenAI's default)
  bool seed_given = false;                    // without a seed each request draws one
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  bool ignore_eos = false;                    // llama-server's: generate past end-of-generation tokens
};

// The body of a POST to `endpoint`, checked: malformed JSON, a known field of the
// wrong type, a value out of range or an option the server does not support is an
// ApiError naming the parameter (status 400).
std::variant<Request, ApiError> ParseRequest(std::string_view body, Endpoint endpoint);

// max_tokens when a request gives none: 16 for a completion (OpenAI's), the rest of
// the context for a chat.
int DefaultMaxTokens(Endpoint endpoint, int prompt_tokens, int context);

// Whether `prompt_tokens` + `max_tokens` fit `context` positions; otherwise the 400
// OpenAI answers (code context_length_exceeded).
std::optional<ApiError> CheckContext(int prompt_tokens, int max_tokens, int context);

// "stop" (an end-of-generation token or a stop string), "length" (max_tokens).
const char* FinishReason(decodekit::StopReason stop);

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

// The JSON bodies. `id` is the response's ("cmpl-..." / "chatcmpl-..."), `created` its
// Unix time. Text is written with invalid UTF-8 replaced (U+FFFD), never refused.
std::string CompletionBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::string& text, const char* finish_reason, const Usage& usage);
// One server-sent event: "data: {chunk}\n\n". A chunk carries `text` (for a chat, as
// delta.content; `role_only`: the opening delta {"role": "assistant", "content": ""})
// or, with a finish reason, the last delta; `usage` chunks have no choices.
std::string StreamChunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                        const std::string& text, const char* finish_reason, bool role_only = false);
std::string StreamUsage(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                        const Usage& usage);
std::string StreamError(const ApiError& error);  // "data: {error body}\n\n"
inline constexpr const char kStreamDone[] = "data: [DONE]\n\n";

// GET /v1/models' body: the one model.
std::string ModelsBody(const std::string& model, int64_t created);

}  // namespace dk::serve

#endif  // DK_TOOLS_SERVE_OPENAI_API_H_
