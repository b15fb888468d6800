#include "tools/serve/openai_api.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace dk::serve {
namespace {

using json = nlohmann::json;

// Model text is whole UTF-8 characters by the API's promise, but a byte-level token
// can still end a reply in the middle of one: replace, never throw.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError Invalid(std::string param, std::string message) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError WrongType(const std::string& param, const char* want, const json& got) {
  return Invalid(param, absl::StrCat("'", param, "' must be ", want, ", not ", got.type_name()));
}

// A body's fields: each getter leaves the output alone when the field is absent or
// null (the OpenAI clients send null for "not given"), and records the first error.
class Fields {
 public:
  explicit Fields(const json& body) : body_(body) {}
  const std::optional<ApiError>& error() const { return error_; }

  const json* Get(const char* key) const {
    auto it = body_.find(key);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void Fail(ApiError e) {
    if (!error_) error_ = std::move(e);
  }

  void Bool(const char* key, bool* out) {
    if (const json* v = Get(key)) {
      if (!v->is_boolean()) return Fail(WrongType(key, "a boolean", *v));
      *out = v->get<bool>();
    }
  }
  void String(const char* key, std::string* out) {
    if (const json* v = Get(key)) {
      if (!v->is_string()) return Fail(WrongType(key, "a string", *v));
      *out = v->get<std::string>();
    }
  }
  // A number in [lo, hi] (open at `lo` when lo_open).
  void Number(const char* key, float* out, double lo, double hi, bool lo_open = false) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail(WrongType(key, "a number", *v));
    const double x = v->get<double>();
    if (x < lo || x > hi || (lo_open && x == lo)) {
      return Fail(Invalid(key, absl::StrCat("'", key, "' is ", x, ": expected ", lo_open ? "(" : "[", lo, ", ", hi,
                                            "]")));
    }
    *out = static_cast<float>(x);
  }
  void Int(const char* key, std::optional<int>* out, int64_t lo, int64_t hi) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return Fail(WrongType(key, "an integer", *v));
    if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(hi)
                                : v->get<int64_t>() < lo || v->get<int64_t>() > hi) {
      return Fail(Invalid(key, absl::StrCat("'", key, "' is ", v->dump(), ": expected ", lo, " to ", hi)));
    }
    *out = static_cast<int>(v->get<int64_t>());
  }
  // A parameter the server does not implement: accepted only at its no-op value.
  void Unsupported(const char* key, const json& no_op, const char* what) {
    const json* v = Get(key);
    if (v == nullptr || *v == no_op) return;
    if (no_op.is_number() && v->is_number() && v->get<double>() == no_op.get<double>()) return;
    Fail(Invalid(key, absl::StrCat("'", key, "' is not supported by this server (", what, ")")));
  }

 private:
  const json& body_;
  std::optional<ApiError> error_;
};

void ParseStop(Fields& f, std::vector<std::string>* stop) {
  const json* v = f.Get("stop");
  if (v == nullptr) return;
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) stop->push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array()) return f.Fail(WrongType("stop", "a string or a list of strings", *v));
  if (v->size() > 4) return f.Fail(Invalid("stop", absl::StrCat("'stop' has ", v->size(), " strings: at most 4")));
  for (const json& s : *v) {
    if (!s.is_string()) return f.Fail(WrongType("stop", "a string or a list of strings", s));
    if (!s.get_ref<const std::string&>().empty()) stop->push_back(s.get<std::string>());
  }
}

void ParsePrompt(Fields& f, std::string* prompt) {
  const json* v = f.Get("prompt");
  if (v == nullptr) return f.Fail(Invalid("prompt", "'prompt' is required"));
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) v = &(*v)[0];
  if (!v->is_string()) {
    return f.Fail(WrongType("prompt", "a string or a list of one string (token lists and batches are not supported)",
                            *v));
  }
  *prompt = v->get<std::string>();
}

// A message's content: a string, or text parts joined.
std::optional<std::string> Content(Fields& f, const json& content, size_t i) {
  const std::string param = absl::StrCat("messages[", i, "].content");
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    f.Fail(WrongType(param, "a string or a list of text parts", content));
    return std::nullopt;
  }
  std::string text;
  for (const json& part : content) {
    auto type = part.is_object() ? part.find("type") : part.end();
    auto body = part.is_object() ? part.find("text") : part.end();
    if (type == part.end() || *type != "text" || body == part.end() || !body->is_string()) {
      f.Fail(Invalid(param, absl::StrCat("'", param, "': only {\"type\": \"text\", \"text\": ...} parts are supported")));
      return std::nullopt;
    }
    text += body->get<std::string>();
  }
  return text;
}

void ParseMessages(Fields& f, std::vector<decodekit::Message>* messages) {
  const json* v = f.Get("messages");
  if (v == nullptr) return f.Fail(Invalid("messages", "'messages' is required"));
  if (!v->is_array()) return f.Fail(WrongType("messages", "a list of messages", *v));
  if (v->empty()) return f.Fail(Invalid("messages", "'messages' is empty"));
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return f.Fail(WrongType(param, "an object", m));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return f.Fail(Invalid(param + ".role", absl::StrCat("'", param, ".role' must be a string")));
    }
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // the newer OpenAI name for the system turn
    if (r != "system" && r != "user" && r != "assistant") {
      return f.Fail(Invalid(param + ".role", absl::StrCat("'", param, ".role' is \"", role->get<std::string>(),
                                                          "\": expected system, developer, user or assistant")));
    }
    auto content = m.find("content");
    std::optional<std::string> text = Content(f, content == m.end() ? json() : *content, i);
    if (!text) return;
    messages->push_back({r, *text});
  }
}

}  // namespace

std::string ApiError::Body() const {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return Dump(json{{"error", e}});
}

std::variant<Request, ApiError> ParseRequest(std::string_view body, Endpoint endpoint) {
  const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid("", "the request body is not valid JSON");
  if (!j.is_object()) return Invalid("", absl::StrCat("the request body must be a JSON object, not ", j.type_name()));
  Request r;
  r.endpoint = endpoint;
  r.sampling.temperature = 1.0f;
  Fields f(j);
  f.String("model", &r.model);
  if (endpoint == Endpoint::kCompletions) {
    ParsePrompt(f, &r.prompt);
  } else {
    ParseMessages(f, &r.messages);
  }
  const char* max_key = endpoint == Endpoint::kChat && f.Get("max_completion_tokens") ? "max_completion_tokens"
                                                                                       : "max_tokens";
  f.Int(max_key, &r.max_tokens, 1, std::numeric_limits<int>::max());
  f.Number("temperature", &r.sampling.temperature, 0.0, 2.0);
  f.Number("top_p", &r.sampling.top_p, 0.0, 1.0, /*lo_open=*/true);
  f.Number("min_p", &r.sampling.min_p, 0.0, 1.0);
  if (r.sampling.min_p >= 1.0f) f.Fail(Invalid("min_p", "'min_p' must be below 1"));
  f.Number("repetition_penalty", &r.sampling.repetition_penalty, 0.0, 100.0, /*lo_open=*/true);
  std::optional<int> top_k;
  f.Int("top_k", &top_k, 0, std::numeric_limits<int>::max());
  if (top_k) r.sampling.top_k = *top_k;
  if (const json* seed = f.Get("seed")) {
    if (!seed->is_number_integer()) {
      f.Fail(WrongType("seed", "an integer", *seed));
    } else {
      // Negative seeds (OpenAI takes any int64) map onto the same 64 bits.
      r.sampling.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                                   : static_cast<uint64_t>(seed->get<int64_t>());
      r.seed_given = true;
    }
  }
  ParseStop(f, &r.stop);
  f.Bool("stream", &r.stream);
  f.Bool("ignore_eos", &r.ignore_eos);
  if (const json* options = f.Get("stream_options")) {
    if (!options->is_object()) {
      f.Fail(WrongType("stream_options", "an object", *options));
    } else {
      Fields o(*options);
      o.Bool("include_usage", &r.include_usage);
      if (o.error()) f.Fail(Invalid("stream_options.include_usage", o.error()->message));
    }
  }
  std::optional<int> n;
  f.Int("n", &n, 1, std::numeric_limits<int>::max());
  if (n && *n != 1) f.Fail(Invalid("n", "'n' must be 1: this server returns one choice"));
  f.Unsupported("frequency_penalty", 0, "use repetition_penalty");
  f.Unsupported("presence_penalty", 0, "use repetition_penalty");
  f.Unsupported("logprobs", false, "no log probabilities");
  f.Unsupported("top_logprobs", 0, "no log probabilities");
  f.Unsupported("echo", false, "the prompt is not echoed");
  f.Unsupported("best_of", 1, "one choice");
  f.Unsupported("logit_bias", json::object(), "no logit bias");
  f.Unsupported("tools", json::array(), "no tool calls");
  f.Unsupported("functions", json::array(), "no function calls");
  f.Unsupported("response_format", json{{"type", "text"}}, "text only");
  if (f.error()) return *f.error();
  return r;
}

int DefaultMaxTokens(Endpoint endpoint, int prompt_tokens, int context) {
  const int rest = std::max(context - prompt_tokens, 0);
  return endpoint == Endpoint::kChat ? rest : std::min(16, rest);
}

std::optional<ApiError> CheckContext(int prompt_tokens, int max_tokens, int context) {
  if (static_cast<int64_t>(prompt_tokens) + max_tokens <= context && max_tokens >= 1) return std::nullopt;
  ApiError e;
  e.code = "context_length_exceeded";
  if (prompt_tokens < context) e.param = "max_tokens";  // else the prompt alone is too long
  e.message = absl::StrCat("This model's maximum context length is ", context, " tokens. However, you requested ",
                           static_cast<int64_t>(prompt_tokens) + max_tokens, " tokens (", prompt_tokens,
                           " in the prompt, ", max_tokens, " for the completion).");
  return e;
}

const char* FinishReason(decodekit::StopReason stop) {
  return stop == decodekit::StopReason::kMaxTokens ? "length" : "stop";
}

namespace {

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json Head(Endpoint endpoint, bool chunk, const std::string& id, int64_t created, const std::string& model) {
  const char* object = endpoint == Endpoint::kCompletions ? "text_completion"
                       : chunk                            ? "chat.completion.chunk"
                                                          : "chat.completion";
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

json FinishJson(const char* finish_reason) { return finish_reason ? json(finish_reason) : json(nullptr); }

}  // namespace

std::string CompletionBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::string& text, const char* finish_reason, const Usage& usage) {
  json j = Head(endpoint, false, id, created, model);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", FinishJson(finish_reason)}};
  if (endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  j["choices"] = json::array({choice});
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::string StreamChunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                        const std::string& text, const char* finish_reason, bool role_only) {
  json j = Head(endpoint, true, id, created, model);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", FinishJson(finish_reason)}};
  if (endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else if (role_only) {
    choice["delta"] = {{"role", "assistant"}, {"content", ""}};
  } else if (finish_reason != nullptr && text.empty()) {
    choice["delta"] = json::object();
  } else {
    choice["delta"] = {{"content", text}};
  }
  j["choices"] = json::array({choice});
  return "data: " + Dump(j) + "\n\n";
}

std::string StreamUsage(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                        const Usage& usage) {
  json j = Head(endpoint, true, id, created, model);
  j["choices"] = json::array();
  j["usage"] = UsageJson(usage);
  return "data: " + Dump(j) + "\n\n";
}

std::string StreamError(const ApiError& error) { return "data: " + error.Body() + "\n\n"; }

std::string ModelsBody(const std::string& model, int64_t created) {
  return Dump(json{{"object", "list"},
                   {"data", json::array({json{{"id", model}, {"object", "model"}, {"created", created},
                                              {"owned_by", "decodekit"}}})}});
}

}  // namespace dk::serve
