// The OpenAI request rules of tools/serve: each field mapped onto decodekit's options,
// each bad body refused with a 400 naming the parameter, the reply bodies' shape.
#include "tools/serve/openai_api.h"

#include <string>
#include <variant>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dk::serve {
namespace {

using json = nlohmann::json;

Request Parse(const std::string& body, Endpoint endpoint = Endpoint::kCompletions) {
  auto r = ParseRequest(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " refused: " << e->message;
  return std::holds_alternative<Request>(r) ? std::get<Request>(r) : Request{};
}

ApiError Refuse(const std::string& body, Endpoint endpoint = Endpoint::kCompletions) {
  auto r = ParseRequest(body, endpoint);
  if (std::holds_alternative<Request>(r)) ADD_FAILURE() << body << " was accepted";
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(ParseRequest, MapsTheSamplingFields) {
  const Request r = Parse(R"({"model": "m", "prompt": "Hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
                              "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "seed": 42,
                              "stop": ["\n", "END"], "stream": true, "stream_options": {"include_usage": true},
                              "user": "ignored", "n": 1, "frequency_penalty": 0, "ignore_eos": true})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "Hi");
  ASSERT_TRUE(r.max_tokens.has_value());
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(ParseRequest, DefaultsAreOpenAIs) {
  const Request r = Parse(R"({"prompt": ["one string"], "seed": null, "stop": "x"})");
  EXPECT_EQ(r.prompt, "one string");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.seed_given);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(static_cast<uint64_t>(Parse(R"({"prompt": "a", "seed": -1})").sampling.seed), ~uint64_t{0});
  EXPECT_EQ(DefaultMaxTokens(Endpoint::kCompletions, 10, 100), 16);
  EXPECT_EQ(DefaultMaxTokens(Endpoint::kCompletions, 90, 100), 10);
  EXPECT_EQ(DefaultMaxTokens(Endpoint::kChat, 10, 100), 90);
}

TEST(ParseRequest, ChatMessages) {
  const Request r = Parse(R"({"messages": [{"role": "developer", "content": "Be brief."},
                                           {"role": "user", "content": [{"type": "text", "text": "Hello, "},
                                                                         {"type": "text", "text": "there"}]},
                                           {"role": "assistant", "content": null}],
                              "max_completion_tokens": 3})",
                          Endpoint::kChat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Hello, there");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens.value_or(-1), 3);
}

TEST(ParseRequest, RefusesBadBodiesNamingTheParameter) {
  struct Case {
    const char* body;
    Endpoint endpoint;
    const char* param;
    const char* message;
  };
  const Endpoint kC = Endpoint::kCompletions, kChat = Endpoint::kChat;
  for (const Case& c : std::vector<Case>{
           {R"({"prompt": "a",)", kC, "", "not valid JSON"},
           {R"([1, 2])", kC, "", "must be a JSON object, not array"},
           {R"({"max_tokens": 4})", kC, "prompt", "'prompt' is required"},
           {R"({"prompt": [1, 2, 3]})", kC, "prompt", "token lists and batches are not supported"},
           {R"({"prompt": "a", "max_tokens": "16"})", kC, "max_tokens", "must be an integer, not string"},
           {R"({"prompt": "a", "max_tokens": -1})", kC, "max_tokens", "expected 1 to"},
           {R"({"prompt": "a", "max_tokens": 2.5})", kC, "max_tokens", "must be an integer, not number"},
           {R"({"prompt": "a", "max_tokens": 99999999999})", kC, "max_tokens", "expected 1 to"},
           {R"({"prompt": "a", "temperature": "hot"})", kC, "temperature", "must be a number, not string"},
           {R"({"prompt": "a", "temperature": 2.5})", kC, "temperature", "expected [0, 2]"},
           {R"({"prompt": "a", "top_p": 0})", kC, "top_p", "expected (0, 1]"},
           {R"({"prompt": "a", "top_k": -3})", kC, "top_k", "expected 0 to"},
           {R"({"prompt": "a", "min_p": 1})", kC, "min_p", "below 1"},
           {R"({"prompt": "a", "seed": 1.5})", kC, "seed", "must be an integer"},
           {R"({"prompt": "a", "stop": 5})", kC, "stop", "a string or a list of strings"},
           {R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})", kC, "stop", "at most 4"},
           {R"({"prompt": "a", "stream": "yes"})", kC, "stream", "must be a boolean"},
           {R"({"prompt": "a", "ignore_eos": 1})", kC, "ignore_eos", "must be a boolean"},
           {R"({"prompt": "a", "stream_options": {"include_usage": 1}})", kC, "stream_options.include_usage",
            "must be a boolean"},
           {R"({"prompt": "a", "model": 3})", kC, "model", "must be a string, not number"},
           {R"({"prompt": "a", "n": 2})", kC, "n", "'n' must be 1"},
           {R"({"prompt": "a", "presence_penalty": 0.5})", kC, "presence_penalty", "not supported"},
           {R"({"prompt": "a", "logprobs": 2})", kC, "logprobs", "not supported"},
           {R"({"prompt": "a", "echo": true})", kC, "echo", "not supported"},
           {R"({"messages": "hi"})", kChat, "messages", "a list of messages, not string"},
           {R"({"messages": []})", kChat, "messages", "is empty"},
           {R"({"prompt": "a"})", kChat, "messages", "'messages' is required"},
           {R"({"messages": [{"content": "x"}]})", kChat, "messages[0].role", "must be a string"},
           {R"({"messages": [{"role": "tool", "content": "x"}]})", kChat, "messages[0].role", "expected system"},
           {R"({"messages": [{"role": "user", "content": 7}]})", kChat, "messages[0].content",
            "a string or a list of text parts"},
           {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", kChat,
            "messages[0].content", "only {\"type\": \"text\""},
           {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", kChat, "tools",
            "not supported"},
       }) {
    const ApiError e = Refuse(c.body, c.endpoint);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.message), std::string::npos) << c.body << ": " << e.message;
    // The body is OpenAI's error object.
    const json body = json::parse(e.Body());
    EXPECT_EQ(body["error"]["type"], "invalid_request_error") << c.body;
    EXPECT_EQ(body["error"]["message"], e.message) << c.body;
    EXPECT_EQ(body["error"]["param"], *c.param ? json(c.param) : json(nullptr)) << c.body;
  }
}

TEST(CheckContext, RefusesWhatDoesNotFit) {
  EXPECT_FALSE(CheckContext(10, 90, 100).has_value());
  const auto over = CheckContext(10, 91, 100);
  ASSERT_TRUE(over.has_value());
  EXPECT_EQ(over->code, "context_length_exceeded");
  EXPECT_EQ(over->param, "max_tokens");
  EXPECT_NE(over->message.find("maximum context length is 100 tokens. However, you requested 101 tokens (10 in the "
                               "prompt, 91 for the completion)"),
            std::string::npos)
      << over->message;
  const auto prompt = CheckContext(100, 0, 100);  // the prompt alone fills it
  ASSERT_TRUE(prompt.has_value());
  EXPECT_EQ(prompt->param, "");
}

TEST(Bodies, CompletionAndChunks) {
  const json c = json::parse(CompletionBody(Endpoint::kCompletions, "cmpl-1", 5, "m", "Paris", "stop", {3, 1}));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "Paris");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"], (json{{"prompt_tokens", 3}, {"completion_tokens", 1}, {"total_tokens", 4}}));
  const json chat = json::parse(CompletionBody(Endpoint::kChat, "chatcmpl-1", 5, "m", "Hi", "length", {2, 7}));
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "Hi"}}));
  EXPECT_EQ(chat["usage"]["total_tokens"], 9);

  const auto event = [](const std::string& sse) {
    EXPECT_EQ(sse.rfind("data: ", 0), 0u) << sse;
    EXPECT_EQ(sse.substr(sse.size() - 2), "\n\n") << sse;
    return json::parse(sse.substr(6));
  };
  const json role = event(StreamChunk(Endpoint::kChat, "id", 1, "m", "", nullptr, true));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(event(StreamChunk(Endpoint::kChat, "id", 1, "m", "Par", nullptr))["choices"][0]["delta"]["content"],
            "Par");
  const json last = event(StreamChunk(Endpoint::kChat, "id", 1, "m", "", "stop"));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(event(StreamChunk(Endpoint::kCompletions, "id", 1, "m", "is", nullptr))["choices"][0]["text"], "is");
  const json usage = event(StreamUsage(Endpoint::kChat, "id", 1, "m", {4, 2}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);
  // Invalid UTF-8 (half a character) is replaced, not thrown on.
  EXPECT_EQ(event(StreamChunk(Endpoint::kCompletions, "id", 1, "m", "\xE2\x82", nullptr))["choices"][0]["text"],
            "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace dk::serve
